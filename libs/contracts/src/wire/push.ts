import { InvocationError, StepResult, WireEvent, YieldInfo } from './steps';

/** A memoized step handed to a push invocation (2.2). `error` is a JSON string. */
export interface PushCompletedStep {
  id: string;
  name: string;
  status: 'completed' | 'failed' | 'timed_out';
  output?: unknown;
  error?: string;
}

/** Body of the engine's POST to a function endpoint (2.2). Optional fields are absent, never null. */
export interface PushRequest {
  run_id: string;
  function_id: string;
  attempt: number;
  event: WireEvent;
  steps: PushCompletedStep[];
  resume?: { step_id: string; type: 'sleep' | 'wait_for_event' | 'invoke_function' | 'invoke_function_async'; data?: unknown };
  secrets?: Record<string, string>;
}

/**
 * The endpoint's 200 answer (2.3). `sent_at` is ours (the Ironflow SDK does not send it): the
 * endpoint's clock when it answered, ISO-8601; it places a sleep on the engine's clock.
 */
export type PushResponse = { sent_at?: string } & (
  | { status: 'completed'; result?: unknown; steps: StepResult[] }
  | { status: 'failed'; error: InvocationError; steps: StepResult[] }
  | { status: 'yielded'; yield: YieldInfo; steps: StepResult[] }
);
