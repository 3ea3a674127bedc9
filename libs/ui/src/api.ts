/**
 * The UI's only door to the engine. Every call goes through {@link request}, which adds the
 * credentials and scope headers in one place: `Authorization: Bearer <key>` when a key was
 * entered (kept in `sessionStorage`, for this tab only) and `X-Ironflow-Environment` when an
 * environment was chosen. Errors become {@link ApiError} with the engine's code.
 */

export interface RunError { message: string; code?: string; child_run_id?: string }
export interface Run {
  id: string; functionId: string; functionVersion: number; eventId: string; executionMode: string; status: string;
  attempt: number; maxAttempts: number; input: unknown; output?: unknown; error?: RunError;
  parentRunId?: string; parentStepId?: string; createdAt: string; updatedAt: string; startedAt?: string; endedAt?: string;
}
export interface Step {
  id: string; name: string; type: string; status: string; output?: unknown; error?: unknown; childRunId?: string;
  wakeAt?: string; sequence: number; createdAt: string; startedAt?: string; endedAt?: string;
  /** The output was set by InjectStepOutput while the run was paused. */
  injected?: boolean;
}
export interface HistoryEntry { eventType: string; cause?: string; data?: unknown; ts: string }
export interface RunSteps { steps: Step[]; history: HistoryEntry[]; children: Run[] }
export interface FunctionInfo {
  id: string; name: string; mode: string; endpointUrl?: string; version: number;
  triggers: { event?: string; cron?: string; expression?: string }[]; retry?: { maxAttempts?: number }; concurrency?: { limit: number; key?: string };
}
export interface EventInfo { id: string; name: string; data: unknown; idempotencyKey?: string; ts: string }
/** What the server offers the UI (`/ui/config.json`): which run actions its API has. */
export interface UiConfig { actions: { pause: boolean; resume: boolean } }

const KEY = 'ironflow.apiKey';
const ENV = 'ironflow.environment';

/** The API key and environment the calls carry (this tab only). */
export const credentials = {
  get apiKey(): string { return sessionStorage.getItem(KEY) ?? ''; },
  set apiKey(value: string) { value ? sessionStorage.setItem(KEY, value) : sessionStorage.removeItem(KEY); },
  get environment(): string { return sessionStorage.getItem(ENV) ?? ''; },
  set environment(value: string) { value ? sessionStorage.setItem(ENV, value) : sessionStorage.removeItem(ENV); },
};

/** A refused or failed call: HTTP status, the engine's code (`RUN_NOT_FOUND`, `UNAUTHENTICATED`…) and message. */
export class ApiError extends Error {
  constructor(readonly status: number, readonly code: string, message: string) {
    super(message);
  }
}

/** One call: JSON in and out, the headers of {@link credentials}; throws {@link ApiError}. */
async function request<T>(method: 'GET' | 'POST', path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { accept: 'application/json' };
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (credentials.apiKey) headers.authorization = `Bearer ${credentials.apiKey}`;
  if (credentials.environment) headers['x-ironflow-environment'] = credentials.environment;
  let res: Response;
  try {
    res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  } catch (err) {
    throw new ApiError(0, 'UNREACHABLE', `the engine did not answer (${err instanceof Error ? err.message : String(err)})`);
  }
  const text = await res.text();
  let parsed: unknown;
  try {
    parsed = text ? JSON.parse(text) : {};
  } catch {
    parsed = undefined;
  }
  if (!res.ok) {
    const e = (parsed ?? {}) as { code?: string; ironflowCode?: string; message?: string };
    throw new ApiError(res.status, e.ironflowCode ?? e.code ?? `HTTP_${res.status}`, e.message ?? (text.slice(0, 200) || `HTTP ${res.status}`));
  }
  return parsed as T;
}

/** Query string of the defined, non-empty values. */
function query(params: Record<string, string | number | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== '') q.set(k, String(v));
  const s = q.toString();
  return s ? `?${s}` : '';
}

const rpc = <T>(method: string, body: unknown) => request<T>('POST', `/ironflow.v1.IronflowService/${method}`, body);

export const api = {
  listRuns: (f: { functionId?: string; status?: string; limit?: number; cursor?: string }) =>
    request<{ runs: Run[]; nextCursor: string; totalCount: number }>('GET', `/api/v1/runs${query(f)}`),
  getRun: (id: string) => request<Run>('GET', `/api/v1/runs/${encodeURIComponent(id)}`),
  getRunSteps: (id: string) => request<RunSteps>('GET', `/api/v1/runs/${encodeURIComponent(id)}/steps`),
  listFunctions: () => request<{ functions: FunctionInfo[] }>('GET', '/api/v1/functions'),
  listEvents: (f: { name?: string; limit?: number; cursor?: string }) => request<{ events: EventInfo[]; nextCursor: string }>('GET', `/api/v1/events${query(f)}`),
  cancelRun: (id: string, reason: string) => rpc<Run>('CancelRun', { id, reason }),
  pauseRun: (id: string, reason: string) => rpc<{ status: string }>('PauseRun', { runId: id, reason }),
  resumeRun: (id: string) => rpc<unknown>('ResumeRun', { runId: id }),
  config: () => request<UiConfig>('GET', '/ui/config.json'),
};
