import type { YieldInfo } from '@ironflow/contracts';

/**
 * Internal: thrown by a wait primitive (`sleep`, `sleepUntil`, `waitForEvent`, `invoke`,
 * `invokeAsync`) that is not satisfied yet, to end the invocation as `yielded` (WIRE-PROTOCOL.md
 * 1.1). Handlers must not swallow it; if one does, the invocation still ends as yielded, because
 * the first yield of an invocation is recorded before the signal is thrown.
 */
export class YieldSignal extends Error {
  constructor(readonly info: YieldInfo) {
    super(`ironflow: invocation yields at step ${info.step_id} (${info.type}); do not catch this`);
    this.name = 'IronflowYieldSignal';
  }
}

export function isYieldSignal(err: unknown): err is YieldSignal {
  return err instanceof YieldSignal;
}
