import { readFileSync } from 'node:fs';
import ms from 'ms';
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { RUN_STATUSES } from '@ironflow/contracts';
import { createClient, IronflowClient, IronflowClientError, RunCancelledError, RunFailedError } from '@ironflow/sdk';
import { devCommand } from './dev-command';
import { apikeyCommand, secretCommand } from './security-commands';
import { instanceCommand } from './instance-command';
import {
  CliIO,
  CliUsageError,
  consoleIO,
  describeError,
  EXIT_CODES,
  formatError,
  printEventList,
  printFunctionList,
  printRun,
  printRunList,
  RUN_GET_VALUE_CHARS,
  runEndedOutput,
  runResultOutput,
  WAIT_EXIT_CODES_HELP,
} from './print';

/** What a CLI run ends with; actions set `exitCode` (see {@link EXIT_CODES}). */
export interface CliState {
  exitCode: number;
}

/**
 * The `ironflow` CLI: `dev`, `emit`, `invoke`, `publish`, `run get|list|cancel|pause|resume|paused|inject`,
 * `function list`, `event list`, `secret set|list|delete`, `apikey create|list|revoke`. Every
 * client command takes `--server URL` (default `$IRONFLOW_SERVER_URL`, else
 * http://localhost:9123), `--env NAME`, `--api-key KEY` (default `$IRONFLOW_API_KEY`) and `--json`
 * (print the API's JSON instead of text).
 *
 * Output goes through `io`: results to `io.out`; errors to `io.err` as `error [CODE]: message`
 * (CODE = the engine's code such as `RUN_NOT_FOUND` when the server sent one, else the Connect
 * code; `UNREACHABLE` when the engine cannot be reached), or with `--json` as
 * `{"error":{"code","message"}}`. Exit codes (set on `state`): 0 success, 1 error, and for
 * `emit --wait` / `invoke` 2 = run failed or cancelled, 3 = timed out, and for `run cancel` 4 = the
 * run had already completed or failed (not cancelled). Commander's own usage
 * errors (an unknown command or option, a missing argument or one too many) are thrown as `CommanderError` (exit override) and printed the same way, code
 * `INVALID_ARGUMENT` (text: followed by {@link USAGE_HINT}); `json` makes them JSON as well.
 */
export function buildProgram(io: CliIO = consoleIO, state: CliState = { exitCode: 0 }, json = false): Command {
  const program = new Command('ironflow').description('Ironflow: durable functions');
  // Set before the subcommands are created: they inherit output, exit override and help-after-error.
  program
    .exitOverride()
    // An argument no command takes is a usage error, not dropped: `emit x '{"a":1}'` without --data
    // would otherwise emit x with {}.
    .allowExcessArguments(false)
    .configureOutput({
      writeOut: (text) => io.out(text.replace(/\n$/, '')),
      writeErr: (text) => io.err(text.replace(/\n$/, '')),
      // Commander's usage errors get the code every other CLI error has, in text as in JSON.
      outputError: (text, write) => write(`${formatError({ code: 'INVALID_ARGUMENT', message: text.replace(/^error: /, '').trim() }, json)}\n`),
    })
    // A pointer to the help rather than the help itself: `dev --help` alone is some 60 lines, which buried the error.
    .showHelpAfterError(json ? false : USAGE_HINT);
  program
    .option('--server <url>', 'engine URL (default $IRONFLOW_SERVER_URL or http://localhost:9123)')
    .option('--env <name>', 'environment (X-Ironflow-Environment)')
    .option('--api-key <key>', 'API key sent as Authorization: Bearer (default $IRONFLOW_API_KEY)')
    .addHelpText('after', '\nExit codes: 0 success, 1 error; emit --wait and invoke also 2 (run failed or cancelled) and 3 (timed out); run cancel also 4 (the run had already completed or failed).');
  const client = (apiKey?: string): IronflowClient => {
    const o = program.opts<{ server?: string; env?: string; apiKey?: string }>();
    return createClient({ serverUrl: o.server, environment: o.env, apiKey: apiKey ?? o.apiKey });
  };

  /** Runs an action; an error is printed (text or JSON per its `--json`) and sets exit code 1. */
  const action =
    <A extends unknown[]>(fn: (...args: A) => Promise<void>) =>
    async (...args: A): Promise<void> => {
      try {
        await fn(...args);
      } catch (err) {
        const command = args[args.length - 1] as Command;
        const asJson = command.opts<{ json?: boolean }>().json === true;
        io.err(formatError(describeError(err, () => client().serverUrl), asJson));
        state.exitCode = EXIT_CODES.error;
      }
    };

  /**
   * Prints how a waited-for run ended and sets the exit code (0, 2 or 3); rethrows other errors.
   * `indent` is the JSON indentation (0: one line, for `emit --wait --json`'s JSON Lines).
   */
  const waited = async (wait: () => Promise<Parameters<typeof runResultOutput>[0]>, timeoutMs: number, asJson: boolean, indent = 2): Promise<void> => {
    try {
      const { text, exitCode } = runResultOutput(await wait(), timeoutMs, asJson, indent);
      io.out(text);
      state.exitCode = exitCode;
    } catch (err) {
      if (!(err instanceof RunFailedError || err instanceof RunCancelledError)) throw err;
      io.out(runEndedOutput(err, asJson, indent));
      state.exitCode = EXIT_CODES.runFailed;
    }
  };

  const dev = devCommand();
  dev.copyInheritedSettings(program);
  program.addCommand(dev);
  for (const command of [secretCommand({ io, action, client }), apikeyCommand({ io, action, client }), instanceCommand({ io, action, client })]) {
    command.copyInheritedSettings(program);
    for (const sub of command.commands) sub.copyInheritedSettings(program);
    program.addCommand(command);
  }

  program
    .command('emit')
    .description('emit an event, starting the runs whose triggers match it')
    .argument('<name>', 'event name, e.g. order.placed')
    .option('--data <json>', `event data, a JSON object (default {}); ${DATA_FROM_FILE_HELP}`)
    .option('--idempotency-key <key>', 'an event with a key already used starts nothing new: emit says "duplicate event" and lists the first event\'s runs (--wait waits for the first of them)')
    .option('--wait', 'print the event and run ids at once, then wait for the first run to finish and print its outcome')
    .option('--timeout <duration>', 'how long --wait waits: 30s, 5m, 1h or a number of ms', parseDurationOption, 30_000)
    .option('--json', 'print JSON')
    .addHelpText('after', `${WAIT_EXIT_CODES_HELP}\n(without --wait: 0 when the event was accepted, 1 on error)\nWith --wait --json: two JSON lines, {"eventId","runIds"} at once, then the outcome.`)
    .action(
      action(async (name: string, o: { data?: string; idempotencyKey?: string; wait?: boolean; timeout: number; json?: boolean }, command: Command) => {
        if (!o.wait && command.getOptionValueSource('timeout') === 'cli') throw new CliUsageError('--timeout is how long --wait waits: give --wait too (without it emit returns once the event is accepted)');
        const data = parseData(o.data);
        const c = client();
        const started = Date.now();
        const res = await c.emit(name, data, { idempotencyKey: o.idempotencyKey });
        if (o.json) io.out(JSON.stringify(res, null, o.wait ? 0 : 2));
        else {
          const runs = res.runIds.map((id) => `\n  ${id}`).join('');
          io.out(
            res.duplicate
              ? `duplicate event: idempotency key "${o.idempotencyKey}" was used by event ${res.eventId}, so nothing new was stored or started; its ${res.runIds.length} run(s)${runs}`
              : `event ${res.eventId} started ${res.runIds.length} run(s)${runs}`,
          );
          for (const fn of res.debouncedFunctionIds) io.out(`function ${fn} debounced: its run starts once its debounce period passes without another event of its key`);
        }
        if (!o.wait) return;
        // The ids are out before the wait: a developer (or a script) knows the run even if the wait is cut.
        const [first] = res.runIds;
        if (!first && res.debouncedFunctionIds.length > 0) {
          throw new IronflowClientError(`event "${name}" started no run now: debounced ${res.debouncedFunctionIds.join(', ')} (the run starts after the debounce period; follow it with run list)`, 'FUNCTION_DEBOUNCED', 200);
        }
        if (!first) throw new IronflowClientError(`event "${name}" started no run (no function is triggered by it)`, 'NO_RESULTS', 200);
        const timeoutMs = Math.max(1, o.timeout - (Date.now() - started));
        await waited(async () => ({ eventId: res.eventId, ...(await c.waitForRun(first, { timeoutMs })) }), o.timeout, o.json === true, o.json ? 0 : 2);
      }),
    );

  program
    .command('invoke')
    .description('run one function directly and wait for its outcome')
    .argument('<function>', 'function id, e.g. payment.charge')
    .option('--data <json>', `the input, a JSON object (the run sees it as event.data; default {}); ${DATA_FROM_FILE_HELP}`)
    .option('--timeout <duration>', 'how long to wait: 30s, 5m, 1h or a number of ms', parseDurationOption, 30_000)
    .option('--json', 'print JSON')
    .addHelpText('after', WAIT_EXIT_CODES_HELP)
    .action(
      action(async (fn: string, o: { data?: string; timeout: number; json?: boolean }) => {
        const data = parseData(o.data);
        await waited(() => client().invoke(fn, data, { timeoutMs: o.timeout }), o.timeout, o.json === true);
      }),
    );

  const run = program.command('run').description('read, cancel, pause and resume runs');
  run
    .command('get')
    .description('show a run with its steps, child runs and history (retries)')
    .argument('<id>', 'run id')
    .option('--full', `show input, outputs and errors whole (else each is cut at ${RUN_GET_VALUE_CHARS} characters)`)
    .option('--json', 'print JSON (always whole)')
    .action(
      action(async (id: string, o: { json?: boolean; full?: boolean }) => {
        const c = client();
        const [r, steps] = await Promise.all([c.getRun(id), c.getRunSteps(id)]);
        if (o.json) io.out(JSON.stringify({ run: r, ...steps }, null, 2));
        else printRun(r, steps, io.out, o.full ? Infinity : RUN_GET_VALUE_CHARS);
      }),
    );
  run
    .command('list')
    .description('list runs, newest first')
    .option('--function <id>', 'only runs of this function')
    .addOption(new Option('--status <status>', 'only runs in this status').choices(RUN_STATUSES))
    .option('--limit <n>', 'page size', parsePositiveInt, 20)
    .option('--cursor <cursor>', 'the nextCursor of the previous page')
    .option('--json', 'print JSON')
    .action(
      action(async (o: { function?: string; status?: string; limit: number; cursor?: string; json?: boolean }) => {
        const res = await client().listRuns({ functionId: o.function, status: o.status as never, limit: o.limit, cursor: o.cursor });
        if (o.json) io.out(JSON.stringify(res, null, 2));
        else printRunList(res, io.out);
      }),
    );
  run
    .command('cancel')
    .description('cancel a run; prints the outcome that stands')
    .argument('<id>', 'run id')
    .option('--reason <text>', 'why', '')
    .option('--json', 'print JSON')
    .addHelpText('after', ['', 'Exit codes:', '  0  the run is cancelled (now, or by an earlier cancel)', '  1  error (bad arguments, engine unreachable or refusing the call)', '  4  not cancelled: the run had already completed or failed'].join('\n'))
    .action(
      action(async (id: string, o: { reason: string; json?: boolean }) => {
        const r = await client().cancelRun(id, o.reason);
        const ended = r.status === 'completed' || r.status === 'failed';
        if (o.json) io.out(JSON.stringify(r, null, 2));
        else io.out(ended ? `run ${r.id} is ${r.status}: it had already ended, so it was not cancelled` : `run ${r.id} is ${r.status}`);
        if (ended) state.exitCode = EXIT_CODES.notCancelled;
      }),
    );
  run
    .command('pause')
    .description('pause a run at its next segment boundary (a running segment finishes first)')
    .argument('<id>', 'run id')
    .option('--reason <text>', 'why (shown by `run paused`)')
    .option('--json', 'print JSON')
    .action(
      action(async (id: string, o: { reason?: string; json?: boolean }) => {
        const r = await client().pauseRun(id, o.reason);
        if (o.json) io.out(JSON.stringify(r, null, 2));
        else io.out(r.status === 'paused' ? `run ${id} is paused` : `run ${id}: pause requested; it parks when its running segment ends`);
      }),
    );
  run
    .command('resume')
    .description('resume a paused run (or drop a pause not yet acted on)')
    .argument('<id>', 'run id')
    .option('--json', 'print JSON')
    .action(
      action(async (id: string, o: { json?: boolean }) => {
        const r = await client().resumeRun(id);
        if (o.json) io.out(JSON.stringify(r, null, 2));
        else io.out(`run ${r.id} is ${r.status}`);
      }),
    );
  run
    .command('paused')
    .description("show a paused run's ended steps, the wait it parked at and the reason")
    .argument('<id>', 'run id')
    .option('--json', 'print JSON')
    .action(
      action(async (id: string, o: { json?: boolean }) => {
        const s = await client().getPausedState(id);
        if (o.json) return io.out(JSON.stringify(s, null, 2));
        io.out(`run ${id} is paused${s.pauseReason ? ` (${s.pauseReason})` : ''}${s.nextStepHint ? `; parked at ${s.nextStepHint}` : ''}`);
        for (const step of s.steps) io.out(`  ${step.id}  ${step.name}${step.injected ? ' [injected]' : ''}  ${JSON.stringify(step.output)}`);
      }),
    );
  run
    .command('inject')
    .description("set a step's output while the run is paused (the resumed run uses it instead of running the step)")
    .argument('<id>', 'run id')
    .argument('<step-id>', 'step id, "<run-id>:<name>:<n>" (see `run paused`)')
    .requiredOption('--output <json>', 'the new output, any JSON value')
    .option('--reason <text>', 'why (kept in the audit row)')
    .option('--json', 'print JSON')
    .action(
      action(async (id: string, stepId: string, o: { output: string; reason?: string; json?: boolean }) => {
        const r = await client().injectStepOutput(id, stepId, parseJsonValue('--output', o.output), o.reason);
        if (o.json) io.out(JSON.stringify(r, null, 2));
        else io.out(`step ${r.stepId} set; it was ${JSON.stringify(r.previousOutput)}`);
      }),
    );
  program
    .command('publish')
    .description('publish a message to a developer topic (starts no run)')
    .argument('<topic>', 'dot-separated topic, e.g. orders.shipped')
    .option('--data <json>', `the message, any JSON value (default {}); ${DATA_FROM_FILE_HELP}`)
    .option('--idempotency-key <key>', 'a repeat within 2 minutes stores nothing')
    .option('--json', 'print JSON')
    .action(
      action(async (topic: string, o: { data?: string; idempotencyKey?: string; json?: boolean }) => {
        const r = await client().publish(topic, o.data === undefined ? {} : parseJsonValue('--data', dataText(o.data)), { idempotencyKey: o.idempotencyKey });
        if (o.json) io.out(JSON.stringify(r, null, 2));
        else io.out(`published ${r.eventId} to ${topic} (sequence ${r.sequence}${r.duplicate ? ', a duplicate: nothing stored' : ''})`);
      }),
    );

  program
    .command('function')
    .description('read registered functions')
    .command('list')
    .description('list the registered functions: id, mode, version, triggers, endpoint')
    .option('--json', 'print JSON')
    .action(
      action(async (o: { json?: boolean }) => {
        const functions = await client().listFunctions();
        if (o.json) io.out(JSON.stringify({ functions }, null, 2));
        else printFunctionList(functions, io.out);
      }),
    );

  program
    .command('event')
    .description('read the event log')
    .command('list')
    .description('list events, newest first')
    .option('--name <name>', 'only events of this name')
    .option('--limit <n>', 'page size', parsePositiveInt, 20)
    .option('--cursor <cursor>', 'the nextCursor of the previous page')
    .option('--json', 'print JSON')
    .action(
      action(async (o: { name?: string; limit: number; cursor?: string; json?: boolean }) => {
        const res = await client().listEvents({ name: o.name, limit: o.limit, cursor: o.cursor });
        if (o.json) io.out(JSON.stringify(res, null, 2));
        else printEventList(res, io.out);
      }),
    );
  return program;
}

/**
 * Runs the CLI on `argv` (`process.argv` shape: node, script, args…) and resolves to the exit
 * code: the one the action set (0 by default), Commander's for usage errors and help (1 / 0), 1
 * for anything else thrown. `--json` anywhere in the arguments makes usage errors JSON too.
 */
export async function runCli(argv: string[], io: CliIO = consoleIO): Promise<number> {
  const state: CliState = { exitCode: EXIT_CODES.ok };
  const json = argv.slice(2).includes('--json');
  const program = buildProgram(io, state, json);
  try {
    await program.parseAsync(argv);
  } catch (err) {
    if (err instanceof CommanderError) return err.exitCode; // already written through configureOutput
    io.err(formatError(describeError(err, () => createClient({ serverUrl: program.opts<{ server?: string }>().server }).serverUrl), json));
    return EXIT_CODES.error;
  }
  return state.exitCode;
}

/** The line after a usage error in text mode. */
export const USAGE_HINT = '(add --help to see the options and commands)';

/** How `--data` reads its JSON from a file or stdin (curl's convention), for the options' help. */
const DATA_FROM_FILE_HELP = '@path reads it from a file, @- from stdin';

/**
 * The JSON text of a `--data` option: the option itself, or with `@path` the file's contents and
 * with `@-` stdin's, whole (no JSON text starts with `@`, so nothing is ambiguous; a payload too long
 * for a command line goes this way). Throws {@link CliUsageError} `--data @<path>: cannot read:
 * <reason>` when the file cannot be read.
 */
function dataText(option: string): string {
  if (!option.startsWith('@')) return option;
  const path = option.slice(1);
  try {
    return readFileSync(path === '-' ? 0 : path, 'utf8');
  } catch (err) {
    throw new CliUsageError(`--data ${option}: cannot read: ${(err as Error).message}`);
  }
}

/**
 * `--data`: absent → `{}`; else JSON text of an object, or `@path` / `@-` naming a file or stdin
 * holding it (see {@link dataText}). Throws {@link CliUsageError}
 * `--data: not JSON: <reason>` for text that does not parse and `--data: not a JSON object: <text>`
 * for JSON that is not an object (`null`, numbers, strings, arrays: the engine keeps event data and
 * function input as objects).
 */
export function parseData(option: string | undefined): Record<string, unknown> {
  if (option === undefined) return {};
  const text = dataText(option);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new CliUsageError(`--data: not JSON: ${(err as Error).message}`);
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    const shown = text.trim().length > 60 ? `${text.trim().slice(0, 60)}…` : text.trim();
    throw new CliUsageError(`--data: not a JSON object: ${shown}`);
  }
  return value as Record<string, unknown>;
}

/** Any JSON value from an option; throws {@link CliUsageError} `<option>: not JSON: <reason>`. */
function parseJsonValue(option: string, text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new CliUsageError(`${option}: not JSON: ${(err as Error).message}`);
  }
}

/**
 * A duration flag, the same on every command: a number of ms (`1500`) or a number with a unit
 * (`500ms`, `30s`, `5m`, `1h`, `1.5h`, `2d`), parsed by the `ms` package; more than 0, whole ms.
 */
function parseDurationOption(value: string): number {
  const trimmed = value.trim();
  const parsed = /^\d+(\.\d+)?$/.test(trimmed) ? Number(trimmed) : /^\d+(\.\d+)?\s*[a-z]+$/i.test(trimmed) ? ms(trimmed) : undefined;
  const rounded = typeof parsed === 'number' && Number.isFinite(parsed) ? Math.round(parsed) : 0;
  if (rounded <= 0) throw new InvalidArgumentError('Expected a duration: 30s, 5m, 1h or a number of ms, more than 0.');
  return rounded;
}

function parsePositiveInt(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n <= 0) throw new InvalidArgumentError('Expected a positive whole number.');
  return n;
}
