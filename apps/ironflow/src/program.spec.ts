import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FUNCTION_OPTIONS } from '@ironflow/engine';
import { loadSettings } from '@ironflow/services';
import { FakeReply, FakeServer, RecordedRequest, startFakeServer } from '@ironflow/sdk/testing';
import { createClient } from '@ironflow/sdk';
import { runCli, USAGE_HINT } from './program';
import { secretCommand } from './security-commands';

const PREFIX = '/ironflow.v1.IronflowService/';

/** Runs the CLI against `server` and collects what it printed. */
async function cli(server: string, ...args: string[]): Promise<{ code: number; out: string[]; err: string[] }> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runCli(['node', 'ironflow', '--server', server, ...args], { out: (t) => out.push(t), err: (t) => err.push(t) });
  return { code, out, err };
}

const jsonParseError = (text: string): string => {
  try {
    JSON.parse(text);
  } catch (e) {
    return (e as Error).message;
  }
  throw new Error(`${text} parses`);
};

describe('ironflow CLI', () => {
  let server: FakeServer;
  let replies: Record<string, (req: RecordedRequest) => FakeReply>;

  beforeAll(async () => {
    server = await startFakeServer((req) => {
      const method = req.path.startsWith(PREFIX) ? req.path.slice(PREFIX.length) : `${req.method} ${req.path}`;
      return replies[method]?.(req) ?? { status: 404, body: { code: 'unimplemented', message: `no route ${req.path}` } };
    });
  });
  beforeEach(() => {
    replies = {};
    server.requests.length = 0;
  });
  afterAll(() => server.close());

  describe('emit --wait and invoke outcomes', () => {
    it('invoke: a completed run prints its outcome and exits 0', async () => {
      replies.InvokeFunctionSync = () => ({ status: 200, body: { runId: 'run-1', functionId: 'pay', status: 'completed', output: { ok: true }, durationMs: 12 } });
      const res = await cli(server.url, 'invoke', 'pay', '--data', '{"amount":5}', '--timeout', '500');
      expect(res).toEqual({ code: 0, out: ['run run-1 (pay) completed in 12 ms\noutput: {\n  "ok": true\n}'], err: [] });
      expect(server.requests[0].body).toEqual({ functionId: 'pay', input: { amount: 5 }, timeoutMs: 500 });
    });

    it('invoke: a run still running at the timeout prints "timed out" and exits 3', async () => {
      replies.InvokeFunctionSync = () => ({ status: 200, body: { runId: 'run-2', functionId: 'pay', status: 'running', durationMs: 500 } });
      expect(await cli(server.url, 'invoke', 'pay', '--timeout', '500')).toEqual({ code: 3, out: ['timed out after 500 ms: run run-2 (pay) is running'], err: [] });
      const json = await cli(server.url, 'invoke', 'pay', '--timeout', '500', '--json');
      expect(json.code).toBe(3);
      expect(JSON.parse(json.out[0])).toEqual({ runId: 'run-2', functionId: 'pay', status: 'running', durationMs: 500 });
      replies.InvokeFunctionSync = () => ({ status: 200, body: { runId: 'run-2', functionId: 'pay', status: 'waiting_for_capacity', durationMs: 500 } });
      expect(await cli(server.url, 'invoke', 'pay', '--timeout', '500')).toEqual({
        code: 3,
        out: ['timed out after 500 ms: run run-2 (pay) is waiting_for_capacity: queued, no worker or push endpoint has taken it (is a worker serving pay running? `function list` shows its mode, `instance status` a freeze)'],
        err: [],
      });
    });

    const runView = (over: Record<string, unknown>) => ({
      id: 'run-3', functionId: 'ship', functionVersion: 1, eventId: 'evt-1', executionMode: 'push', status: 'running', attempt: 1, maxAttempts: 3, input: {},
      createdAt: '2026-01-01T00:00:00.000Z', updatedAt: '2026-01-01T00:00:00.000Z', startedAt: '2026-01-01T00:00:00.000Z', ...over,
    });

    it('emit --wait prints the event and run ids as soon as Trigger answers, before the outcome is known', async () => {
      replies.Trigger = () => ({ status: 200, body: { eventId: 'evt-1', runIds: ['run-3'] } });
      let reads = 0;
      const printed: string[] = [];
      let printedBeforeEnd: string[] = [];
      replies.GetRun = () => {
        reads += 1;
        if (reads === 2) printedBeforeEnd = [...printed];
        return { status: 200, body: runView(reads < 3 ? {} : { status: 'completed', output: { ok: 1 }, endedAt: '2026-01-01T00:00:00.040Z' }) };
      };
      const code = await runCli(['node', 'ironflow', '--server', server.url, 'emit', 'order.placed', '--wait'], { out: (t) => printed.push(t), err: (t) => printed.push(t) });
      expect(code).toBe(0);
      expect(printedBeforeEnd).toEqual(['event evt-1 started 1 run(s)\n  run-3']);
      expect(printed).toEqual(['event evt-1 started 1 run(s)\n  run-3', 'run run-3 (ship) completed in 40 ms\noutput: {\n  "ok": 1\n}']);
      expect(server.requests[0].body).toEqual({ event: 'order.placed', data: {} });
    });

    it('emit --wait: a run waiting at the timeout prints "timed out" and exits 3', async () => {
      replies.Trigger = () => ({ status: 200, body: { eventId: 'evt-1', runIds: ['run-3'] } });
      replies.GetRun = () => ({ status: 200, body: runView({ status: 'waiting' }) });
      const res = await cli(server.url, 'emit', 'order.placed', '--wait', '--timeout', '250');
      expect(res).toEqual({ code: 3, out: ['event evt-1 started 1 run(s)\n  run-3', 'timed out after 250 ms: run run-3 (ship) is waiting'], err: [] });
    });

    it('emit --wait keeps reading through a draining engine (unavailable) and reports the outcome', async () => {
      replies.Trigger = () => ({ status: 200, body: { eventId: 'evt-1', runIds: ['run-3'] } });
      let reads = 0;
      replies.GetRun = () =>
        ++reads === 1 ? { status: 503, body: { code: 'unavailable', message: 'the engine is shutting down', ironflowCode: 'UNAVAILABLE' } } : { status: 200, body: runView({ status: 'cancelled' }) };
      expect(await cli(server.url, 'emit', 'order.placed', '--wait')).toEqual({ code: 2, out: ['event evt-1 started 1 run(s)\n  run-3', 'run run-3 (ship) was cancelled'], err: [] });
    });

    it('emit --wait for an event that starts no run: error NO_RESULTS, exit 1', async () => {
      replies.Trigger = () => ({ status: 200, body: { eventId: 'evt-9', runIds: [] } });
      const res = await cli(server.url, 'emit', 'nobody.listens', '--wait');
      expect(res).toEqual({ code: 1, out: ['event evt-9 started 0 run(s)'], err: ['error [NO_RESULTS]: event "nobody.listens" started no run (no function is triggered by it)'] });
    });

    it('emit --timeout without --wait is refused before anything is emitted (it would be ignored), exit 1', async () => {
      replies.Trigger = () => ({ status: 200, body: { eventId: 'evt-10', runIds: ['run-10'] } });
      const res = await cli(server.url, 'emit', 'order.placed', '--timeout', '5s');
      expect(res).toEqual({ code: 1, out: [], err: ['error [INVALID_ARGUMENT]: --timeout is how long --wait waits: give --wait too (without it emit returns once the event is accepted)'] });
      expect(server.requests).toEqual([]);
      expect((await cli(server.url, 'emit', 'order.placed')).code).toBe(0);
    });

    it('emit says which functions were debounced (Trigger debouncedFunctionIds); with --wait and no run: FUNCTION_DEBOUNCED, exit 1', async () => {
      replies.Trigger = () => ({ status: 200, body: { eventId: 'evt-d', runIds: [], debouncedFunctionIds: ['search.index'] } });
      const note = 'function search.index debounced: its run starts once its debounce period passes without another event of its key';
      expect(await cli(server.url, 'emit', 'doc.changed')).toEqual({ code: 0, out: ['event evt-d started 0 run(s)', note], err: [] });
      expect(await cli(server.url, 'emit', 'doc.changed', '--wait')).toEqual({
        code: 1,
        out: ['event evt-d started 0 run(s)', note],
        err: ['error [FUNCTION_DEBOUNCED]: event "doc.changed" started no run now: debounced search.index (the run starts after the debounce period; follow it with run list)'],
      });
      expect(JSON.parse((await cli(server.url, 'emit', 'doc.changed', '--json')).out[0])).toEqual({ eventId: 'evt-d', runIds: [], debouncedFunctionIds: ['search.index'], duplicate: false });
    });

    it('emit says when the event was a duplicate (Trigger duplicate: its idempotency key was used before) and lists the first event\'s runs', async () => {
      replies.Trigger = () => ({ status: 200, body: { eventId: 'evt-1', runIds: ['run-1', 'run-2'], duplicate: true } });
      expect(await cli(server.url, 'emit', 'order.placed', '--idempotency-key', 'order-7')).toEqual({
        code: 0,
        out: ['duplicate event: idempotency key "order-7" was used by event evt-1, so nothing new was stored or started; its 2 run(s)\n  run-1\n  run-2'],
        err: [],
      });
      expect(server.requests[0].body).toEqual({ event: 'order.placed', data: {}, idempotencyKey: 'order-7' });
      expect(JSON.parse((await cli(server.url, 'emit', 'order.placed', '--idempotency-key', 'order-7', '--json')).out[0])).toEqual({ eventId: 'evt-1', runIds: ['run-1', 'run-2'], debouncedFunctionIds: [], duplicate: true });
    });

    it('a failed run prints "run <id> (<function>) failed: [CODE] message" and exits 2; --json prints JSON lines: the ids, then status, ids and error', async () => {
      replies.Trigger = () => ({ status: 200, body: { eventId: 'e', runIds: ['run-4'] } });
      replies.GetRun = () => ({ status: 200, body: runView({ id: 'run-4', status: 'failed', error: { message: 'carrier down', code: 'STEP_FAILED' } }) });
      expect(await cli(server.url, 'emit', 'order.placed', '--wait')).toEqual({ code: 2, out: ['event e started 1 run(s)\n  run-4', 'run run-4 (ship) failed: [STEP_FAILED] carrier down'], err: [] });
      const json = await cli(server.url, 'emit', 'order.placed', '--wait', '--json');
      expect(json.code).toBe(2);
      expect(json.out.map((line) => JSON.parse(line))).toEqual([
        { eventId: 'e', runIds: ['run-4'], debouncedFunctionIds: [], duplicate: false },
        { status: 'failed', runId: 'run-4', functionId: 'ship', error: { message: 'carrier down', code: 'STEP_FAILED' } },
      ]);
    });

    it('a cancelled run exits 2', async () => {
      replies.InvokeFunctionSync = () => ({ status: 200, body: { runId: 'run-5', functionId: 'pay', status: 'cancelled' } });
      expect(await cli(server.url, 'invoke', 'pay')).toEqual({ code: 2, out: ['run run-5 (pay) was cancelled'], err: [] });
      const json = await cli(server.url, 'invoke', 'pay', '--json');
      expect(JSON.parse(json.out[0])).toEqual({ status: 'cancelled', runId: 'run-5', functionId: 'pay' });
    });

    it('run get shows a cancel_on cancel\'s cause: the event in the error and cancel-on-event in the history', async () => {
      replies.GetRun = () => ({ status: 200, body: { id: 'run-6', functionId: 'ship', functionVersion: 1, executionMode: 'pull', eventId: 'evt-0', status: 'cancelled', attempt: 1, maxAttempts: 3, createdAt: '2025-01-01T00:00:00.000Z', updatedAt: '2025-01-01T00:00:01.000Z', error: { message: 'cancel_on: order.cancelled evt-9', code: 'CANCELLED' } } });
      replies.GetRunSteps = () => ({ status: 200, body: { steps: [], history: [{ eventType: 'run.created', cause: 'trigger', ts: '2025-01-01T00:00:00.000Z' }, { eventType: 'run.cancelled', cause: 'cancel-on-event', ts: '2025-01-01T00:00:01.000Z' }] } });
      const res = await cli(server.url, 'run', 'get', 'run-6');
      expect(res.code).toBe(0);
      expect(res.out[0]).toContain('error      [CANCELLED] cancel_on: order.cancelled evt-9');
      expect(res.out[0]).toContain('2025-01-01T00:00:01.000Z run.cancelled: cancel-on-event');
    });

    it('run get shows a user cancel\'s reason in the history and each step\'s start and end (injected outputs marked)', async () => {
      replies.GetRun = () => ({ status: 200, body: { id: 'run-7', functionId: 'ship', functionVersion: 1, executionMode: 'pull', eventId: 'evt-0', status: 'cancelled', attempt: 1, maxAttempts: 3, createdAt: '2025-01-01T00:00:00.000Z', updatedAt: '2025-01-01T00:00:09.000Z', error: { message: 'customer called', code: 'CANCELLED' } } });
      replies.GetRunSteps = () => ({
        status: 200,
        body: {
          steps: [
            { id: 's1', name: 'load', type: 'run', status: 'completed', output: 1, sequence: 0, createdAt: '2025-01-01T00:00:02.000Z', startedAt: '2025-01-01T00:00:01.250Z', endedAt: '2025-01-01T00:00:02.000Z' },
            { id: 's2', name: 'price', type: 'run', status: 'completed', output: 12, sequence: 1, createdAt: '2025-01-01T00:00:03.000Z', startedAt: '2025-01-01T00:00:03.000Z', endedAt: '2025-01-01T00:00:04.000Z', injected: true },
            { id: 's3', name: 'nap', type: 'sleep', status: 'waiting', sequence: 2, createdAt: '2025-01-01T00:00:05.000Z', startedAt: '2025-01-01T00:00:05.000Z', wakeAt: '2025-01-01T01:00:00.000Z' },
          ],
          history: [{ eventType: 'run.cancelled', cause: 'user-cancel', data: { status: 'cancelled', attempt: 1, error: { message: 'customer called', code: 'CANCELLED' } }, ts: '2025-01-01T00:00:09.000Z' }],
        },
      });
      const res = await cli(server.url, 'run', 'get', 'run-7');
      expect(res.code).toBe(0);
      const lines = res.out[0].split('\n');
      expect(lines).toContain('     started 2025-01-01T00:00:01.250Z  ended 2025-01-01T00:00:02.000Z');
      expect(lines).toContain('     started 2025-01-01T00:00:03.000Z  ended 2025-01-01T00:00:04.000Z  (output injected)');
      expect(lines).toContain('     started 2025-01-01T00:00:05.000Z');
      expect(lines).toContain('  2025-01-01T00:00:09.000Z run.cancelled: user-cancel (customer called)');
    });

    it('run get shows a retry\'s error once when the history row\'s cause is that message', async () => {
      const message = "push endpoint did not answer within the function's timeout of 3000 ms";
      replies.GetRun = () => ({ status: 200, body: { id: 'run-8', functionId: 'ship', functionVersion: 1, executionMode: 'push', eventId: 'evt-0', status: 'failed', attempt: 2, maxAttempts: 2, createdAt: 't', updatedAt: 't' } });
      replies.GetRunSteps = () => ({
        status: 200,
        body: {
          steps: [],
          history: [
            { eventType: 'run.retry_scheduled', cause: message, data: { error: { message, code: 'FUNCTION_TIMED_OUT' } }, ts: '2025-01-01T00:00:03.000Z' },
            { eventType: 'run.status_changed', cause: 'report', data: { error: { message, code: 'FUNCTION_TIMED_OUT' } }, ts: '2025-01-01T00:00:07.000Z' },
          ],
        },
      });
      const lines = (await cli(server.url, 'run', 'get', 'run-8')).out[0].split('\n');
      expect(lines.slice(lines.indexOf('history') + 1)).toEqual([`  2025-01-01T00:00:03.000Z run.retry_scheduled: ${message}`, `  2025-01-01T00:00:07.000Z run.status_changed: report (${message})`]);
    });

    it('dev --help lists every function registration option with its semantics, refused ones as refused, and the default port', async () => {
      const res = await cli(server.url, 'dev', '--help');
      expect(res.code).toBe(0);
      const help = res.out.join('\n');
      expect(help.replace(/\s+/g, ' ')).toContain(`(default: IRONFLOW_PORT, else ${loadSettings({}).port})`);
      for (const option of FUNCTION_OPTIONS) {
        const line = help.split('\n').find((l) => l.trim().startsWith(`${option.name} `));
        expect(line).toBeDefined();
        expect(line).toContain(option.semantics.slice(0, 40));
        if (option.status === 'refused') expect(line).toContain('refused');
      }
    });

    it('documents the exit codes in the help of emit and invoke', async () => {
      for (const command of ['emit', 'invoke']) {
        const res = await cli(server.url, command, '--help');
        expect(res.code).toBe(0);
        const help = res.out.join('\n');
        expect(help).toContain('Exit codes:');
        expect(help).toContain('0  the run completed');
        expect(help).toContain('2  the run failed or was cancelled');
        expect(help).toContain('3  timed out');
        expect(help).toContain('1  error');
      }
      // The program's help names every exit code a command has, run cancel's 4 included.
      const top = (await cli(server.url, '--help')).out.join('\n');
      expect(top).toContain('run cancel also 4');
    });
  });

  describe('reading functions, events and runs', () => {
    it('function list prints one line per function and the count', async () => {
      replies['GET /api/v1/functions'] = () => ({
        status: 200,
        body: { functions: [
          { id: 'order.process', name: 'order.process', mode: 'pull', triggers: [{ event: 'order.placed' }], retry: {}, timeoutMs: 1, cancelOn: [], version: 2 },
          { id: 'payment.charge', name: 'payment.charge', mode: 'push', endpointUrl: 'http://w:3400/', triggers: [], retry: {}, timeoutMs: 1, cancelOn: [], version: 1 },
        ] },
      });
      const res = await cli(server.url, 'function', 'list');
      expect(res.code).toBe(0);
      expect(res.out).toEqual([
        `${'order.process'.padEnd(28)} pull v2   order.placed`,
        `${'payment.charge'.padEnd(28)} push v1   (invoke only)  → http://w:3400/`,
        '2 function(s)',
      ]);
      const json = await cli(server.url, 'function', 'list', '--json');
      expect(JSON.parse(json.out[0]).functions).toHaveLength(2);
    });

    it('event list passes the filters to GET /api/v1/events and prints the events and the next cursor', async () => {
      replies['GET /api/v1/events'] = () => ({
        status: 200,
        body: { events: [{ id: 'evt-2', name: 'order.placed', data: { orderId: 'A-7', note: 'x'.repeat(100) }, ts: '2026-01-01T00:00:01.000Z' }], nextCursor: '1767225601000:evt-2' },
      });
      const res = await cli(server.url, 'event', 'list', '--name', 'order.placed', '--limit', '1');
      expect(res.code).toBe(0);
      expect(server.requests[0].query.toString()).toBe('name=order.placed&limit=1');
      const data = JSON.stringify({ orderId: 'A-7', note: 'x'.repeat(100) });
      expect(res.out).toEqual([
        `evt-2  2026-01-01T00:00:01.000Z  ${'order.placed'.padEnd(24)} ${data.slice(0, 80)}… (${data.length - 80} more characters)`,
        '1 event(s); next page: --cursor 1767225601000:evt-2',
      ]);
    });

    it('run get cuts large values at 200 characters and --full shows them whole', async () => {
      const big = { blob: 'y'.repeat(500) };
      replies.GetRun = () => ({ status: 200, body: { id: 'r', functionId: 'f', functionVersion: 1, eventId: 'e', executionMode: 'push', status: 'completed', attempt: 1, maxAttempts: 3, input: {}, output: big, createdAt: 't', updatedAt: 't' } });
      replies.GetRunSteps = () => ({ status: 200, body: { steps: [{ id: 's', name: 'load', type: 'run', status: 'completed', output: big, sequence: 0, createdAt: 't' }] } });
      const text = JSON.stringify(big);
      const cut = await cli(server.url, 'run', 'get', 'r');
      expect(cut.out[0]).toContain(`  output     ${text.slice(0, 200)}… (${text.length - 200} more characters; --full shows all)`);
      expect(cut.out[0]).not.toContain(text);
      const full = await cli(server.url, 'run', 'get', 'r', '--full');
      expect(full.out[0]).toContain(`  output     ${text}\n`);
      expect(full.out[0]).toContain(`→ ${text}`);
    });

    it('dev that cannot start prints the error with its code (a port in use: SETTINGS_ERROR naming the --port it was given)', async () => {
      const dir = mkdtempSync(join(tmpdir(), 'ironflow-dev-'));
      const saved = process.env.IRONFLOW_DATABASE_URL;
      delete process.env.IRONFLOW_DATABASE_URL;
      try {
        const res = await cli(server.url, 'dev', '--port', new URL(server.url).port, '--db', join(dir, 'dev.db'));
        expect(res.code).toBe(1);
        expect(res.err).toEqual([expect.stringMatching(/^error \[SETTINGS_ERROR\]: --port: cannot listen on .*: the port is in use; stop what listens there or choose another port \(--port\)$/)]);
      } finally {
        if (saved !== undefined) process.env.IRONFLOW_DATABASE_URL = saved;
        rmSync(dir, { recursive: true, force: true });
      }
    });

    it('dev refuses an IRONFLOW_* variable that is no setting (a typo), naming the setting it resembles', async () => {
      process.env.IRONFLOW_TICK_MSS = '50';
      try {
        const res = await cli(server.url, 'dev', '--port', '0', '--db', 'unused.db');
        expect(res).toEqual({
          code: 1,
          out: [],
          err: ['error [SETTINGS_ERROR]: invalid configuration: IRONFLOW_TICK_MSS: not a setting (did you mean IRONFLOW_TICK_MS?) (the settings are listed in README.md "Running on PostgreSQL and NATS")'],
        });
      } finally {
        delete process.env.IRONFLOW_TICK_MSS;
      }
    });

    it('dev refuses --db while IRONFLOW_DATABASE_URL is set (the file would be ignored), before starting anything', async () => {
      const saved = process.env.IRONFLOW_DATABASE_URL;
      process.env.IRONFLOW_DATABASE_URL = 'postgres://nobody@127.0.0.1:1/none';
      try {
        const res = await cli(server.url, 'dev', '--port', '0', '--db', 'other.db');
        expect(res).toEqual({ code: 1, out: [], err: ['error [INVALID_ARGUMENT]: --db names a SQLite file, but IRONFLOW_DATABASE_URL is set and would be used instead: give one of them'] });
      } finally {
        if (saved !== undefined) process.env.IRONFLOW_DATABASE_URL = saved;
        else delete process.env.IRONFLOW_DATABASE_URL;
      }
    });

    it('dev --help tells how to switch to PostgreSQL and NATS', async () => {
      const res = await cli(server.url, 'dev', '--help');
      expect(res.code).toBe(0);
      const help = res.out.join('\n');
      expect(help).toContain('IRONFLOW_DATABASE_URL=postgres://');
      expect(help).toContain('NATS_URL=nats://');
    });
  });

  describe('run cancel', () => {
    const cancelled = (status: string) => () => ({ status: 200, body: { id: 'run-9', functionId: 'ship', functionVersion: 1, eventId: 'e', executionMode: 'push', status, attempt: 1, maxAttempts: 3, createdAt: 't', updatedAt: 't' } });

    it('exits 0 when the run is cancelled, now or by an earlier cancel', async () => {
      replies.CancelRun = cancelled('cancelled');
      expect(await cli(server.url, 'run', 'cancel', 'run-9')).toEqual({ code: 0, out: ['run run-9 is cancelled'], err: [] });
    });

    it.each(['completed', 'failed'])('exits 4 and says so when the run had already %s: the cancel changed nothing', async (status) => {
      replies.CancelRun = cancelled(status);
      expect(await cli(server.url, 'run', 'cancel', 'run-9')).toEqual({ code: 4, out: [`run run-9 is ${status}: it had already ended, so it was not cancelled`], err: [] });
      const json = await cli(server.url, 'run', 'cancel', 'run-9', '--json');
      expect(json.code).toBe(4);
      expect(JSON.parse(json.out[0])).toMatchObject({ id: 'run-9', status });
    });
  });

  describe('errors', () => {
    it("prints the engine's code when the server sent one, else the Connect code; exit 1", async () => {
      replies.GetRun = () => ({ status: 404, body: { code: 'not_found', message: 'run run-x not found', ironflowCode: 'RUN_NOT_FOUND' } });
      replies.GetRunSteps = () => ({ status: 200, body: { steps: [] } });
      expect(await cli(server.url, 'run', 'get', 'run-x')).toEqual({ code: 1, out: [], err: ['error [RUN_NOT_FOUND]: GetRun: run run-x not found'] });

      replies.CancelRun = () => ({ status: 400, body: { code: 'invalid_argument', message: 'bad id' } });
      expect(await cli(server.url, 'run', 'cancel', 'x')).toEqual({ code: 1, out: [], err: ['error [invalid_argument]: CancelRun: bad id'] });
    });

    it('with --json prints the error as {"error":{"code","message"}} on stderr', async () => {
      replies.GetRun = () => ({ status: 404, body: { code: 'not_found', message: 'run run-x not found', ironflowCode: 'RUN_NOT_FOUND' } });
      replies.GetRunSteps = () => ({ status: 200, body: { steps: [] } });
      const res = await cli(server.url, 'run', 'get', 'run-x', '--json');
      expect(res.code).toBe(1);
      expect(res.out).toEqual([]);
      expect(res.err.map((line) => JSON.parse(line))).toEqual([{ error: { code: 'RUN_NOT_FOUND', message: 'GetRun: run run-x not found' } }]);
    });

    it('an unreachable server: UNREACHABLE with the URL and a hint', async () => {
      const gone = await startFakeServer(() => ({ status: 200 }));
      await gone.close();
      expect(await cli(gone.url, 'run', 'list')).toEqual({
        code: 1,
        out: [],
        err: [`error [UNREACHABLE]: cannot reach ${gone.url} (is ironflow dev running? set --server or IRONFLOW_SERVER_URL)`],
      });
      const json = await cli(gone.url, 'invoke', 'pay', '--json');
      expect(json.err.map((line) => JSON.parse(line))).toEqual([
        { error: { code: 'UNREACHABLE', message: `cannot reach ${gone.url} (is ironflow dev running? set --server or IRONFLOW_SERVER_URL)` } },
      ]);
    });

    it('a server URL that is not an http(s) URL (a scheme left out) is refused by name, not reported unreachable', async () => {
      expect(await cli('localhost:9123', 'run', 'list')).toEqual({
        code: 1,
        out: [],
        err: ['error [VALIDATION_ERROR]: serverUrl: "localhost:9123" is not an http:// or https:// URL (e.g. http://localhost:9123)'],
      });
      const json = await cli('notaurl', 'run', 'get', 'x', '--json');
      expect(json.code).toBe(1);
      expect(json.err.map((line) => JSON.parse(line))).toEqual([{ error: { code: 'VALIDATION_ERROR', message: 'serverUrl: "notaurl" is not an http:// or https:// URL (e.g. http://localhost:9123)' } }]);
    });

    it('--data that is not JSON: "--data: not JSON: <reason>", nothing sent', async () => {
      expect(await cli(server.url, 'emit', 'x', '--data', '{bad')).toEqual({ code: 1, out: [], err: [`error [INVALID_ARGUMENT]: --data: not JSON: ${jsonParseError('{bad')}`] });
      const json = await cli(server.url, 'invoke', 'pay', '--data', 'nope', '--json');
      expect(json.err.map((line) => JSON.parse(line))).toEqual([{ error: { code: 'INVALID_ARGUMENT', message: `--data: not JSON: ${jsonParseError('nope')}` } }]);
      expect(server.requests).toEqual([]);
    });

    it('--data @path reads the JSON from a file (emit, invoke, publish); a file it cannot read is refused, nothing sent', async () => {
      const dir = mkdtempSync(join(tmpdir(), 'ironflow-data-'));
      try {
        const big = { items: Array.from({ length: 50_000 }, (_, i) => `item-${i}`) }; // ~650 kB: past what a command line comfortably holds
        writeFileSync(join(dir, 'order.json'), JSON.stringify(big));
        writeFileSync(join(dir, 'msg.json'), '"A-7"\n');
        replies.Trigger = () => ({ status: 200, body: { eventId: 'evt-1', runIds: ['run-3'] } });
        replies['POST /ironflow.v1.PubSubService/Publish'] = () => ({ status: 200, body: { eventId: 'ev-1', sequence: '7', duplicate: false } });
        expect((await cli(server.url, 'emit', 'order.placed', '--data', `@${join(dir, 'order.json')}`)).code).toBe(0);
        expect(server.requests[0].body).toEqual({ event: 'order.placed', data: big });
        expect((await cli(server.url, 'publish', 'orders.shipped', '--data', `@${join(dir, 'msg.json')}`)).code).toBe(0);
        expect(server.requests[1].body).toEqual({ topic: 'orders.shipped', data: 'A-7' });
        const missing = join(dir, 'none.json');
        const res = await cli(server.url, 'invoke', 'pay', '--data', `@${missing}`);
        expect(res).toEqual({ code: 1, out: [], err: [expect.stringMatching(new RegExp(`^error \\[INVALID_ARGUMENT\\]: --data @${missing.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: cannot read: ENOENT`))] });
        expect(server.requests).toHaveLength(2);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });

    it.each(['null', '42', '"text"', '[1,2]'])('--data %s (JSON, not an object) is refused: "--data: not a JSON object"', async (data) => {
      expect(await cli(server.url, 'invoke', 'pay', '--data', data)).toEqual({ code: 1, out: [], err: [`error [INVALID_ARGUMENT]: --data: not a JSON object: ${data}`] });
      expect(server.requests).toEqual([]);
    });

    it('a usage error from the argument parser is JSON too with --json', async () => {
      const res = await cli(server.url, 'invoke', 'pay', '--timeout', 'soon', '--json');
      expect(res.code).toBe(1);
      expect(res.err.map((line) => JSON.parse(line))).toEqual([{ error: { code: 'INVALID_ARGUMENT', message: "option '--timeout <duration>' argument 'soon' is invalid. Expected a duration: 30s, 5m, 1h or a number of ms, more than 0." } }]);
      const text = await cli(server.url, 'invoke', 'pay', '--timeout', 'soon');
      expect(text).toEqual({
        code: 1,
        out: [],
        err: ["error [INVALID_ARGUMENT]: option '--timeout <duration>' argument 'soon' is invalid. Expected a duration: 30s, 5m, 1h or a number of ms, more than 0.", USAGE_HINT],
      });
    });

    it.each([
      [['run', 'list', '--bogus'], "unknown option '--bogus'"],
      [['emit'], "missing required argument 'name'"],
      [['frobnicate'], "unknown command 'frobnicate'"],
      [['dev', '--port', 'abc'], "option '--port <port>' argument 'abc' is invalid. Expected a port number, 0 to 65535."],
      // An argument no command takes is refused, not dropped: `emit x '{"a":1}'` (no --data) emitted x with {} before.
      [['emit', 'order.placed', '{"orderId":"A-1"}'], "too many arguments for 'emit'. Expected 1 argument but got 2."],
      [['run', 'get', 'run-1', 'run-2'], "too many arguments for 'get'. Expected 1 argument but got 2."],
      [['run', 'list', '--status', 'done'], "option '--status <status>' argument 'done' is invalid. Allowed choices are waiting_for_capacity, running, waiting, paused, completed, failed, cancelled."],
      [['function', 'list', 'extra'], "too many arguments for 'list'. Expected 0 arguments but got 1."],
      [['instance', 'status', 'now'], "too many arguments for 'status'. Expected 0 arguments but got 1."],
      [['secret', 'list', 'x'], "too many arguments for 'list'. Expected 0 arguments but got 1."],
    ])('a usage error (%j) in text is "error [INVALID_ARGUMENT]: …" and a pointer to --help, not the whole help', async (args, message) => {
      expect(await cli(server.url, ...args)).toEqual({ code: 1, out: [], err: [`error [INVALID_ARGUMENT]: ${message}`, USAGE_HINT] });
      expect(server.requests).toEqual([]);
    });

    it.each([
      ['1500', 1500],
      ['30s', 30_000],
      ['5m', 300_000],
      ['1.5s', 1500],
      ['250ms', 250],
    ])('--timeout %s is %i ms on invoke (emit --wait reads it the same way)', async (flag, timeoutMs) => {
      replies.InvokeFunctionSync = () => ({ status: 200, body: { runId: 'run-1', functionId: 'pay', status: 'completed', output: {}, durationMs: 1 } });
      expect((await cli(server.url, 'invoke', 'pay', '--timeout', flag)).code).toBe(0);
      expect(server.requests[0].body).toMatchObject({ timeoutMs });
    });

    it.each(['0', '-5', '0s', '5 fortnights', '5mx'])('--timeout %s is refused as a usage error', async (flag) => {
      const res = await cli(server.url, 'invoke', 'pay', '--timeout', flag);
      expect(res.code).toBe(1);
      expect(server.requests).toEqual([]);
    });
  });

  describe('secrets and API keys', () => {
    const saved = { admin: process.env.IRONFLOW_ADMIN_KEY, api: process.env.IRONFLOW_API_KEY };
    beforeEach(() => {
      delete process.env.IRONFLOW_ADMIN_KEY;
      delete process.env.IRONFLOW_API_KEY;
    });
    afterAll(() => {
      if (saved.admin !== undefined) process.env.IRONFLOW_ADMIN_KEY = saved.admin;
      if (saved.api !== undefined) process.env.IRONFLOW_API_KEY = saved.api;
    });

    it('secret set/list/delete send --api-key and --env; list prints names, never values', async () => {
      replies['PUT /api/v1/secrets/STRIPE_KEY'] = () => ({ status: 200, body: { secret: { name: 'STRIPE_KEY', createdAt: 't0', updatedAt: 't1' } } });
      replies['GET /api/v1/secrets'] = () => ({ status: 200, body: { secrets: [{ name: 'STRIPE_KEY', createdAt: 't0', updatedAt: 't1' }] } });
      replies['DELETE /api/v1/secrets/STRIPE_KEY'] = () => ({ status: 200, body: { deleted: 'STRIPE_KEY' } });
      const common = ['--api-key', 'ifk_k', '--env', 'prod'];
      expect(await cli(server.url, ...common, 'secret', 'set', 'STRIPE_KEY', 'sk_live_1')).toEqual({ code: 0, out: ['secret STRIPE_KEY saved (updated t1)'], err: [] });
      expect(await cli(server.url, ...common, 'secret', 'list')).toEqual({ code: 0, out: ['STRIPE_KEY  (updated t1)'], err: [] });
      expect(await cli(server.url, ...common, 'secret', 'delete', 'STRIPE_KEY')).toEqual({ code: 0, out: ['secret STRIPE_KEY deleted'], err: [] });
      expect(server.requests.map((r) => [r.method, r.path, r.headers.authorization, r.headers['x-ironflow-environment']])).toEqual([
        ['PUT', '/api/v1/secrets/STRIPE_KEY', 'Bearer ifk_k', 'prod'],
        ['GET', '/api/v1/secrets', 'Bearer ifk_k', 'prod'],
        ['DELETE', '/api/v1/secrets/STRIPE_KEY', 'Bearer ifk_k', 'prod'],
      ]);
      expect(server.requests[0].body).toEqual({ value: 'sk_live_1' });
    });

    it('secret set without a value reads standard input, minus one trailing newline', async () => {
      replies['PUT /api/v1/secrets/FROM_STDIN'] = () => ({ status: 200, body: { secret: { name: 'FROM_STDIN', createdAt: 't0', updatedAt: 't0' } } });
      const out: string[] = [];
      const command = secretCommand({
        io: { out: (t) => out.push(t), err: (t) => out.push(`ERR ${t}`) },
        action: (fn) => fn,
        client: () => createClient({ serverUrl: server.url }),
        readStdin: async () => 'line one\nline two\n',
      });
      await command.parseAsync(['node', 'secret', 'set', 'FROM_STDIN']);
      expect(out).toEqual(['secret FROM_STDIN saved (updated t0)']);
      expect(server.requests[0].body).toEqual({ value: 'line one\nline two' });
    });

    it('a refused call prints the engine code: 401 UNAUTHENTICATED, 503 SECRETS_NOT_CONFIGURED', async () => {
      replies['GET /api/v1/secrets'] = () => ({ status: 401, body: { code: 'UNAUTHENTICATED', message: 'an API key is required: send Authorization: Bearer <key>' } });
      replies['PUT /api/v1/secrets/X'] = () => ({ status: 503, body: { code: 'SECRETS_NOT_CONFIGURED', message: 'secrets need IRONFLOW_SECRETS_KEY' } });
      expect(await cli(server.url, 'secret', 'list')).toEqual({ code: 1, out: [], err: ['error [UNAUTHENTICATED]: GET /api/v1/secrets: an API key is required: send Authorization: Bearer <key>'] });
      expect(await cli(server.url, 'secret', 'set', 'X', 'v')).toEqual({ code: 1, out: [], err: ['error [SECRETS_NOT_CONFIGURED]: PUT /api/v1/secrets/X: secrets need IRONFLOW_SECRETS_KEY'] });
    });

    it('apikey create/list/revoke authenticate with the admin key (--admin-key, else $IRONFLOW_ADMIN_KEY); create prints the key once', async () => {
      replies['POST /api/v1/api-keys'] = (req) => ({ status: 201, body: { key: 'ifk_0123_secret', apiKey: { id: '0123', prefix: 'ifk_0123', ...req.body, createdAt: 't0' } } });
      replies['GET /api/v1/api-keys'] = () => ({ status: 200, body: { apiKeys: [{ id: '0123', prefix: 'ifk_0123', project: 'shop', env: 'prod', name: '', createdAt: 't0' }] } });
      replies['DELETE /api/v1/api-keys/ifk_0123'] = () => ({ status: 200, body: { apiKey: { id: '0123', prefix: 'ifk_0123', project: 'shop', env: 'prod', name: '', createdAt: 't0', revokedAt: 't1' } } });
      const created = await cli(server.url, '--env', 'prod', 'apikey', 'create', '--project', 'shop', '--name', 'checkout', '--admin-key', 'ADMIN-1');
      expect(created.code).toBe(0);
      expect(created.out[0]).toMatch(/^ifk_0123_secret\n\nThis is the only time the key is shown\. ifk_0123  project shop  env prod  "checkout"/);
      expect(server.requests[0].body).toEqual({ project: 'shop', env: 'prod', name: 'checkout' });
      process.env.IRONFLOW_ADMIN_KEY = 'ADMIN-2';
      expect(await cli(server.url, 'apikey', 'list')).toEqual({ code: 0, out: ['ifk_0123  project shop  env prod  created t0'], err: [] });
      expect(await cli(server.url, 'apikey', 'revoke', 'ifk_0123')).toEqual({ code: 0, out: ['revoked ifk_0123  project shop  env prod  created t0  REVOKED t1'], err: [] });
      expect(server.requests.map((r) => r.headers.authorization)).toEqual(['Bearer ADMIN-1', 'Bearer ADMIN-2', 'Bearer ADMIN-2']);
    });

    it('instance freeze/thaw/status authenticate with the admin key and print state, since, by whom and the work held', async () => {
      const status = (state: string, over: Record<string, unknown> = {}) => ({
        state, version: 1, since: '2026-12-01T08:00:00.000Z', by: 'admin', reason: 'backup', held: { queued: 2, admissions: 1, sleeps: 0, wakes: 0, total: 3 }, ...over,
      });
      replies['POST /api/v1/instance/freeze'] = () => ({ status: 200, body: { changed: true, status: status('frozen') } });
      replies['POST /api/v1/instance/thaw'] = () => ({ status: 200, body: { changed: false, status: status('thawed', { reason: null }) } });
      replies['GET /api/v1/instance'] = () => ({ status: 200, body: status('frozen') });
      const held = 'held pending: 3 (queued segments 2, admissions 1, due sleeps 0, parent wakes 0)';
      expect(await cli(server.url, 'instance', 'freeze', '--reason', 'backup', '--admin-key', 'ADMIN-1')).toEqual({
        code: 0, out: [`instance frozen since 2026-12-01T08:00:00.000Z by admin (backup)\n${held}`], err: [],
      });
      expect(server.requests[0].body).toEqual({ reason: 'backup' });
      process.env.IRONFLOW_ADMIN_KEY = 'ADMIN-2';
      expect(await cli(server.url, 'instance', 'status')).toEqual({ code: 0, out: [`instance frozen since 2026-12-01T08:00:00.000Z by admin (backup)\n${held}`], err: [] });
      expect(await cli(server.url, 'instance', 'thaw')).toEqual({ code: 0, out: [`already thawed: nothing changed\ninstance thawed since 2026-12-01T08:00:00.000Z by admin\n${held}`], err: [] });
      expect(server.requests.map((r) => r.headers.authorization)).toEqual(['Bearer ADMIN-1', 'Bearer ADMIN-2', 'Bearer ADMIN-2']);
      replies['POST /api/v1/instance/freeze'] = () => ({ status: 503, body: { code: 'UNAVAILABLE', message: 'the freeze gave up on a lock after 500 ms' } });
      expect(await cli(server.url, 'instance', 'freeze')).toEqual({ code: 1, out: [], err: ['error [UNAVAILABLE]: POST /api/v1/instance/freeze: the freeze gave up on a lock after 500 ms'] });
    });

    it('dev --help documents the security settings and the secrets option', async () => {
      const res = await cli(server.url, 'dev', '--help');
      const help = res.out.join('\n');
      for (const text of ['IRONFLOW_REQUIRE_API_KEY', 'IRONFLOW_ADMIN_KEY', 'IRONFLOW_SECRETS_KEY', 'IRONFLOW_PUSH_ALLOWED_HOSTS', 'IRONFLOW_API_KEY_CACHE_MS', 'OPEN', 'SECRET_NOT_FOUND', '  secrets ']) {
        expect(help).toContain(text);
      }
    });
  });

  describe('pause, resume, inject and publish', () => {
    it('run pause / resume / paused / inject send the SDK calls and print what happened', async () => {
      replies.PauseRun = () => ({ status: 200, body: { status: 'pause_requested' } });
      replies['POST /api/v1/runs/resume'] = () => ({ status: 201, body: { id: 'r1', status: 'waiting_for_capacity' } });
      replies.GetPausedState = () => ({ status: 200, body: { steps: [{ id: 'r1:fetch:0', name: 'fetch', output: '{"price":12}', injected: true, completedAt: '2025-01-01T00:00:00Z' }], nextStepHint: 'nap', pauseReason: 'check' } });
      replies.InjectStepOutput = () => ({ status: 200, body: { stepId: 'r1:fetch:0', previousOutput: '{"price":10}' } });

      expect(await cli(server.url, 'run', 'pause', 'r1', '--reason', 'check')).toEqual({ code: 0, out: ['run r1: pause requested; it parks when its running segment ends'], err: [] });
      expect(server.requests[0].body).toEqual({ run_id: 'r1', reason: 'check' });
      expect((await cli(server.url, 'run', 'resume', 'r1')).out).toEqual(['run r1 is waiting_for_capacity']);
      expect(server.requests[1]).toMatchObject({ path: '/api/v1/runs/resume', body: { run_id: 'r1', from_step: '' } });
      expect((await cli(server.url, 'run', 'paused', 'r1')).out).toEqual(['run r1 is paused (check); parked at nap', '  r1:fetch:0  fetch [injected]  {"price":12}']);
      expect((await cli(server.url, 'run', 'inject', 'r1', 'r1:fetch:0', '--output', '{"price":12}')).out).toEqual(['step r1:fetch:0 set; it was {"price":10}']);
      expect(server.requests[3].body).toEqual({ run_id: 'r1', step_id: 'r1:fetch:0', new_output: '{"price":12}', reason: '' });
      expect(await cli(server.url, 'run', 'inject', 'r1', 's', '--output', '{bad')).toMatchObject({ code: 1, err: [`error [INVALID_ARGUMENT]: --output: not JSON: ${jsonParseError('{bad')}`] });
    });

    it('publish posts PubSubService/Publish with any JSON data and prints the stored message', async () => {
      replies['POST /ironflow.v1.PubSubService/Publish'] = () => ({ status: 200, body: { eventId: 'ev-1', sequence: '7', duplicate: false } });
      expect(await cli(server.url, 'publish', 'orders.shipped', '--data', '"A-7"', '--idempotency-key', 'k1')).toEqual({ code: 0, out: ['published ev-1 to orders.shipped (sequence 7)'], err: [] });
      expect(server.requests[0].body).toEqual({ topic: 'orders.shipped', data: 'A-7', idempotencyKey: 'k1' });
    });
  });
});
