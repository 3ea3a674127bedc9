import { Bus, subjects } from '@ironflow/bus';
import { Clock } from '@ironflow/store';

/**
 * Hints that a segment was queued, so a dispatcher claims it before its next poll. A lost hint
 * costs at most one poll period (DESIGN.md principle 1), so a hint is published without waiting
 * for the stream's acknowledgement. It carries `at`, the sender's store clock when it was sent
 * (at or after the segment's `available_at`): a dispatcher whose own estimate of the store clock
 * is behind can tell that a claim may not see the segment yet, and claims again once it is `at`.
 */
export class DispatchHints {
  constructor(
    private readonly bus: Bus,
    private readonly clock: Clock,
  ) {}

  queued(project: string, env: string, mode: string): void {
    void this.bus.publish(subjects.stepsHint(project, env, mode), { at: this.clock.now() }, { unacked: true }).catch(() => undefined);
  }

  /** Calls `onHint` for every hint of `mode` in any project and env, with its `at` (ms, store clock) when it has one. */
  onQueued(mode: string, onHint: (at: number | undefined) => void): () => void {
    const sub = this.bus.subscribe(`ironflow.*.*.steps.${mode}`, (message) => {
      const at = (message.data as { at?: unknown } | null)?.at;
      onHint(typeof at === 'number' && Number.isFinite(at) ? at : undefined);
    });
    return () => sub.unsubscribe();
  }
}
