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

export interface FunctionTrigger {
  event?: string;
  expression?: string;
  cron?: string;
}

export interface ConcurrencyConfig {
  limit: number;
  key?: string;
}

export interface CancelOnSpec {
  event: string;
  match?: string;
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
  metadata?: Record<string, unknown>;
  /**
   * Names of the secrets (of the function's project and env) delivered with every segment: push
   * request `secrets`, pull assignment `context.secrets`, stream `JobContext.secrets`.
   */
  secrets?: string[];
}

export const DEFAULT_FUNCTION_TIMEOUT_MS = 600_000;

/** Largest accepted request body (event data, reports), in bytes. */
export const DEFAULT_MAX_PAYLOAD_BYTES = 4 * 1024 * 1024;
