/**
 * A preload (`node --require dist/bench/compare/trace-preload.js`, or in `NODE_OPTIONS`) of
 * `bench/compare/trace-latency`: it timestamps, in every process of a system under test, what a
 * TriggerSync call waits on, one line per event in `$IRONFLOW_TRACE_DIR/<pid>.log`:
 *
 *     <epoch ms, µs precision> <pid> <event>
 *
 * Events: `start <script>` (first line), each `pg` statement when it completes (`pg <ms> <SQL…>`,
 * so it started `<ms>` earlier), the HTTP server's requests (`srv-req`, `srv-fin`), undici's
 * client requests (`und-create`, `und-sent`, `und-headers`, `und-done`; Node's `fetch` and the
 * `undici` package publish the same channels), and NATS publishes and deliveries of STEPS hints
 * and RESULTS frames (`nats-pub`, `nats-recv`). Lines are buffered and written every second and
 * at exit. Bench-only: it patches `pg` and `nats` prototypes of the process it is loaded into.
 */
import { appendFileSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { subscribe } from 'node:diagnostics_channel';

const dir = process.env.IRONFLOW_TRACE_DIR ?? '/tmp/ironflow-trace';
mkdirSync(dir, { recursive: true });
const file = join(dir, `${process.pid}.log`);
const buffer: string[] = [];
const now = () => performance.timeOrigin + performance.now();

function flush(): void {
  if (buffer.length > 0) appendFileSync(file, buffer.splice(0).join('\n') + '\n');
}

/** Appends one event line. */
export function trace(event: string): void {
  buffer.push(`${now().toFixed(3)} ${process.pid} ${event}`);
  if (buffer.length > 2000) flush();
}

process.on('exit', flush);
setInterval(flush, 1000).unref();
trace(`start ${process.argv.slice(1, 3).join(' ')}`);

/** The module `name` as the process under test resolves it (its own node_modules). */
function load<T>(name: string): T | undefined {
  try {
    return require(require.resolve(name, { paths: [process.cwd(), __dirname] })) as T;
  } catch {
    return undefined;
  }
}

const oneLine = (sql: string) => sql.replace(/\s+/g, ' ').slice(0, 70);

type QueryFn = (this: unknown, config: unknown, ...rest: unknown[]) => unknown;
const pg = load<{ Client: { prototype: { query: QueryFn } } }>('pg');
if (pg) {
  const query = pg.Client.prototype.query;
  pg.Client.prototype.query = function (this: unknown, config: unknown, ...rest: unknown[]) {
    const sql = oneLine(typeof config === 'string' ? config : ((config as { text?: string } | null)?.text ?? '?'));
    const started = now();
    const result = query.call(this, config, ...rest);
    if (result && typeof (result as Promise<unknown>).then === 'function') {
      (result as Promise<unknown>).then(
        () => trace(`pg ${(now() - started).toFixed(3)} ${sql}`),
        () => trace(`pg-error ${(now() - started).toFixed(3)} ${sql}`),
      );
    }
    return result;
  };
}

/** The fields of an HTTP server request or an undici request that the lines name. */
type Traced = { request: { method: string; url?: string; origin?: string; path?: string } };
const on = (channel: string, line: (m: Traced['request']) => string) => subscribe(channel, (message) => trace(line((message as Traced).request)));
on('http.server.request.start', (r) => `srv-req ${r.method} ${r.url}`);
on('http.server.response.finish', (r) => `srv-fin ${r.method} ${r.url}`);
on('undici:request:create', (r) => `und-create ${r.method} ${r.origin}${r.path}`);
on('undici:client:sendHeaders', (r) => `und-sent ${r.method} ${r.path}`);
on('undici:request:headers', (r) => `und-headers ${r.path}`);
on('undici:request:trailers', (r) => `und-done ${r.path}`);

// NATS: the forwarded sync triggers, STEPS hints and RESULTS frames (their subjects from
// `.trigger.sync` / `.steps.` / `.results.` on).
const natsIndex = (() => {
  try {
    return require.resolve('nats', { paths: [process.cwd(), __dirname] });
  } catch {
    return undefined;
  }
})();
if (natsIndex) {
  type Callback = (err: unknown, msg: { subject?: string }) => unknown;
  type Impl = { prototype: { publish: (subject: string, ...rest: unknown[]) => unknown; subscribe: (subject: string, opts?: { callback?: Callback }) => unknown } };
  const impl = load<{ NatsConnectionImpl: Impl }>(join(dirname(natsIndex), 'lib/nats-base-client/nats.js'))?.NatsConnectionImpl;
  const hop = (subject: string) => {
    const at = subject.search(/\.(results|steps)\.|\.trigger\.sync$/);
    return at < 0 ? undefined : subject.slice(at + 1, at + 40);
  };
  if (impl) {
    const publish = impl.prototype.publish;
    impl.prototype.publish = function (this: unknown, subject: string, ...rest: unknown[]) {
      const short = hop(subject);
      if (short) trace(`nats-pub ${short}`);
      return publish.call(this, subject, ...rest);
    };
    const subscribe_ = impl.prototype.subscribe;
    impl.prototype.subscribe = function (this: unknown, subject: string, opts: { callback?: Callback } = {}) {
      const callback = opts.callback;
      if (!callback || !hop(subject)) return subscribe_.call(this, subject, opts);
      return subscribe_.call(this, subject, {
        ...opts,
        callback: (err: unknown, msg: { subject?: string }) => {
          trace(`nats-recv ${hop(msg?.subject ?? '') || ''}`);
          return callback(err, msg);
        },
      });
    };
  }
}
