/**
 * Run and step vocabulary (DESIGN.md "Data model"). Run statuses travel on the wire as these
 * lowercase strings (WIRE-PROTOCOL.md 5.5); there is no `pending`.
 */
export const RUN_STATUSES = [
  'waiting_for_capacity',
  'running',
  'waiting',
  'paused',
  'completed',
  'failed',
  'cancelled',
] as const;
export type RunStatus = (typeof RUN_STATUSES)[number];

export const TERMINAL_RUN_STATUSES = ['completed', 'failed', 'cancelled'] as const;
export type TerminalRunStatus = (typeof TERMINAL_RUN_STATUSES)[number];

/** True for `completed`, `failed` and `cancelled`: no write moves a run out of these. */
export function isTerminalRunStatus(status: string): status is TerminalRunStatus {
  return (TERMINAL_RUN_STATUSES as readonly string[]).includes(status);
}

export function isRunStatus(status: string): status is RunStatus {
  return (RUN_STATUSES as readonly string[]).includes(status);
}

/** What a `steps` row records (DESIGN.md: type run/sleep/wait_for_event/invoke). */
export type StepType = 'run' | 'sleep' | 'wait_for_event' | 'invoke';
export type StepStatus = 'completed' | 'failed' | 'waiting' | 'timed_out';

/** How a function's runs reach a worker. */
export const EXECUTION_MODES = ['push', 'pull'] as const;
export type ExecutionMode = (typeof EXECUTION_MODES)[number];
