/**
 * Step shapes shared by the push and pull protocols (WIRE-PROTOCOL.md 1.4, 1.5).
 * Field names are the wire's snake_case.
 */

/** A step the worker executed in this invocation (1.4). */
export interface StepResult {
  id: string;
  name: string;
  type: 'invoke' | 'compensate';
  status: 'completed' | 'failed';
  started_at?: string;
  ended_at?: string;
  duration_ms?: number;
  output?: unknown;
  error?: { message: string; retryable?: boolean; stack?: string; code?: string };
  compensation_for?: string;
}

/** The one wait that ended an invocation (1.5). `until` is ISO-8601. */
export type YieldInfo =
  | { type: 'sleep'; step_id: string; until: string }
  | {
      type: 'wait_for_event';
      step_id: string;
      event_filter: { event: string; match?: string; timeout: string };
    }
  | {
      type: 'invoke_function';
      step_id: string;
      function_id: string;
      input?: unknown;
      invoke_timeout_ms?: number;
    }
  | { type: 'invoke_function_async'; step_id: string; function_id: string; input?: unknown };

/** The error object of a failed invocation (2.3, 3.3). */
export interface InvocationError {
  message: string;
  code?: string;
  retryable?: boolean;
  step_id?: string;
  stack?: string;
}

/**
 * The event a run was started by, as workers receive it (2.2, 3.4). `data` is always present
 * (`null` when there is none: the SDK's schema declares it `z.unknown()`, a required key);
 * `version` ≥ 1; `metadata` is absent when the event has none, never null.
 */
export interface WireEvent {
  id: string;
  name: string;
  data: unknown;
  timestamp: string;
  version?: number;
  idempotency_key?: string;
  source?: string;
  metadata?: Record<string, unknown>;
}
