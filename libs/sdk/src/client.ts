import type { ApiKeyView, EventView, InstanceStatusView, InstanceTransitionView, FunctionDefinition, ListEventsOutput, ListRunsOutput, RunHistoryEntry, RunStatus, RunView, SecretView, StepView } from '@ironflow/contracts';
import { IronflowClientError, RunCancelledError, RunErrorInfo, RunFailedError } from './errors';
import { refuseUnknownConfigKeys } from './function';
import type { FunctionConfig, IronflowFunction } from './function';
import { RawResponse, baseHeaders, connectUnary, httpError, networkError, parseJson, restGet, sendRaw } from './http';
import { PublishResult, createPublisher } from './publish';
import { SubscribeOptions, Subscription, openSubscription } from './subscribe';
import { REGISTER_FUNCTION_PROCEDURE, clientRegistrationBody } from './register-function';
import { resolveApiKey, resolveServerUrl } from './settings';
import { refuseUnknownOptions } from './known-options';

/**
 * Options of {@link createClient}.
 * - `serverUrl`: engine base URL; default env `IRONFLOW_SERVER_URL`, else `http://localhost:9123`.
 * - `apiKey`: sent as `Authorization: Bearer <key>`; default env `IRONFLOW_API_KEY` (empty = unset).
 * - `environment`: sent as `X-Ironflow-Environment`; default env `IRONFLOW_ENV`; no header when
 *   neither is set (the engine then uses `"default"`).
 * - `timeoutMs`: per-request deadline in ms; default 30000 (emitSync uses its own, see there).
 */
export interface ClientOptions {
  serverUrl?: string;
  apiKey?: string;
  environment?: string;
  timeoutMs?: number;
}

/** The keys of {@link ClientOptions}; `createClient` refuses any other. */
const CLIENT_OPTION_KEYS: ReadonlySet<string> = new Set(['serverUrl', 'apiKey', 'environment', 'timeoutMs'] satisfies (keyof ClientOptions)[]);

/** A function definition for `registerFunction`: a function's config plus, for push, its URL. */
export type FunctionRegistration = FunctionConfig & { endpointUrl?: string };

/** Options of `emit`: `idempotencyKey` dedupes the event; `version` (≥ 1) and `metadata` are stored with it. */
export interface EmitOptions {
  idempotencyKey?: string;
  version?: number;
  metadata?: Record<string, unknown>;
}

/** Options of `emitSync`: `timeoutMs` is how long the engine waits for the run (default 30000). */
export interface EmitSyncOptions {
  timeoutMs?: number;
  idempotencyKey?: string;
}

/** The first run's outcome from `emitSync`. `status` is the engine's lowercase run status. */
export interface EmitSyncResult<T = unknown> {
  eventId: string;
  runId: string;
  functionId: string;
  status: RunStatus | string;
  output: T;
  durationMs: number;
}

/** A run's outcome from `invoke` (`status` lowercase; `completed`, or the run's state at the deadline). */
export type InvokeResult<T = unknown> = Omit<EmitSyncResult<T>, 'eventId'>;

/** Filter of `listRuns`. `status` is lowercase (`"running"`, `"failed"`…); `limit` a page size. */
export interface ListRunsFilter {
  functionId?: string;
  status?: RunStatus;
  limit?: number;
  cursor?: string;
}

/** Filter of `listEvents`: `name` exact; `limit` a page size (1–500, default 50). */
export interface ListEventsFilter {
  name?: string;
  limit?: number;
  cursor?: string;
}

/** Options of `waitForRun`: how long to wait (default 30000 ms) and how often to read the run (default 250 ms). */
export interface WaitForRunOptions {
  timeoutMs?: number;
  pollMs?: number;
}

/** The keys each call's options take; a call refuses any other (`VALIDATION_ERROR` naming it) before sending anything. */
const CALL_OPTION_KEYS = {
  registerFunction: new Set(['endpointUrl']),
  emit: new Set(['idempotencyKey', 'version', 'metadata'] satisfies (keyof EmitOptions)[]),
  emitSync: new Set(['timeoutMs', 'idempotencyKey'] satisfies (keyof EmitSyncOptions)[]),
  invoke: new Set(['timeoutMs']),
  waitForRun: new Set(['timeoutMs', 'pollMs'] satisfies (keyof WaitForRunOptions)[]),
  listRuns: new Set(['functionId', 'status', 'limit', 'cursor'] satisfies (keyof ListRunsFilter)[]),
  listEvents: new Set(['name', 'limit', 'cursor'] satisfies (keyof ListEventsFilter)[]),
} satisfies Record<string, ReadonlySet<string>>;

/** What `getRunSteps` answers: step rows, the run's history and its child runs. */
export interface RunSteps {
  steps: StepView[];
  history: RunHistoryEntry[];
  children: RunView[];
}

/** A secret as the engine lists it: never its value. */
export type SecretInfo = SecretView;
/** An API key as the engine lists it: never the key. */
export type ApiKeyInfo = ApiKeyView;

/**
 * The engine's client API over Connect unary JSON. Every method throws {@link IronflowClientError}
 * on failure (`engineCode` set when the engine named its own code, e.g. `RUN_NOT_FOUND`).
 */
export interface IronflowClient {
  /** The engine base URL the calls go to (`serverUrl` option, env, or default; no trailing `/`). */
  readonly serverUrl: string;
  /**
   * Registers (or updates) a function: `RegisterFunction` with the config's set fields,
   * `preferredMode` = `mode`, `endpointUrl` for push. Resolves to `{created}` (false when an
   * existing definition was updated or unchanged) and the stored `function` as returned.
   */
  registerFunction(def: IronflowFunction<any, any> | FunctionRegistration, options?: { endpointUrl?: string }): Promise<{ created: boolean; function?: unknown }>;
  /**
   * Emits an event (`Trigger`); resolves to its id, the runs it started (`[]` when none) and the
   * functions whose `debounce` deferred their run (`debouncedFunctionIds`, ours: field 100; the run
   * starts once the period passes without another event of its key; `[]` from an engine without it),
   * and whether the event was a `duplicate` (ours: field 101; its idempotency key was used before,
   * so nothing was stored or started: `eventId` is the first event's and `runIds` its runs; false
   * from an engine without it).
   */
  emit(event: string, data?: unknown, options?: EmitOptions): Promise<{ eventId: string; runIds: string[]; debouncedFunctionIds: string[]; duplicate: boolean }>;
  /**
   * Emits an event and waits for the first run it started (`TriggerSync`, HTTP deadline
   * `timeoutMs + 5000`). Throws {@link RunFailedError} when that run's status is `"failed"`,
   * {@link RunCancelledError} when `"cancelled"`, {@link IronflowClientError} `NO_RESULTS` when no
   * run was started.
   */
  emitSync<T = unknown>(event: string, data?: unknown, options?: EmitSyncOptions): Promise<EmitSyncResult<T>>;
  /**
   * Runs one function directly and waits for its outcome (`InvokeFunctionSync`, ours; HTTP
   * deadline `timeoutMs + 5000`, default wait 30000 ms). Throws {@link RunFailedError} /
   * {@link RunCancelledError} like `emitSync`, `not_found` for an unknown function.
   */
  invoke<T = unknown>(functionId: string, input?: unknown, options?: { timeoutMs?: number }): Promise<InvokeResult<T>>;
  /**
   * Waits for a run's outcome by reading it (`GetRun`) every `pollMs` until it ends or `timeoutMs`
   * passes; resolves like `invoke` (`completed`, or the run's status at the deadline) and throws
   * {@link RunFailedError} / {@link RunCancelledError} when it failed or was cancelled. A read that
   * fails retryably (the engine unreachable or `unavailable`, e.g. a replica draining) is tried
   * again until the deadline, so a wait survives a rolling restart. When the server still cannot
   * be reached at the deadline (connection refused, no answer), throws
   * {@link IronflowClientError} `UNREACHABLE` (status 0) naming the server and the cause.
   */
  waitForRun<T = unknown>(runId: string, options?: WaitForRunOptions): Promise<InvokeResult<T>>;
  /** Lists the registered functions with their versions (REST `GET /api/v1/functions`). */
  listFunctions(): Promise<(FunctionDefinition & { version: number })[]>;
  /** Lists the event log, newest first (REST `GET /api/v1/events`); page with `cursor` = the previous `nextCursor`. */
  listEvents(filter?: ListEventsFilter): Promise<ListEventsOutput>;
  /** Reads a run (`GetRun`); `not_found` error when it does not exist. */
  getRun(id: string): Promise<RunView>;
  /** Lists runs, newest first (`ListRuns`); page with `cursor` = the previous `nextCursor`. */
  listRuns(filter?: ListRunsFilter): Promise<ListRunsOutput>;
  /** Reads a run's steps, history and children (`GetRunSteps`). */
  getRunSteps(id: string): Promise<RunSteps>;
  /** Cancels a run (`CancelRun`, `reason` default `""`); resolves to the run as it stands. */
  cancelRun(id: string, reason?: string): Promise<RunView>;
  /** Engine health (`Health`): `{status}`, e.g. `"ok"`. */
  health(): Promise<{ status: string }>;
  /**
   * Creates or replaces a secret of the client's project and env (`PUT /api/v1/secrets/<name>`).
   * `SECRETS_NOT_CONFIGURED` (503) when the engine has no `IRONFLOW_SECRETS_KEY`.
   */
  setSecret(name: string, value: string): Promise<SecretInfo>;
  /** The secrets of the client's project and env, names and times only (`GET /api/v1/secrets`). */
  listSecrets(): Promise<SecretInfo[]>;
  /** Deletes a secret (`DELETE /api/v1/secrets/<name>`); `SECRET_NOT_FOUND` when there is none. */
  deleteSecret(name: string): Promise<void>;
  /**
   * Creates an API key (`POST /api/v1/api-keys`, an admin route: the client's `apiKey` must be
   * the engine's `IRONFLOW_ADMIN_KEY`, unless the engine is still open). The key is in the answer
   * only this once.
   */
  createApiKey(input?: { project?: string; env?: string; name?: string }): Promise<{ key: string; apiKey: ApiKeyInfo }>;
  /** Every API key, revoked ones included, never the key itself (admin route). */
  listApiKeys(): Promise<ApiKeyInfo[]>;
  /** Revokes an API key by id or `ifk_<id>` prefix (admin route); `API_KEY_NOT_FOUND` when there is none. */
  revokeApiKey(id: string): Promise<ApiKeyInfo>;
  /**
   * Freezes the instance (`POST /api/v1/instance/freeze`, admin route): new work waits for the thaw.
   * `UNAVAILABLE` when it could not get its locks in 500 ms (nothing changed; send it again).
   */
  freezeInstance(reason?: string): Promise<InstanceTransitionView>;
  /** Thaws the instance (`POST /api/v1/instance/thaw`, admin route); errors as `freezeInstance`. */
  thawInstance(reason?: string): Promise<InstanceTransitionView>;
  /** The instance authority's state and the work it holds (`GET /api/v1/instance`, admin route). */
  instanceStatus(): Promise<InstanceStatusView>;
  /**
   * Pauses a run at its next segment boundary (`PauseRun`): `"paused"` when it parked at once,
   * `"pause_requested"` while a segment runs (its end parks the run). `reason` is shown by `getPausedState`.
   */
  pauseRun(runId: string, reason?: string): Promise<{ status: string }>;
  /** Resumes a paused run (`POST /api/v1/runs/resume`); resolves to the run. `fromStep` is refused by this engine. */
  resumeRun(runId: string, fromStep?: string): Promise<RunView>;
  /** A paused run's ended steps (outputs parsed from JSON text), the wait it parked at, the reason (`GetPausedState`). */
  getPausedState(runId: string): Promise<PausedState>;
  /** Sets a step's output while the run is paused (`InjectStepOutput`); resolves to the previous output (`null` when none). */
  injectStepOutput(runId: string, stepId: string, newOutput: unknown, reason?: string): Promise<{ stepId: string; previousOutput: unknown }>;
  /** Publishes to a developer topic (`PubSubService/Publish`); starts no run. */
  publish(topic: string, data: unknown, options?: { idempotencyKey?: string }): Promise<PublishResult>;
  /** The topics published to in this environment (`ListTopics`). */
  listTopics(): Promise<TopicInfo[]>;
  /** Subscribes to `topic:<pattern>` or `system.run.<pattern>` over `<serverUrl>/ws` (see {@link openSubscription}). */
  subscribe<T = unknown>(pattern: string, options: SubscribeOptions<T>): Promise<Subscription>;
}

/** What `getPausedState` answers. */
export interface PausedState {
  steps: { id: string; name: string; output: unknown; injected: boolean; completedAt: string }[];
  nextStepHint: string;
  pauseReason: string;
}

/** One topic from `listTopics` (times ISO-8601). */
export interface TopicInfo {
  name: string;
  messageCount: number;
  consumerCount: number;
  firstMessageAt?: string;
  lastMessageAt?: string;
}

/** JSON text (GetPausedState, InjectStepOutput) → value; `""` → `null`. */
function fromJsonText(text: unknown): unknown {
  return typeof text === 'string' && text !== '' ? JSON.parse(text) : null;
}

const SERVICE = 'ironflow.v1.IronflowService';

/**
 * A run of a Connect answer as {@link RunView}: the JSON layer renders `executionMode` as its enum
 * name (`EXECUTION_MODE_PULL`; run statuses it already renders lowercase), read here as `pull` / `push`.
 */
function runView(raw: unknown): RunView {
  const run = raw as RunView;
  const mode: unknown = run?.executionMode;
  return typeof mode === 'string' ? { ...run, executionMode: mode.replace(/^EXECUTION_MODE_/, '').toLowerCase() as RunView['executionMode'] } : run;
}

/** A RunResult's fields; throws for the two statuses the SDK turns into errors (5.2). */
function runResult<T>(result: Record<string, unknown>): InvokeResult<T> {
  const runId = String(result.runId ?? '');
  const functionId = String(result.functionId ?? '');
  if (result.status === 'failed') throw new RunFailedError(runId, functionId, result.error as RunErrorInfo | undefined);
  if (result.status === 'cancelled') throw new RunCancelledError(runId, functionId);
  return { runId, functionId, status: result.status as string, output: result.output as T, durationMs: Number(result.durationMs ?? 0) };
}
const DEFAULT_TIMEOUT_MS = 30_000;
const DEFAULT_WAIT_POLL_MS = 250;
/** Errors a read may hit while the engine restarts or a replica drains: tried again. */
const RETRYABLE_READ_CODES = new Set(['NETWORK_ERROR', 'TIMEOUT', 'unavailable']);

/** The innermost reason of a network failure (`ECONNREFUSED 127.0.0.1:9123`, a timeout), for messages. */
function networkCause(err: IronflowClientError): string {
  type Failure = { message?: unknown; code?: unknown; cause?: unknown };
  // Duck-typed: fetch's errors may come from another realm, where `instanceof Error` is false.
  let cause = err.cause as Failure | undefined;
  while (cause?.cause && typeof cause.cause === 'object') cause = cause.cause as Failure;
  const message = typeof cause?.message === 'string' && cause.message !== '' ? cause.message : err.message;
  return typeof cause?.code === 'string' && !message.includes(cause.code) ? `${cause.code} ${message}` : message;
}
const TERMINAL_STATUSES = new Set(['completed', 'failed', 'cancelled']);
const SYNC_DEADLINE_SLACK_MS = 5_000;

/**
 * Creates a client of the engine's API (WIRE-PROTOCOL.md 5). Every call is a Connect unary JSON
 * POST to `<serverUrl>/ironflow.v1.IronflowService/<Method>`; a non-2xx answer throws
 * {@link IronflowClientError} with the body's `code` and `message`. No automatic retries.
 */
export function createClient(options: ClientOptions = {}): IronflowClient {
  refuseUnknownOptions('createClient', options, CLIENT_OPTION_KEYS);
  const serverUrl = resolveServerUrl(options.serverUrl);
  const environment = options.environment || process.env.IRONFLOW_ENV || undefined;
  const headers = baseHeaders(resolveApiKey(options.apiKey), environment);
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const call = (method: string, body: unknown, deadlineMs = timeoutMs) => connectUnary(serverUrl, `${SERVICE}/${method}`, body, { headers, timeoutMs: deadlineMs });
  /** One REST call; the parsed JSON answer, or an IronflowClientError like the Connect calls. */
  const restCall = async (method: 'GET' | 'PUT' | 'POST' | 'DELETE', path: string, body?: unknown): Promise<Record<string, unknown>> => {
    const what = `${method} ${path}`;
    let response: RawResponse;
    try {
      response = await sendRaw(`${serverUrl}${path}`, { method, headers, body, timeoutMs });
    } catch (err) {
      throw networkError(what, err);
    }
    if (response.status < 200 || response.status >= 300) throw httpError(what, response);
    const parsed = parseJson(response.text);
    return parsed && typeof parsed === 'object' ? (parsed as Record<string, unknown>) : {};
  };

  return {
    serverUrl,

    async registerFunction(def, opts = {}) {
      refuseUnknownOptions('registerFunction', opts, CALL_OPTION_KEYS.registerFunction);
      const registration: FunctionRegistration = 'kind' in def && def.kind === 'ironflow.function' ? { ...def.config } : { ...(def as FunctionRegistration) };
      refuseUnknownConfigKeys(registration, ['endpointUrl']);
      if (opts.endpointUrl !== undefined) registration.endpointUrl = opts.endpointUrl;
      const res = await connectUnary(serverUrl, REGISTER_FUNCTION_PROCEDURE, clientRegistrationBody(registration), { headers, timeoutMs });
      return { created: res.created === true, function: res.function };
    },

    async emit(event, data = {}, opts = {}) {
      refuseUnknownOptions('emit', opts, CALL_OPTION_KEYS.emit);
      const body: Record<string, unknown> = { event, data };
      if (opts.version !== undefined) body.version = opts.version;
      if (opts.idempotencyKey !== undefined) body.idempotencyKey = opts.idempotencyKey;
      if (opts.metadata !== undefined) body.metadata = opts.metadata;
      const res = await call('Trigger', body);
      return {
        eventId: String(res.eventId ?? ''),
        runIds: Array.isArray(res.runIds) ? (res.runIds as string[]) : [],
        debouncedFunctionIds: Array.isArray(res.debouncedFunctionIds) ? (res.debouncedFunctionIds as string[]) : [],
        duplicate: res.duplicate === true,
      };
    },

    async emitSync<T = unknown>(event: string, data: unknown = {}, opts: EmitSyncOptions = {}): Promise<EmitSyncResult<T>> {
      refuseUnknownOptions('emitSync', opts, CALL_OPTION_KEYS.emitSync);
      const waitMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
      const body: Record<string, unknown> = { event, data, timeout_ms: waitMs };
      if (opts.idempotencyKey !== undefined) body.idempotencyKey = opts.idempotencyKey;
      const res = await call('TriggerSync', body, waitMs + SYNC_DEADLINE_SLACK_MS);
      const results = Array.isArray(res.results) ? (res.results as Record<string, unknown>[]) : [];
      if (results.length === 0) throw new IronflowClientError(`TriggerSync: event "${event}" started no run`, 'NO_RESULTS', 200);
      return { eventId: String(res.eventId ?? ''), ...runResult<T>(results[0]) };
    },

    async invoke<T = unknown>(functionId: string, input: unknown = {}, opts: { timeoutMs?: number } = {}): Promise<InvokeResult<T>> {
      refuseUnknownOptions('invoke', opts, CALL_OPTION_KEYS.invoke);
      const waitMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
      const res = await call('InvokeFunctionSync', { functionId, input, timeoutMs: waitMs }, waitMs + SYNC_DEADLINE_SLACK_MS);
      return runResult<T>(res);
    },

    async getRun(id) {
      return runView(await call('GetRun', { id }));
    },

    async waitForRun<T = unknown>(runId: string, opts: WaitForRunOptions = {}): Promise<InvokeResult<T>> {
      refuseUnknownOptions('waitForRun', opts, CALL_OPTION_KEYS.waitForRun);
      const deadline = Date.now() + (opts.timeoutMs ?? DEFAULT_TIMEOUT_MS);
      const pollMs = opts.pollMs ?? DEFAULT_WAIT_POLL_MS;
      let run: RunView | undefined;
      for (;;) {
        let unreachable: IronflowClientError | undefined;
        try {
          run = runView(await call('GetRun', { id: runId }, Math.max(1000, Math.min(timeoutMs, deadline - Date.now()))));
        } catch (err) {
          if (!(err instanceof IronflowClientError && RETRYABLE_READ_CODES.has(err.code))) throw err;
          if (err.status === 0) unreachable = err;
          else if (Date.now() >= deadline && !run) throw err;
        }
        if (unreachable && Date.now() >= deadline) {
          throw new IronflowClientError(`server ${serverUrl} could not be reached while waiting for run ${runId}: ${networkCause(unreachable)}`, 'UNREACHABLE', 0, { cause: unreachable });
        }
        if (run && !unreachable && (TERMINAL_STATUSES.has(run.status) || Date.now() >= deadline)) {
          const durationMs = run.endedAt ? Date.parse(run.endedAt) - Date.parse(run.startedAt ?? run.createdAt) : Date.now() - Date.parse(run.startedAt ?? run.createdAt);
          return runResult<T>({ runId: run.id, functionId: run.functionId, status: run.status, output: run.output, error: run.error, durationMs });
        }
        await new Promise((resolve) => setTimeout(resolve, Math.max(0, Math.min(pollMs, deadline - Date.now()))));
      }
    },

    async listFunctions() {
      const res = await restGet(serverUrl, 'api/v1/functions', {}, { headers, timeoutMs });
      return Array.isArray(res.functions) ? (res.functions as (FunctionDefinition & { version: number })[]) : [];
    },

    async listEvents(filter = {}) {
      refuseUnknownOptions('listEvents', filter, CALL_OPTION_KEYS.listEvents);
      const res = await restGet(serverUrl, 'api/v1/events', { name: filter.name, limit: filter.limit, cursor: filter.cursor }, { headers, timeoutMs });
      return { events: Array.isArray(res.events) ? (res.events as EventView[]) : [], nextCursor: typeof res.nextCursor === 'string' ? res.nextCursor : '' };
    },

    async listRuns(filter = {}) {
      refuseUnknownOptions('listRuns', filter, CALL_OPTION_KEYS.listRuns);
      const body: Record<string, unknown> = {};
      for (const key of ['functionId', 'status', 'limit', 'cursor'] as const) if (filter[key] !== undefined) body[key] = filter[key];
      const res = await call('ListRuns', body);
      return {
        runs: Array.isArray(res.runs) ? res.runs.map(runView) : [],
        nextCursor: typeof res.nextCursor === 'string' ? res.nextCursor : '',
        totalCount: Number(res.totalCount ?? 0),
      };
    },

    async getRunSteps(id) {
      // The request field's name is not pinned by WIRE-PROTOCOL.md; send both spellings (unknown fields are ignored).
      const res = await call('GetRunSteps', { id, runId: id });
      return {
        steps: Array.isArray(res.steps) ? (res.steps as StepView[]) : [],
        history: Array.isArray(res.history) ? (res.history as RunHistoryEntry[]) : [],
        children: Array.isArray(res.children) ? res.children.map(runView) : [],
      };
    },

    async cancelRun(id, reason = '') {
      return runView(await call('CancelRun', { id, reason }));
    },

    async health() {
      const res = await call('Health', {});
      return { status: String(res.status ?? '') };
    },

    async setSecret(name, value) {
      return (await restCall('PUT', `/api/v1/secrets/${encodeURIComponent(name)}`, { value })).secret as SecretInfo;
    },

    async listSecrets() {
      const res = await restCall('GET', '/api/v1/secrets');
      return Array.isArray(res.secrets) ? (res.secrets as SecretInfo[]) : [];
    },

    async deleteSecret(name) {
      await restCall('DELETE', `/api/v1/secrets/${encodeURIComponent(name)}`);
    },

    async createApiKey(input = {}) {
      const res = await restCall('POST', '/api/v1/api-keys', input);
      return { key: String(res.key ?? ''), apiKey: res.apiKey as ApiKeyInfo };
    },

    async listApiKeys() {
      const res = await restCall('GET', '/api/v1/api-keys');
      return Array.isArray(res.apiKeys) ? (res.apiKeys as ApiKeyInfo[]) : [];
    },

    async revokeApiKey(id) {
      return (await restCall('DELETE', `/api/v1/api-keys/${encodeURIComponent(id)}`)).apiKey as ApiKeyInfo;
    },

    async freezeInstance(reason) {
      return (await restCall('POST', '/api/v1/instance/freeze', reason ? { reason } : {})) as unknown as InstanceTransitionView;
    },

    async thawInstance(reason) {
      return (await restCall('POST', '/api/v1/instance/thaw', reason ? { reason } : {})) as unknown as InstanceTransitionView;
    },

    async instanceStatus() {
      return (await restCall('GET', '/api/v1/instance')) as unknown as InstanceStatusView;
    },

    async pauseRun(runId, reason) {
      const res = await call('PauseRun', { run_id: runId, ...(reason ? { reason } : {}) });
      return { status: String(res.status ?? '') };
    },

    async resumeRun(runId, fromStep = '') {
      return (await restCall('POST', '/api/v1/runs/resume', { run_id: runId, from_step: fromStep })) as unknown as RunView;
    },

    async getPausedState(runId) {
      const res = await call('GetPausedState', { run_id: runId });
      const steps = Array.isArray(res.steps) ? (res.steps as Record<string, unknown>[]) : [];
      return {
        steps: steps.map((s) => ({ id: String(s.id ?? ''), name: String(s.name ?? ''), output: fromJsonText(s.output), injected: s.injected === true, completedAt: String(s.completedAt ?? '') })),
        nextStepHint: String(res.nextStepHint ?? ''),
        pauseReason: String(res.pauseReason ?? ''),
      };
    },

    async injectStepOutput(runId, stepId, newOutput, reason = '') {
      const res = await call('InjectStepOutput', { run_id: runId, step_id: stepId, new_output: JSON.stringify(newOutput ?? null), reason });
      return { stepId: String(res.stepId ?? ''), previousOutput: fromJsonText(res.previousOutput) };
    },

    publish(topic, data, opts = {}) {
      return createPublisher({ serverUrl, apiKey: options.apiKey, environment }, undefined, timeoutMs)(topic, data, opts);
    },

    async listTopics() {
      const res = await connectUnary(serverUrl, 'ironflow.v1.PubSubService/ListTopics', {}, { headers, timeoutMs });
      const topics = Array.isArray(res.topics) ? (res.topics as Record<string, unknown>[]) : [];
      return topics.map((t) => ({
        name: String(t.name ?? ''),
        messageCount: Number(t.messageCount ?? 0),
        consumerCount: Number(t.consumerCount ?? 0),
        ...(t.firstMessageAt ? { firstMessageAt: String(t.firstMessageAt) } : {}),
        ...(t.lastMessageAt ? { lastMessageAt: String(t.lastMessageAt) } : {}),
      }));
    },

    subscribe(pattern, subscribeOptions) {
      return openSubscription(serverUrl, { apiKey: resolveApiKey(options.apiKey), environment }, pattern, subscribeOptions);
    },
  };
}
