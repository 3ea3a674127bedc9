import { FunctionDefinition, ListEventsOutput, ListRunsOutput, RunView } from '@ironflow/contracts';
import { InvokeResult, IronflowClientError, IronflowError, RunCancelledError, RunFailedError, RunSteps } from '@ironflow/sdk';

/** Where the CLI writes: `out` for results (stdout), `err` for errors (stderr); one call per line group, newline added. */
export interface CliIO {
  out(text: string): void;
  err(text: string): void;
}

/** stdout / stderr through `console.log` / `console.error`. */
export const consoleIO: CliIO = {
  out: (text) => console.log(text),
  err: (text) => console.error(text),
};

/**
 * Exit codes of the CLI: 0 success (for `emit --wait` / `invoke`: the run completed), 1 error (bad
 * arguments, unreachable engine, refused call), 2 the run failed or was cancelled, 3 the run had
 * not finished when the wait timed out, 4 (`run cancel`) the run had already ended otherwise
 * (completed or failed), so the cancel changed nothing.
 */
export const EXIT_CODES = { ok: 0, error: 1, runFailed: 2, timedOut: 3, notCancelled: 4 } as const;

/** The exit-code paragraph of the help of `emit` and `invoke`. */
export const WAIT_EXIT_CODES_HELP = [
  '',
  'Exit codes:',
  '  0  the run completed',
  '  1  error (bad arguments, engine unreachable or refusing the call)',
  '  2  the run failed or was cancelled',
  '  3  timed out: the run had not finished after --timeout ms (it keeps running)',
].join('\n');

/** A usage problem the CLI finds itself (e.g. `--data` not a JSON object); code `INVALID_ARGUMENT`. */
export class CliUsageError extends IronflowError {
  constructor(message: string) {
    super(message, { code: 'INVALID_ARGUMENT' });
    this.name = 'CliUsageError';
  }
}

/**
 * The code and message the CLI shows for an error: for a refused call the engine's own code
 * (`engineCode`, e.g. `RUN_NOT_FOUND`) when the server sent one, else the Connect code
 * (`not_found`…); `UNREACHABLE` with a hint when the engine could not be reached at `serverUrl()`
 * (read only then: a server URL that is not a URL is itself the error being described);
 * an SDK error's `code`; any other error's string `code` (the engine's `EngineError`, a
 * `SettingsError` of `dev`, Node's `EADDRINUSE`…); else `ERROR`.
 */
export function describeError(err: unknown, serverUrl: () => string): { code: string; message: string } {
  if (err instanceof IronflowClientError && (err.code === 'NETWORK_ERROR' || err.code === 'UNREACHABLE')) {
    return { code: 'UNREACHABLE', message: `cannot reach ${serverUrl()} (is ironflow dev running? set --server or IRONFLOW_SERVER_URL)` };
  }
  if (err instanceof IronflowClientError) return { code: err.engineCode ?? err.code, message: err.message };
  if (err instanceof IronflowError) return { code: err.code, message: err.message };
  // The engine's own errors (`EngineError`, `SettingsError` when `dev` cannot start) and Node's carry a string code.
  const code = (err as { code?: unknown } | null | undefined)?.code;
  return { code: typeof code === 'string' && code !== '' ? code : 'ERROR', message: err instanceof Error ? err.message : String(err) };
}

/** `error [CODE]: message`, or with `json` the line `{"error":{"code","message"}}`. */
export function formatError(error: { code: string; message: string }, json: boolean): string {
  return json ? JSON.stringify({ error }) : `error [${error.code}]: ${error.message}`;
}

/**
 * How `emit --wait` and `invoke` end: the text (or JSON with `json`) for stdout and the exit
 * code. `completed` → the result, 0. Any other status (the run was still running, waiting… when
 * `timeoutMs` passed) → `timed out after <ms> ms: run <id> (<function>) is <status>` (a queued run,
 * `waiting_for_capacity`, with a hint that no worker took it) (JSON: the result as is), 3.
 */
export function runResultOutput(res: InvokeResult & { eventId?: string }, timeoutMs: number, json: boolean, indent: number = 2): { text: string; exitCode: number } {
  if (res.status === 'completed') {
    return {
      text: json ? JSON.stringify(res, null, indent) : `run ${res.runId} (${res.functionId}) completed in ${res.durationMs} ms\noutput: ${JSON.stringify(res.output, null, 2)}`,
      exitCode: EXIT_CODES.ok,
    };
  }
  return {
    text: json ? JSON.stringify(res, null, indent) : `timed out after ${timeoutMs} ms: run ${res.runId} (${res.functionId}) is ${res.status}${res.status === 'waiting_for_capacity' ? QUEUED_HINT(res.functionId) : ''}`,
    exitCode: EXIT_CODES.timedOut,
  };
}

/**
 * Why a run still queued at the timeout may be: nothing has taken it. The common first-run case is
 * a pull function with no worker running (or a function registered by a worker that has stopped);
 * a frozen instance holds queued runs too.
 */
const QUEUED_HINT = (functionId: string) =>
  `: queued, no worker or push endpoint has taken it (is a worker serving ${functionId} running? \`function list\` shows its mode, \`instance status\` a freeze)`;

/**
 * A failed or cancelled run (exit code 2). Text: `run <id> (<function>) failed: [CODE] message` or
 * `run <id> (<function>) was cancelled`. JSON: `{"status":"failed","runId","functionId","error":{"message","code"}}`
 * (`code` only when the run's error has one) or `{"status":"cancelled","runId","functionId"}`.
 */
export function runEndedOutput(err: RunFailedError | RunCancelledError, json: boolean, indent: number = 2): string {
  if (err instanceof RunCancelledError) {
    return json ? JSON.stringify({ status: 'cancelled', runId: err.runId, functionId: err.functionId }, null, indent) : `run ${err.runId} (${err.functionId}) was cancelled`;
  }
  const message = err.runError?.message ?? 'unknown error';
  const code = err.runError?.code;
  if (json) return JSON.stringify({ status: 'failed', runId: err.runId, functionId: err.functionId, error: { message, ...(code ? { code } : {}) } }, null, indent);
  return `run ${err.runId} (${err.functionId}) failed: ${code ? `[${code}] ` : ''}${message}`;
}

/** How many characters of a value `run get` shows without `--full`. */
export const RUN_GET_VALUE_CHARS = 200;

/**
 * `text` cut to `limit` characters (`Infinity` keeps all) with `… (N more characters)`, plus
 * `; --full shows all` when `fullHint`.
 */
export function cut(text: string, limit: number, fullHint = true): string {
  return text.length <= limit ? text : `${text.slice(0, limit)}… (${text.length - limit} more characters${fullHint ? '; --full shows all' : ''})`;
}

/** A value as `run get` shows it: its JSON, {@link cut} to `limit` characters. */
export function shownValue(value: unknown, limit: number): string {
  return cut(JSON.stringify(value) ?? 'undefined', limit);
}

/**
 * Human-readable `run get`: the run, its steps, its child runs and its history. Input, output and
 * errors longer than `valueChars` (default {@link RUN_GET_VALUE_CHARS}) are cut (`--full`: `Infinity`).
 */
export function printRun(run: RunView, detail: RunSteps, out: (text: string) => void = consoleIO.out, valueChars: number = RUN_GET_VALUE_CHARS): void {
  const shown = (value: unknown) => shownValue(value, valueChars);
  const lines = [
    `run ${run.id}`,
    `  function   ${run.functionId} (v${run.functionVersion}, ${run.executionMode})`,
    `  status     ${run.status}`,
    `  attempt    ${run.attempt} of ${run.maxAttempts}`,
    `  created    ${run.createdAt}${run.endedAt ? `   ended ${run.endedAt}` : ''}`,
  ];
  if (run.parentRunId) lines.push(`  parent     ${run.parentRunId} (step ${run.parentStepId})`);
  lines.push(`  input      ${shown(run.input)}`);
  if (run.output !== undefined) lines.push(`  output     ${shown(run.output)}`);
  if (run.error) {
    lines.push(`  error      ${run.error.code ? `[${run.error.code}] ` : ''}${cut(run.error.message, valueChars)}`);
  }
  lines.push('', `steps (${detail.steps.length})`);
  for (const s of detail.steps) {
    const extra = s.childRunId ? ` child ${s.childRunId}` : s.wakeAt ? ` until ${s.wakeAt}` : '';
    const value = s.output !== undefined ? ` → ${shown(s.output)}` : s.error !== undefined ? ` ✗ ${shown(s.error)}` : '';
    lines.push(`  ${String(s.sequence).padStart(2)} ${s.type.padEnd(14)} ${s.name.padEnd(20)} ${s.status.padEnd(9)}${extra}${value}`);
    lines.push(`     started ${s.startedAt ?? s.createdAt}${s.endedAt ? `  ended ${s.endedAt}` : ''}${s.injected ? '  (output injected)' : ''}`);
  }
  if (detail.children.length) {
    lines.push('', `child runs (${detail.children.length})`);
    for (const c of detail.children) lines.push(`  ${c.id} ${c.functionId} ${c.status}, attempt ${c.attempt} of ${c.maxAttempts}`);
  }
  if (detail.history.length) {
    lines.push('', 'history');
    for (const h of detail.history) {
      // A retry's cause is already its error's message: shown once.
      const reason = reasonOf(h.data);
      const why = reason && reason !== h.cause ? ` (${cut(reason, valueChars)})` : '';
      lines.push(`  ${h.ts} ${h.eventType}${h.cause ? `: ${h.cause}` : ''}${why}`);
    }
  }
  out(lines.join('\n'));
}

/** The why of a history row: its `reason` (pause, inject) or its error's message (a cancel's reason, a failure). */
function reasonOf(data: unknown): string | undefined {
  if (!data || typeof data !== 'object') return undefined;
  const { reason, error } = data as { reason?: unknown; error?: { message?: unknown } };
  if (typeof reason === 'string' && reason !== '') return reason;
  return error && typeof error.message === 'string' && error.message !== '' ? error.message : undefined;
}

/** Human-readable `run list`: one line per run, then the count and the next page's cursor. */
export function printRunList(res: ListRunsOutput, out: (text: string) => void = consoleIO.out): void {
  for (const r of res.runs) out(`${r.id}  ${r.functionId.padEnd(24)} ${r.status.padEnd(20)} ${r.createdAt}`);
  out(`${res.runs.length} of ${res.totalCount} run(s)${res.nextCursor ? `; next page: --cursor ${res.nextCursor}` : ''}`);
}

/** Human-readable `function list`: one line per function (id, mode, version, triggers, endpoint). */
export function printFunctionList(functions: (FunctionDefinition & { version: number })[], out: (text: string) => void = consoleIO.out): void {
  for (const f of functions) {
    const triggers = f.triggers.map((t) => t.event ?? t.cron ?? t.expression).filter(Boolean).join(', ') || '(invoke only)';
    out(`${f.id.padEnd(28)} ${f.mode.padEnd(4)} v${String(f.version).padEnd(3)} ${triggers}${f.endpointUrl ? `  → ${f.endpointUrl}` : ''}`);
  }
  out(`${functions.length} function(s)`);
}

/** Human-readable `event list`: one line per event (id, time, name, data cut to 80 characters), then the next page's cursor. */
export function printEventList(res: ListEventsOutput, out: (text: string) => void = consoleIO.out): void {
  for (const e of res.events) out(`${e.id}  ${e.ts}  ${e.name.padEnd(24)} ${cut(JSON.stringify(e.data) ?? '', 80, false)}`);
  out(`${res.events.length} event(s)${res.nextCursor ? `; next page: --cursor ${res.nextCursor}` : ''}`);
}
