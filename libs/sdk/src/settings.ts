/**
 * Defaults and environment lookups shared by the client, the worker and `serve()`
 * (WIRE-PROTOCOL.md 0, 3.1, 6).
 */

import { IronflowError } from './errors';

/** Version this SDK reports in worker registration (`version.sdk`). */
export const SDK_VERSION = '0.1.0';
/** Server URL used when neither the config nor `IRONFLOW_SERVER_URL` gives one. */
export const DEFAULT_SERVER_URL = 'http://localhost:9123';
/** Environment used when neither the config nor `IRONFLOW_ENV` gives one. */
export const DEFAULT_ENVIRONMENT = 'default';
/** Header naming the environment on every worker call, client call and push response. */
export const ENVIRONMENT_HEADER = 'X-Ironflow-Environment';

const nonEmpty = (v: string | undefined): string | undefined => (v === undefined || v === '' ? undefined : v);

/**
 * `config` → `IRONFLOW_SERVER_URL` → `http://localhost:9123`, trailing `/` removed. Throws
 * `IronflowError` `VALIDATION_ERROR` naming where it came from when it is not an http:// or
 * https:// URL (`localhost:9123` without a scheme would otherwise fail every call as unreachable).
 */
export function resolveServerUrl(configured?: string): string {
  const fromConfig = nonEmpty(configured);
  const url = fromConfig ?? nonEmpty(process.env.IRONFLOW_SERVER_URL) ?? DEFAULT_SERVER_URL;
  if (!URL.canParse(url) || !['http:', 'https:'].includes(new URL(url).protocol)) {
    const source = fromConfig !== undefined ? 'serverUrl' : 'IRONFLOW_SERVER_URL';
    throw new IronflowError(`${source}: "${url}" is not an http:// or https:// URL (e.g. ${DEFAULT_SERVER_URL})`, { code: 'VALIDATION_ERROR' });
  }
  return url.replace(/\/+$/, '');
}

/** `config` → `IRONFLOW_API_KEY`; an empty string counts as unset. */
export function resolveApiKey(configured?: string): string | undefined {
  return nonEmpty(configured) ?? nonEmpty(process.env.IRONFLOW_API_KEY);
}

/** `config` → `IRONFLOW_ENV` → `"default"`. */
export function resolveEnvironment(configured?: string): string {
  return nonEmpty(configured) ?? nonEmpty(process.env.IRONFLOW_ENV) ?? DEFAULT_ENVIRONMENT;
}
