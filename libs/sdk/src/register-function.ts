import { createHash } from 'node:crypto';
import type { FunctionConfig, IronflowFunction } from './function';

/** Connect procedure of function registration (WIRE-PROTOCOL.md 5.3). */
export const REGISTER_FUNCTION_PROCEDURE = 'ironflow.v1.IronflowService/RegisterFunction';
/** Metadata key carrying the handler's code hash. */
export const CODE_HASH_KEY = '__ironflow_code_hash';

/** First 16 hex chars of SHA-256 of the handler's source text (`handler.toString()`). */
export function codeHash(handler: (...args: never[]) => unknown): string {
  return createHash('sha256').update(handler.toString()).digest('hex').slice(0, 16);
}

function common(config: FunctionConfig, body: Record<string, unknown>): void {
  if (config.description !== undefined) body.description = config.description;
  if (config.retry !== undefined) body.retry = { ...config.retry };
  if (config.timeoutMs !== undefined) body.timeoutMs = config.timeoutMs;
  if (config.concurrency !== undefined) body.concurrency = { ...config.concurrency };
  if (config.cancelOn && config.cancelOn.length > 0) body.cancelOn = config.cancelOn.map((c) => ({ ...c }));
  if (config.secrets && config.secrets.length > 0) body.secrets = [...config.secrets];
  if (config.recording !== undefined) body.recording = config.recording;
  // As the Ironflow SDK sends it (WIRE-PROTOCOL.md 5.3): snake_case, `max_wait_ms` only when set.
  if (config.debounce !== undefined) {
    const { periodMs, key, maxWaitMs } = config.debounce;
    body.debounce = { period_ms: periodMs, key: key ?? '', ...(maxWaitMs !== undefined ? { max_wait_ms: maxWaitMs } : {}) };
  }
}

const copyTriggers = (config: FunctionConfig) => (config.triggers ?? []).map((t) => ({ ...t }));

/**
 * RegisterFunction body a pull worker sends (R1): `name` defaults to the id, `triggers` to `[]`,
 * `preferredMode` is always `"EXECUTION_MODE_PULL"`, and `metadata` is the user's metadata plus
 * `__ironflow_code_hash`. Optional fields are left out when unset.
 */
export function workerRegistrationBody(fn: IronflowFunction<any, any>): Record<string, unknown> {
  const body: Record<string, unknown> = { id: fn.id, name: fn.config.name ?? fn.id, triggers: copyTriggers(fn.config) };
  common(fn.config, body);
  body.preferredMode = 'EXECUTION_MODE_PULL';
  body.metadata = { ...(fn.config.metadata ?? {}), [CODE_HASH_KEY]: codeHash(fn.handler) };
  return body;
}

/**
 * RegisterFunction body of `client.registerFunction`: only the fields given; `preferredMode` is the
 * raw `mode` (`"push"`/`"pull"`), `endpointUrl` the push target.
 */
export function clientRegistrationBody(config: FunctionConfig & { endpointUrl?: string }): Record<string, unknown> {
  const body: Record<string, unknown> = { id: config.id };
  if (config.name !== undefined) body.name = config.name;
  if (config.triggers !== undefined) body.triggers = copyTriggers(config);
  common(config, body);
  if (config.mode !== undefined) body.preferredMode = config.mode;
  if (config.endpointUrl !== undefined) body.endpointUrl = config.endpointUrl;
  return body;
}
