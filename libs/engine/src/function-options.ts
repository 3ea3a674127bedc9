import { RegisterFunctionInput } from '@ironflow/contracts';

/** One registration option (WIRE-PROTOCOL.md 5.3) and what this engine does with it. */
export interface FunctionOption {
  /** The option as the SDK names it (`triggers[].cron`, `debounce`). */
  name: string;
  /** `acted on`, or `refused` with `VALIDATION_ERROR` naming it (never stored and ignored). */
  status: 'acted on' | 'refused';
  semantics: string;
  /** A registration that uses the option (with `id`, `mode` and a trigger added by the test). */
  example: Partial<RegisterFunctionInput>;
}

/**
 * Every option the Ironflow SDK can send at registration, with its semantics: the one list that
 * `ironflow dev --help` prints and the README mirrors. A test registers each `example` and checks
 * that what is `acted on` is accepted and what is `refused` is refused by name.
 */
export const FUNCTION_OPTIONS: readonly FunctionOption[] = [
  { name: 'id', status: 'acted on', semantics: 'required; letters, digits, ".", "_", ":", "-", at most 128', example: {} },
  { name: 'name', status: 'acted on', semantics: 'display name; default the id', example: { name: 'Orders' } },
  { name: 'description', status: 'acted on', semantics: 'stored with the function', example: { description: 'takes orders' } },
  { name: 'triggers[].event', status: 'acted on', semantics: 'an emitted event of this name starts a run', example: { triggers: [{ event: 'order.placed' }] } },
  {
    name: 'triggers[].expression',
    status: 'acted on',
    semantics: 'CEL filter over `event` ({id, name, data, timestamp, version, metadata?}), e.g. `event.data.amount > 10`; compiled at registration (an error refuses it); JSON numbers are doubles; an error at emit starts no run and counts in ironflow_trigger_expression_errors_total; an empty one is refused (leave it out for no filter)',
    example: { triggers: [{ event: 'order.placed', expression: 'event.data.amount > 10' }] },
  },
  {
    name: 'triggers[].cron',
    status: 'acted on',
    semantics: '5 fields (minutes) or 6 (seconds first) or @hourly-style, read in UTC or the zone of a `CRON_TZ=<IANA zone> ` prefix; one run per tick however many schedulers run; ticks later than IRONFLOW_CRON_CATCH_UP_MS (10 s) are missed and collapse into one run; the trigger\'s `event` only names the event its runs see (data {cron, timezone, scheduledAt}); no `expression`',
    example: { triggers: [{ cron: 'CRON_TZ=Europe/Berlin 0 3 * * *', event: 'scheduled.cleanup' }] },
  },
  { name: 'retry', status: 'acted on', semantics: '{maxAttempts 3, initialDelayMs 1000, backoffFactor 2, maxDelayMs 300000} for retryable errors; initialDelayMs above maxDelayMs (defaults included) is refused', example: { retry: { maxAttempts: 5, initialDelayMs: 1000, backoffFactor: 2, maxDelayMs: 60_000 } } },
  { name: 'timeoutMs', status: 'acted on', semantics: 'timeout of each execution (segment), ms, default 600000; enforced by the engine on every transport: past it the attempt fails with FUNCTION_TIMED_OUT (retryable)', example: { timeoutMs: 60_000 } },
  { name: 'concurrency', status: 'acted on', semantics: '{limit ≥ 1, key?}: at most `limit` runs of a key (a path into the event data, as debounce.key reads it: `customerId`, `data.customerId` or `event.data.customerId`) at once; leave it out for no limit; an empty key or a path with an empty name (`data..x`) is refused', example: { concurrency: { limit: 2, key: 'event.data.customerId' } } },
  { name: 'preferredMode / mode', status: 'acted on', semantics: '"push" (the engine calls endpointUrl) or "pull" (workers poll); left out: push when endpointUrl is given, else pull; workers register pull', example: { mode: 'pull' } },
  {
    name: 'endpointUrl',
    status: 'acted on',
    semantics: 'the http(s) URL a push function is called at (a pull function with one is refused); never a link-local or cloud metadata address, and only what IRONFLOW_PUSH_ALLOWED_HOSTS names when set (checked at registration and on every connection: PUSH_ENDPOINT_REFUSED)',
    example: { mode: 'push', endpointUrl: 'http://127.0.0.1:1/fn' },
  },
  { name: 'metadata', status: 'acted on', semantics: 'stored; `__ironflow_code_hash` bumps the version when the handler changes', example: { metadata: { team: 'orders' } } },
  {
    name: 'debounce',
    status: 'acted on',
    semantics: '{periodMs ≥ 1000, key?, maxWaitMs? ≥ periodMs}: events of one key start one run, with the last of them, once periodMs passed without another or maxWaitMs after the first; key is a path into the event data (`customerId`, `data.customerId`, `event.data.customerId`; empty or with an empty name: refused); TriggerSync answers failed_precondition',
    example: { debounce: { periodMs: 1000, key: 'customerId', maxWaitMs: 5000 } },
  },
  {
    name: 'cancelOn',
    status: 'acted on',
    semantics: '[{event, match?, if?}]: an event of that name whose value at `match` (a path into the event data: `orderId`, `data.orderId` or `event.data.orderId`; empty or with an empty name: refused) equals the run\'s own cancels that run, a value missing on either side matching nothing; without `match`, every run of the function not ended (cause cancel-on-event); a cancel up to 30 s older than a new run is replayed before its dispatch',
    example: { cancelOn: [{ event: 'order.cancelled', match: 'data.orderId' }] },
  },
  {
    name: 'cancelOn[].if',
    status: 'acted on',
    semantics: 'CEL condition over `event` (the run\'s own event) and `async` (the cancel event), e.g. `async.data.reason != "test"`; the spec cancels only when it holds; compiled at registration; an error at match time does not cancel and counts in ironflow_cancel_on_expression_errors_total; any other key of a spec is refused',
    example: { cancelOn: [{ event: 'order.cancelled', match: 'data.orderId', if: 'async.data.full == true' }] },
  },
  {
    name: 'secrets',
    status: 'acted on',
    semantics: 'names of secrets (`ironflow secret set`) of the function\'s project and env, delivered with every invocation: push `secrets`, pull `context.secrets`, stream JobContext.secrets (SDK `secrets.get`); needs IRONFLOW_SECRETS_KEY, else SECRETS_NOT_CONFIGURED; a declared secret missing at dispatch fails the attempt, retryable, with SECRET_NOT_FOUND',
    example: { secrets: ['API_KEY'] },
  },
  { name: 'actorKey', status: 'refused', semantics: 'sticky routing of an actor\'s runs to one worker: refused, since pull and stream workers claim any queued run of their functions', example: { actorKey: 'event.data.customerId' } },
  { name: 'recording', status: 'acted on', semantics: 'the recording profile of audit rows: true records `all` (also a step.completed / step.failed row per saved step), false `none`; left out, `run_lifecycle` (every run.* row)', example: { recording: true } },
  { name: 'recordingRetention', status: 'refused', semantics: 'audit retention of a function: refused until implemented', example: { recordingRetention: '30d' } },
  { name: 'changeReason', status: 'refused', semantics: 'function history entry: refused until implemented', example: { changeReason: 'raise the limit' } },
];

/** The options as help text: one line each, `name  semantics`. */
export function functionOptionsHelp(): string {
  const width = Math.max(...FUNCTION_OPTIONS.map((o) => o.name.length));
  return [
    'Function registration options (anything refused is refused by name with VALIDATION_ERROR, never ignored):',
    ...FUNCTION_OPTIONS.map((o) => `  ${o.name.padEnd(width)}  ${o.semantics}`),
  ].join('\n');
}
