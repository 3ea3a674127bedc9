import { Bus, subjects } from '@ironflow/bus';

/**
 * Hints that a segment was queued, so a dispatcher claims it before its next poll. A lost hint
 * costs at most one poll period (DESIGN.md principle 1).
 */
export class DispatchHints {
  constructor(private readonly bus: Bus) {}

  queued(project: string, env: string, mode: string): void {
    void this.bus.publish(subjects.stepsHint(project, env, mode), {}).catch(() => undefined);
  }

  /** Calls `onHint` for every hint of `mode` in any project and env. */
  onQueued(mode: string, onHint: () => void): () => void {
    const sub = this.bus.subscribe(`ironflow.*.*.steps.${mode}`, onHint);
    return () => sub.unsubscribe();
  }
}
