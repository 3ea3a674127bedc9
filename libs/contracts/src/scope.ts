import { EngineError } from './errors';

/** Project and env names stand in NATS subjects: letters, digits, `_` and `-`, at most 64. */
const SCOPE_NAME = /^[A-Za-z0-9_-]{1,64}$/;

/** True for a name that can stand as a project or env (letters, digits, `_`, `-`; at most 64). */
export function isScopeName(value: string): boolean {
  return SCOPE_NAME.test(value);
}

/**
 * The env of a call from `X-Ironflow-Environment` (or a worker's `labels.env`): `default` when
 * absent or blank. Throws `VALIDATION_ERROR` for a name that cannot stand in a subject token
 * (a `.`, `*`, `>`, a space…), so nothing is written under it.
 */
export function parseEnvironment(value: string | null | undefined): string {
  const env = value?.trim();
  if (!env) return 'default';
  if (!SCOPE_NAME.test(env)) {
    throw new EngineError('VALIDATION_ERROR', `environment ${JSON.stringify(env.slice(0, 80))}: letters, digits, "_" and "-" only, at most 64`);
  }
  return env;
}
