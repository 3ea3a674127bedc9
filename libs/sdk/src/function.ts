import { refuseUnknownOptions } from './known-options';
import type { CancelOnSpec, ConcurrencyConfig, DebounceConfig, ExecutionMode, FunctionTrigger, RetryConfig } from '@ironflow/contracts';
import { IronflowError } from './errors';
import type { StepTools } from './step-tools';

/**
 * The event a run was started by, as a handler sees it. `timestamp` is parsed with `new Date`
 * from the wire's ISO string; `version` defaults to 1.
 */
export interface IronflowEvent<TData = unknown> {
  id: string;
  name: string;
  data: TData;
  timestamp: Date;
  version: number;
  idempotencyKey?: string;
  source?: string;
  metadata?: Record<string, unknown>;
}

/** The run an invocation belongs to. `attempt` is 1-based (1 on the first try). */
export interface RunInfo {
  id: string;
  attempt: number;
  functionId: string;
}

/** What a handler receives on every invocation. */
export interface HandlerContext<TData = unknown> {
  event: IronflowEvent<TData>;
  step: StepTools;
  run: RunInfo;
  /** Same as `run.attempt`. */
  attempt: number;
  /** Secrets the engine resolved for this run (push `secrets`, pull `context.secrets`). */
  secrets: { get(name: string): string | undefined };
  /** Aborted when a pull worker is stopped while the handler runs. Never aborted on push. */
  signal: AbortSignal;
}

/** A function body. It is replayed from the top on every invocation (segment) of a run. */
export type Handler<TData = unknown, TResult = unknown> = (ctx: HandlerContext<TData>) => Promise<TResult> | TResult;

/**
 * How a function is registered and run. Units are milliseconds.
 *
 * - `id` (required): function id; non-empty, no whitespace and none of `. * >` (it must be usable
 *   as a subject token).
 * - `name`: display name; default `id` when a worker registers it.
 * - `triggers`: `{event, expression?}` (a CEL filter over `event`, e.g. `event.data.amount > 10`) or
 *   `{cron, event?}` (5 or 6 fields, optional `CRON_TZ=<zone> ` prefix, default UTC); default `[]`.
 * - `retry`: `{maxAttempts, initialDelayMs, backoffFactor, maxDelayMs}`; the engine's defaults
 *   (3, 1000, 2, 300000) apply to fields left out.
 * - `timeoutMs`: whole-invocation timeout enforced by the engine (default 600000 there).
 * - `stepTimeoutMs`: default timeout of each `step.run` (none by default); enforced in the SDK.
 * - `concurrency`: `{limit, key?}` (key is a path into the event data: `customerId`, `data.customerId` or `event.data.customerId`).
 * - `cancelOn`: `[{event, match?, if?}]`: an event that cancels a running run (`if`: a CEL condition over `event` and `async`).
 * - `debounce`: `{periodMs (≥ 1000), key?, maxWaitMs? (≥ periodMs)}`: events of one key start one
 *   run, with the last of them, once `periodMs` passed without another (or `maxWaitMs` after the
 *   first).
 * - `mode`: `'push'` (an HTTP endpoint from `serve()`) or `'pull'` (a worker); sent by
 *   `client.registerFunction` as `preferredMode`. Workers always register `EXECUTION_MODE_PULL`.
 * - `description`, `metadata`: stored with the function.
 * - `secrets`: names of secrets (set with `ironflow secret set`) the engine delivers with every
 *   invocation, read with `secrets.get(name)`; a declared secret that does not exist fails the
 *   attempt with `SECRET_NOT_FOUND`.
 * - `recording`: what the engine records of the function's runs in its audit table (README "Audit
 *   rows"): `true` records every run and step row (profile `all`), `false` records none (`none`);
 *   left out, the engine's default `run_lifecycle` (every `run.*` row, the history `run get` shows).
 */
export interface FunctionConfig {
  id: string;
  name?: string;
  description?: string;
  triggers?: FunctionTrigger[];
  retry?: Partial<RetryConfig>;
  timeoutMs?: number;
  stepTimeoutMs?: number;
  concurrency?: ConcurrencyConfig;
  cancelOn?: CancelOnSpec[];
  debounce?: DebounceConfig;
  mode?: ExecutionMode;
  metadata?: Record<string, unknown>;
  secrets?: string[];
  recording?: boolean;
}

/** The keys of {@link FunctionConfig}: `createFunction` refuses any other, which registration would drop. */
const CONFIG_KEYS: ReadonlySet<string> = new Set(['id', 'name', 'description', 'triggers', 'retry', 'timeoutMs', 'stepTimeoutMs', 'concurrency', 'cancelOn', 'debounce', 'mode', 'metadata', 'secrets', 'recording'] satisfies (keyof FunctionConfig)[]);
/** The keys of {@link DebounceConfig} the registration sends (as `period_ms`, `key`, `max_wait_ms`). */
const DEBOUNCE_KEYS: ReadonlySet<string> = new Set(['periodMs', 'key', 'maxWaitMs'] satisfies (keyof DebounceConfig)[]);

/** Options the registration body copies as objects, and those it copies as lists of objects. */
const OBJECT_OPTIONS = ['retry', 'concurrency', 'debounce', 'metadata'] as const;
const LIST_OPTIONS = ['triggers', 'cancelOn'] as const;

/** What each object or list option looks like, for the refusal's message. */
const OBJECT_EXAMPLES: Record<(typeof OBJECT_OPTIONS)[number] | (typeof LIST_OPTIONS)[number], string> = {
  retry: '{maxAttempts: 5}',
  concurrency: '{limit: 2}',
  debounce: '{periodMs: 5000}',
  metadata: '{team: "payments"}',
  triggers: '[{event: "order.placed"}]',
  cancelOn: '[{event: "order.cancelled", match: "data.orderId"}]',
};

const isPlainObject = (value: unknown): boolean => typeof value === 'object' && value !== null && !Array.isArray(value);

/**
 * Refuses (`VALIDATION_ERROR`, `function "<id>": unknown option(s), not options of this SDK: …`)
 * a key of `config`, or of its `debounce`, that {@link FunctionConfig} does not name (plus
 * `extraKeys`, e.g. `endpointUrl` for `client.registerFunction`): the registration bodies send
 * only the keys they know. Also refuses (`function "<id>": retry: an object, e.g. {maxAttempts: 5}
 * (got 5)`) an object option (`retry`, `concurrency`, `debounce`, `metadata`) that is not an
 * object, and a list option (`triggers`, `cancelOn`, `secrets`) that is not a list of objects
 * (of strings for `secrets`): the registration would send `retry: 5` as `{}`, registering the
 * defaults in silence.
 */
export function refuseUnknownConfigKeys(config: FunctionConfig, extraKeys: readonly string[] = []): void {
  const invalid = (message: string) => new IronflowError(`function "${config.id}": ${message}`, { code: 'VALIDATION_ERROR' });
  const got = (value: unknown) => (typeof value === 'function' ? 'a function' : JSON.stringify(value) ?? String(value));
  for (const key of OBJECT_OPTIONS) {
    if (config[key] !== undefined && !isPlainObject(config[key])) throw invalid(`${key}: an object, e.g. ${OBJECT_EXAMPLES[key]} (got ${got(config[key])})`);
  }
  for (const key of LIST_OPTIONS) {
    const list = config[key] as unknown;
    if (list === undefined) continue;
    if (!Array.isArray(list)) throw invalid(`${key}: a list of objects, e.g. ${OBJECT_EXAMPLES[key]} (got ${got(list)})`);
    const bad = list.findIndex((item) => !isPlainObject(item));
    if (bad >= 0) throw invalid(`${key}.${bad}: an object, e.g. ${OBJECT_EXAMPLES[key]} (got ${got(list[bad])})`);
  }
  if (config.secrets !== undefined && !(Array.isArray(config.secrets) && config.secrets.every((name) => typeof name === 'string'))) {
    throw invalid(`secrets: a list of secret names, e.g. ["STRIPE_KEY"] (got ${got(config.secrets)})`);
  }
  const debounce = config.debounce && typeof config.debounce === 'object' ? Object.keys(config.debounce).filter((key) => !DEBOUNCE_KEYS.has(key)).map((key) => `debounce.${key}`) : [];
  const known = extraKeys.length > 0 ? new Set([...CONFIG_KEYS, ...extraKeys]) : CONFIG_KEYS;
  refuseUnknownOptions(`function "${config.id}"`, config, known, { nested: debounce });
}

/** A function built by {@link createFunction}: its config plus its handler. */
export interface IronflowFunction<TData = unknown, TResult = unknown> {
  readonly kind: 'ironflow.function';
  readonly id: string;
  readonly config: Readonly<FunctionConfig>;
  readonly handler: Handler<TData, TResult>;
}

/** The engine's function id rule: letters, digits, ".", "_", ":", "-" (dots name a namespace, e.g. `payment.charge`; function ids never stand in subjects). */
const VALID_ID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;

/**
 * Declares a durable function.
 *
 * ```ts
 * const fn = createFunction({ id: 'send-welcome', triggers: [{ event: 'user.created' }] },
 *   async ({ event, step, run, attempt }) => {
 *     const user = await step.run('load-user', () => loadUser(event.data.userId));
 *     await step.sleep('cool-down', '1h');
 *     return { sent: true, user: user.id };
 *   });
 * ```
 *
 * Returns an {@link IronflowFunction} to hand to `serve()`, `createWorker()` or
 * `client.registerFunction()`. Throws `IronflowError` (code `VALIDATION_ERROR`) when `config.id`
 * is empty or not a valid function id, when `handler` is not a function, when a numeric
 * option (`timeoutMs`, `stepTimeoutMs`) is not a positive finite number, when an object or list
 * option has another shape (`retry: 5`; see {@link refuseUnknownConfigKeys}), or when `config` (or its
 * `debounce`) has a key {@link FunctionConfig} does not name (`unknown option(s), not options of
 * this SDK: retries, debounce.maxWait`): registration would drop it.
 */
export function createFunction<TData = unknown, TResult = unknown>(
  config: FunctionConfig,
  handler: Handler<TData, TResult>,
): IronflowFunction<TData, TResult> {
  const invalid = (message: string) => new IronflowError(message, { code: 'VALIDATION_ERROR' });
  if (typeof config?.id !== 'string' || config.id === '') throw invalid('function id must be a non-empty string');
  if (!VALID_ID.test(config.id)) throw invalid(`function id "${config.id}": letters, digits, ".", "_", ":" and "-" only, at most 128`);
  if (typeof handler !== 'function') throw invalid(`handler of function "${config.id}" must be a function`);
  refuseUnknownConfigKeys(config);
  for (const key of ['timeoutMs', 'stepTimeoutMs'] as const) {
    const value = config[key];
    if (value !== undefined && !(Number.isFinite(value) && value > 0)) throw invalid(`${key} must be a positive number of ms`);
  }
  return Object.freeze({ kind: 'ironflow.function' as const, id: config.id, config: Object.freeze({ ...config }), handler });
}

/** Indexes functions by id. Throws `IronflowError` (`VALIDATION_ERROR`) on a duplicate id. */
export function indexFunctions(functions: readonly IronflowFunction<any, any>[]): Map<string, IronflowFunction<any, any>> {
  const byId = new Map<string, IronflowFunction<any, any>>();
  for (const fn of functions) {
    if (byId.has(fn.id)) throw new IronflowError(`function "${fn.id}" is listed twice`, { code: 'VALIDATION_ERROR' });
    byId.set(fn.id, fn);
  }
  return byId;
}
