import { ExecutionMode } from './statuses';

/** Retry policy of a function; defaults from WIRE-PROTOCOL.md section 6. Delays in ms. */
export interface RetryConfig {
  maxAttempts: number;
  initialDelayMs: number;
  backoffFactor: number;
  maxDelayMs: number;
}

export const DEFAULT_RETRY: RetryConfig = {
  maxAttempts: 3,
  initialDelayMs: 1000,
  backoffFactor: 2,
  maxDelayMs: 300_000,
};

/**
 * One trigger of a function (WIRE-PROTOCOL.md 5.3). An event trigger names `event` and may filter
 * it with a CEL `expression` over `event` (e.g. `event.data.amount > 10`). A cron trigger names
 * `cron`, a 5-field (minutes) or 6-field (seconds first) schedule, optionally prefixed with
 * `CRON_TZ=<IANA zone> ` (default UTC); its `event`, if given, is only the name of the event its
 * runs see.
 */
export interface FunctionTrigger {
  event?: string;
  expression?: string;
  cron?: string;
}

/**
 * Debounce (WIRE-PROTOCOL.md 5.3): events of one key collapse into one run, started with the last
 * of them once `periodMs` (at least 1000) passed without another; `maxWaitMs` (at least
 * `periodMs`; absent = no cap) bounds how long the first event of a window waits. `key` is a JSON
 * path into the event data (`customerId`, `data.customerId` or `event.data.customerId`); absent or
 * resolving to nothing = one window for the whole function.
 */
export interface DebounceConfig {
  periodMs: number;
  key?: string;
  maxWaitMs?: number;
}

export interface ConcurrencyConfig {
  limit: number;
  key?: string;
}

export interface CancelOnSpec {
  event: string;
  match?: string;
  /** A CEL condition over `event` (the run's own event) and `async` (the cancel event); the spec matches only when it holds. */
  if?: string;
}

/**
 * A registered function (DESIGN.md `functions` table). `version` starts at 1 and increases on
 * every registration that changes the definition.
 */
export interface FunctionDefinition {
  id: string;
  name: string;
  description?: string;
  mode: ExecutionMode;
  endpointUrl?: string;
  triggers: FunctionTrigger[];
  retry: RetryConfig;
  /** Whole-invocation timeout in ms; bounds a push call. Default 600000. */
  timeoutMs: number;
  concurrency?: ConcurrencyConfig;
  cancelOn: CancelOnSpec[];
  debounce?: DebounceConfig;
  metadata?: Record<string, unknown>;
  /**
   * Names of the secrets (of the function's project and env) delivered with every segment: push
   * request `secrets`, pull assignment `context.secrets`, stream `JobContext.secrets`.
   */
  secrets?: string[];
  /** Recording profile; absent means `DEFAULT_RECORDING_PROFILE`. */
  recordingProfile?: RecordingProfile;
}

export const DEFAULT_FUNCTION_TIMEOUT_MS = 600_000;

/** Largest accepted request body (event data, reports), in bytes. */
export const DEFAULT_MAX_PAYLOAD_BYTES = 4 * 1024 * 1024;

/**
 * Largest message on a worker stream (`WorkerService.Connect`), in bytes: the engine never sends
 * a larger one (a job assignment over it fails its attempt with `PAYLOAD_TOO_LARGE`), and our
 * SDK's gRPC client accepts messages up to it.
 */
export const STREAM_MAX_MESSAGE_BYTES = 64 * 1024 * 1024;

/**
 * What a function records in `audit_events` (its recording profile):
 * - `none`: no workflow rows;
 * - `run_lifecycle` (the default): the run's lifecycle and capacity rows, every `run.*` row
 *   (`run.created`, `run.status_changed`, `run.cancelled`, `run.retry_scheduled`,
 *   `run.lease_recovered`, and the operator's `run.pause_requested`, `run.paused`, `run.resumed`,
 *   `run.step_injected`), which `run get` shows as the run's history;
 * - `all`: those and a row per saved step (`step.completed`, `step.failed`): each step a report
 *   saves, written on the reporter's path before the report commits, and the invoke step a
 *   parent wake finishes, written after the wake; time travel needs it.
 * The SDK's registration `recording: true` selects `all`, `recording: false` selects `none`, and
 * leaving it out keeps the default.
 */
export type RecordingProfile = 'none' | 'run_lifecycle' | 'all';

export const DEFAULT_RECORDING_PROFILE: RecordingProfile = 'run_lifecycle';

/** Whether a function with `profile` records a row of `eventType`. */
export function profileRecords(profile: RecordingProfile, eventType: string): boolean {
  if (profile === 'all') return true;
  if (profile === 'run_lifecycle') return eventType.startsWith('run.');
  return false;
}

/**
 * Every event type an audit row through the recorder can have, and `recording_lookup` (a row lost
 * at its recording lookup): the label set of `ironflow_audit_write_failures_total`, initialised
 * at zero so a first failure shows as an increase.
 */
export const AUDIT_EVENT_TYPES = ['run.created', 'run.status_changed', 'run.cancelled', 'run.retry_scheduled', 'run.lease_recovered', 'run.pause_requested', 'run.paused', 'run.resumed', 'run.step_injected', 'step.completed', 'step.failed', 'recording_lookup'] as const;
