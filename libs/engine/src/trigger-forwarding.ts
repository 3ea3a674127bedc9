import { CallScope, EngineError, EngineErrorCode, TriggerInput, TriggerOutput, isEngineError } from '@ironflow/contracts';

/**
 * Claim at trigger in a cluster (issue 11; DESIGN.md "Performance budgets"). A node that does not
 * dispatch push itself, or has no push slot free (the api-gateway: `IRONFLOW_GATEWAY_PUSH=false`,
 * or its slots all taken), hands a sync trigger to a dispatcher, which runs it with
 * its own {@link DispatchAtOnce} reservation: the event, its runs and the first push run's claim
 * and lease in one unit of work, the push call at once (with as many triggers already
 * waiting for a slot as may, it runs the trigger at once with the run queued for a claim). The caller then
 * waits for the outcome as before. The gateway keeps the API key check and validates the input first, so a
 * `VALIDATION_ERROR` or `PAYLOAD_TOO_LARGE` never leaves it.
 *
 * The gateway draws the event id before it forwards (`eventId`). When no dispatcher took the
 * trigger (none answered, none had a slot in time, the answer was lost or late, or the
 * dispatcher failed without an `EngineError`), the gateway runs the trigger itself with that same id; if a
 * dispatcher did commit it, the gateway's insert finds that event and answers with its runs
 * (`eventsSql.insertEvent`), so a lost answer never makes a second event or run.
 */
export interface TriggerForwarder {
  /**
   * Resolves with the trigger's output when a dispatcher ran it; `undefined` when none did (the
   * caller triggers itself, with `request.eventId`). Rejects with the `EngineError` the
   * dispatcher's trigger threw (`FUNCTION_DEBOUNCED`, `UNAVAILABLE`…), which committed nothing.
   */
  forward(request: ForwardedTrigger): Promise<TriggerOutput | undefined>;
}

/** What a forwarded sync trigger carries: the caller's scope (already authenticated), its input and the event id the gateway drew. */
export interface ForwardedTrigger {
  scope: CallScope;
  input: TriggerInput;
  eventId: string;
}

/**
 * A dispatcher's answer: the trigger's output; `busy` (no push slot freed in time, or its push dispatch stopped: it did nothing);
 * or the `EngineError` its trigger threw (nothing committed).
 */
export type ForwardedTriggerReply =
  | { output: TriggerOutput }
  | { busy: true }
  | { error: { code: EngineErrorCode; message: string; details?: Record<string, unknown> } };

/**
 * Logical subject of a forwarded sync trigger (on the wire `ifx.{clusterId}.…`, see `BusNamespace`);
 * project and env are the caller's, one token each (`parseEnvironment`).
 */
export const forwardedTriggerSubject = (project: string, env: string) => `ironflow.${project}.${env}.trigger.sync`;
/** What every dispatcher answers, in the queue group {@link FORWARDED_TRIGGER_QUEUE}, so one of them takes each trigger. */
export const FORWARDED_TRIGGER_PATTERN = 'ironflow.*.*.trigger.sync';
/** The dispatchers' queue group (namespaced per deployment: `{clusterId}-dispatcher`). */
export const FORWARDED_TRIGGER_QUEUE = 'dispatcher';

/** The reply for `err`, a trigger's failure: an `EngineError` travels as it is; anything else is rethrown (no reply: the gateway triggers itself). */
export function errorReply(err: unknown): ForwardedTriggerReply {
  if (!isEngineError(err)) throw err;
  return { error: { code: err.code, message: err.message, ...(err.details ? { details: err.details } : {}) } };
}

/** The gateway's side of a reply: the output, `undefined` (busy or not a reply), or the `EngineError` thrown again as the dispatcher threw it. */
export function outputOf(reply: unknown): TriggerOutput | undefined {
  if (!reply || typeof reply !== 'object') return undefined;
  const r = reply as Partial<{ output: TriggerOutput; error: { code: EngineErrorCode; message: string; details?: Record<string, unknown> } }>;
  if (r.error && typeof r.error.code === 'string') throw new EngineError(r.error.code, r.error.message, r.error.details);
  const output = r.output;
  if (!output || typeof output.eventId !== 'string' || !Array.isArray(output.runIds)) return undefined;
  return {
    eventId: output.eventId,
    runIds: output.runIds,
    debouncedFunctionIds: Array.isArray(output.debouncedFunctionIds) ? output.debouncedFunctionIds : [],
    duplicate: output.duplicate === true,
  };
}
