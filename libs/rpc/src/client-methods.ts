/**
 * The IronflowService RPCs as transport-free bindings: each one calls `ClientApi` once, renders
 * the result as the output message, and (for the JSON compatibility layer) patches the protojson
 * rendering where the Ironflow SDK needs something protojson cannot express: lowercase run
 * statuses (WIRE-PROTOCOL.md 5.2, 5.5) and user values that are not JSON objects.
 */
import type { JsonObject, JsonValue, MessageInitShape, MessageShape } from '@bufbuild/protobuf';
import { EngineError } from '@ironflow/contracts';
import type { CallScope, ClientApi, RunResultView, RunView, StepView, RunHistoryEntry } from '@ironflow/contracts';
import {
  functionToProto,
  historyEntryToProto,
  registerFunctionInputFromProto,
  runResultToProto,
  runStatusFromProto,
  runToProto,
  fromJsonText,
  stepToProto,
  syncTimeoutFromProto,
  toJsonText,
  toJsonValue,
  toTimestamp,
  triggerInputFromProto,
} from './client-mapping';
import { IronflowService } from '@ironflow/contracts/proto';

type Methods = typeof IronflowService.method;
/** The local (camelCase) name of an IronflowService RPC, e.g. `getRun`. */
export type ClientMethodName = keyof Methods;

/** What a binding may use besides the engine. */
export interface ClientMethodDeps {
  api: ClientApi;
  /** Answers Health; the `status` string. */
  health: (scope: CallScope) => Promise<string>;
}

export interface ClientMethodBinding<M extends ClientMethodName, R> {
  call(deps: ClientMethodDeps, scope: CallScope, req: MessageShape<Methods[M]['input']>): Promise<R>;
  toMessage(result: R): MessageInitShape<Methods[M]['output']>;
  /** Adjusts the protojson rendering of `toMessage(result)` for the Ironflow SDK, in place. */
  patchJson?(result: R, json: JsonObject): void;
  /** Keys (JSON, see `JsonBinding.strictFields`) and fields (binary and gRPC, see `unknownFieldPaths`) the request message does not have are refused by name instead of dropped. */
  strictFields?: boolean;
}

function bind<M extends ClientMethodName, R>(_method: M, binding: ClientMethodBinding<M, R>): ClientMethodBinding<M, R> {
  return binding;
}

/** Sets `json[key]` to a JSON-safe copy of `value`, or deletes the key for undefined/null. */
function setRaw(json: JsonObject, key: string, value: unknown): void {
  const raw = toJsonValue(value);
  if (raw === undefined || raw === null) delete json[key];
  else json[key] = raw;
}

function asObjects(value: JsonValue | undefined): JsonObject[] {
  return Array.isArray(value) ? (value as JsonObject[]) : [];
}

/** Run JSON (5.5): status as the lowercase contracts string; input/output as stored. */
function patchRunJson(run: RunView, json: JsonObject): void {
  json.status = run.status;
  setRaw(json, 'input', run.input);
  setRaw(json, 'output', run.output);
}

/** RunResult JSON (5.2): status lowercase (the SDK throws only for `failed`/`cancelled`). */
function patchRunResultJson(result: RunResultView, json: JsonObject): void {
  json.status = result.status;
  setRaw(json, 'output', result.output);
}

/** Step `type` and `status` are the engine's lowercase strings in JSON (`run`, `waiting`), as `StepView` says. */
function patchStepJson(step: StepView, json: JsonObject): void {
  setRaw(json, 'output', step.output);
  setRaw(json, 'error', step.error);
  json.type = step.type;
  json.status = step.status;
}

function patchHistoryJson(entry: RunHistoryEntry, json: JsonObject): void {
  setRaw(json, 'data', entry.data);
}

function patchEach<T>(items: T[], jsons: JsonObject[], patch: (item: T, json: JsonObject) => void): void {
  items.forEach((item, i) => jsons[i] && patch(item, jsons[i]));
}

/** Every IronflowService RPC, by local name. */
export const CLIENT_METHODS = {
  registerFunction: bind('registerFunction', {
    // Registration refuses every option it would not act on, on every route (README "Function options").
    strictFields: true,
    call: (d, scope, req) => d.api.registerFunction(scope, registerFunctionInputFromProto(req)),
    toMessage: (r) => ({ function: functionToProto(r.function), created: r.created }),
  }),
  trigger: bind('trigger', {
    call: (d, scope, req) => d.api.trigger(scope, triggerInputFromProto(req)),
    toMessage: (r) => ({ runIds: r.runIds, eventId: r.eventId, debouncedFunctionIds: r.debouncedFunctionIds, duplicate: r.duplicate }),
  }),
  emit: bind('emit', {
    call: (d, scope, req) => d.api.trigger(scope, triggerInputFromProto(req)),
    toMessage: (r) => ({ runIds: r.runIds, eventId: r.eventId, debouncedFunctionIds: r.debouncedFunctionIds, duplicate: r.duplicate }),
  }),
  triggerSync: bind('triggerSync', {
    call: (d, scope, req) =>
      d.api.triggerSync(scope, {
        ...triggerInputFromProto(req),
        ...syncTimeoutFromProto(req.timeoutMs),
      }),
    toMessage: (r) => ({ eventId: r.eventId, results: r.results.map(runResultToProto) }),
    patchJson: (r, json) => patchEach(r.results, asObjects(json.results), patchRunResultJson),
  }),
  invokeFunctionSync: bind('invokeFunctionSync', {
    call: (d, scope, req) =>
      d.api.invokeFunctionSync(scope, {
        functionId: req.functionId,
        input: req.input ?? {},
        ...syncTimeoutFromProto(req.timeoutMs),
      }),
    toMessage: runResultToProto,
    patchJson: patchRunResultJson,
  }),
  getRun: bind('getRun', {
    call: (d, scope, req) => d.api.getRun(scope, req.id),
    toMessage: runToProto,
    patchJson: patchRunJson,
  }),
  listRuns: bind('listRuns', {
    call: (d, scope, req) => {
      // Refused rather than ignored: the store has no time filter yet, and a negative page size is no page size.
      const unsupported = [...(req.since ? ['since'] : []), ...(req.until ? ['until'] : [])];
      if (unsupported.length > 0) throw new EngineError('VALIDATION_ERROR', `${unsupported.join(', ')}: not supported by this engine (ListRuns filters by functionId and status only)`);
      if (req.limit < 0) throw new EngineError('VALIDATION_ERROR', `limit: 0 (the default page, 50) or more, not ${req.limit}`);
      const status = runStatusFromProto(req.status);
      return d.api.listRuns(scope, {
        ...(req.functionId ? { functionId: req.functionId } : {}),
        ...(status ? { status } : {}),
        ...(req.limit > 0 ? { limit: req.limit } : {}),
        ...(req.cursor ? { cursor: req.cursor } : {}),
      });
    },
    toMessage: (r) => ({ runs: r.runs.map(runToProto), nextCursor: r.nextCursor, totalCount: r.totalCount }),
    patchJson: (r, json) => patchEach(r.runs, asObjects(json.runs), patchRunJson),
  }),
  getRunSteps: bind('getRunSteps', {
    call: (d, scope, req) => d.api.getRunSteps(scope, req.id),
    toMessage: (r) => ({
      steps: r.steps.map(stepToProto),
      history: r.history.map(historyEntryToProto),
      children: r.children.map(runToProto),
    }),
    patchJson: (r, json) => {
      patchEach(r.steps, asObjects(json.steps), patchStepJson);
      patchEach(r.history, asObjects(json.history), patchHistoryJson);
      patchEach(r.children, asObjects(json.children), patchRunJson);
    },
  }),
  cancelRun: bind('cancelRun', {
    call: (d, scope, req) => d.api.cancelRun(scope, req.id, req.reason),
    toMessage: runToProto,
    patchJson: patchRunJson,
  }),
  health: bind('health', {
    call: (d, scope) => d.health(scope),
    toMessage: (status) => ({ status }),
  }),
  listFunctions: bind('listFunctions', {
    call: (d, scope) => d.api.listFunctions(scope),
    toMessage: (fns) => ({ functions: fns.map(functionToProto) }),
  }),
  pauseRun: bind('pauseRun', {
    call: (d, scope, req) => d.api.pauseRun(scope, req.runId, req.reason || undefined),
    toMessage: (r) => ({ status: r.status }),
  }),
  getPausedState: bind('getPausedState', {
    call: (d, scope, req) => d.api.getPausedState(scope, req.runId),
    toMessage: (r) => ({
      steps: r.steps.map((s) => ({
        id: s.id,
        name: s.name,
        output: toJsonText(s.output),
        injected: s.injected,
        completedAt: toTimestamp(s.completedAt),
        stepType: s.type,
        status: s.status,
      })),
      nextStepHint: r.nextStepHint,
      pauseReason: r.pauseReason,
    }),
  }),
  injectStepOutput: bind('injectStepOutput', {
    call: (d, scope, req) =>
      d.api.injectStepOutput(scope, { runId: req.runId, stepId: req.stepId, output: fromJsonText('new_output', req.newOutput), reason: req.reason || undefined }),
    toMessage: (r) => ({ stepId: r.stepId, previousOutput: toJsonText(r.previousOutput) }),
  }),
  resumeRun: bind('resumeRun', {
    call: (d, scope, req) => d.api.resumeRun(scope, req.runId, req.fromStep || undefined),
    toMessage: runToProto,
    patchJson: patchRunJson,
  }),
// eslint-disable-next-line @typescript-eslint/no-explicit-any
} satisfies { [M in ClientMethodName]: ClientMethodBinding<M, any> };

/** Default Health answer: the engine process is up. */
export const defaultHealth = async (): Promise<string> => 'ok';
