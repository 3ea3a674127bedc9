import { Command, InvalidArgumentError } from 'commander';
import { createClient, IronflowClient, RunCancelledError, RunFailedError } from '@ironflow/sdk';
import { devCommand } from './dev-command';
import { printRun, printRunList } from './print';

/**
 * The `ironflow` CLI: `dev`, `emit`, `invoke`, `run get|list|cancel`. Every client command takes
 * `--server URL` (default `$IRONFLOW_SERVER_URL`, else http://localhost:9123), `--env NAME` and
 * `--json` (print the API's JSON instead of text).
 */
export function buildProgram(): Command {
  const program = new Command('ironflow').description('Ironflow: durable functions').showHelpAfterError();
  program.option('--server <url>', 'engine URL (default $IRONFLOW_SERVER_URL or http://localhost:9123)').option('--env <name>', 'environment (X-Ironflow-Environment)');
  const client = (): IronflowClient => {
    const o = program.opts<{ server?: string; env?: string }>();
    return createClient({ serverUrl: o.server, environment: o.env });
  };

  program.addCommand(devCommand());

  program
    .command('emit')
    .description('emit an event, starting the runs whose triggers match it')
    .argument('<name>', 'event name, e.g. order.placed')
    .option('--data <json>', 'event data as JSON', parseJson, {})
    .option('--idempotency-key <key>', 'an event with a key already used starts nothing new')
    .option('--wait', 'wait for the first run to finish and print its outcome')
    .option('--timeout <ms>', 'how long --wait waits, ms', parsePositiveInt, 30_000)
    .option('--json', 'print JSON')
    .action(async (name: string, o: { data: unknown; idempotencyKey?: string; wait?: boolean; timeout: number; json?: boolean }) => {
      const c = client();
      if (!o.wait) {
        const res = await c.emit(name, o.data, { idempotencyKey: o.idempotencyKey });
        if (o.json) console.log(JSON.stringify(res, null, 2));
        else console.log(`event ${res.eventId} started ${res.runIds.length} run(s)${res.runIds.map((id) => `\n  ${id}`).join('')}`);
        return;
      }
      try {
        const res = await c.emitSync(name, o.data, { timeoutMs: o.timeout, idempotencyKey: o.idempotencyKey });
        if (o.json) console.log(JSON.stringify(res, null, 2));
        else console.log(`run ${res.runId} (${res.functionId}) ${res.status} in ${res.durationMs} ms\noutput: ${JSON.stringify(res.output, null, 2)}`);
      } catch (err) {
        if (err instanceof RunFailedError || err instanceof RunCancelledError) {
          console.log(o.json ? JSON.stringify({ status: err instanceof RunFailedError ? 'failed' : 'cancelled', message: err.message }, null, 2) : `run ${err.message}`);
          process.exitCode = 2;
          return;
        }
        throw err;
      }
    });

  program
    .command('invoke')
    .description('run one function directly and wait for its outcome')
    .argument('<function>', 'function id, e.g. payment.charge')
    .option('--data <json>', 'the input, as JSON (the run sees it as event.data)', parseJson, {})
    .option('--timeout <ms>', 'how long to wait, ms', parsePositiveInt, 30_000)
    .option('--json', 'print JSON')
    .action(async (fn: string, o: { data: unknown; timeout: number; json?: boolean }) => {
      try {
        const res = await client().invoke(fn, o.data, { timeoutMs: o.timeout });
        if (o.json) console.log(JSON.stringify(res, null, 2));
        else console.log(`run ${res.runId} (${res.functionId}) ${res.status} in ${res.durationMs} ms\noutput: ${JSON.stringify(res.output, null, 2)}`);
      } catch (err) {
        if (err instanceof RunFailedError || err instanceof RunCancelledError) {
          console.log(o.json ? JSON.stringify({ status: err instanceof RunFailedError ? 'failed' : 'cancelled', message: err.message }, null, 2) : `run ${err.message}`);
          process.exitCode = 2;
          return;
        }
        throw err;
      }
    });

  const run = program.command('run').description('read and cancel runs');
  run
    .command('get')
    .description('show a run with its steps, child runs and history (retries)')
    .argument('<id>', 'run id')
    .option('--json', 'print JSON')
    .action(async (id: string, o: { json?: boolean }) => {
      const c = client();
      const [r, steps] = await Promise.all([c.getRun(id), c.getRunSteps(id)]);
      if (o.json) console.log(JSON.stringify({ run: r, ...steps }, null, 2));
      else printRun(r, steps);
    });
  run
    .command('list')
    .description('list runs, newest first')
    .option('--function <id>', 'only runs of this function')
    .option('--status <status>', 'only runs in this status (running, completed, failed…)')
    .option('--limit <n>', 'page size', parsePositiveInt, 20)
    .option('--cursor <cursor>', 'the nextCursor of the previous page')
    .option('--json', 'print JSON')
    .action(async (o: { function?: string; status?: string; limit: number; cursor?: string; json?: boolean }) => {
      const res = await client().listRuns({ functionId: o.function, status: o.status as never, limit: o.limit, cursor: o.cursor });
      if (o.json) console.log(JSON.stringify(res, null, 2));
      else printRunList(res);
    });
  run
    .command('cancel')
    .description('cancel a run; prints the outcome that stands')
    .argument('<id>', 'run id')
    .option('--reason <text>', 'why', '')
    .option('--json', 'print JSON')
    .action(async (id: string, o: { reason: string; json?: boolean }) => {
      const r = await client().cancelRun(id, o.reason);
      if (o.json) console.log(JSON.stringify(r, null, 2));
      else console.log(`run ${r.id} is ${r.status}`);
    });
  return program;
}

function parseJson(value: string): unknown {
  try {
    return JSON.parse(value);
  } catch (err) {
    throw new InvalidArgumentError(`not JSON: ${(err as Error).message}`);
  }
}

function parsePositiveInt(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n <= 0) throw new InvalidArgumentError('a positive whole number');
  return n;
}
