import { FollowUpTracker } from '@ironflow/follow-up';

/**
 * A fault hook for "the node dies right after the commit": once `crash()` is called, every
 * follow-up handed to the tracker is dropped unrun, as if the process had exited after the
 * outcome's transaction committed. Work already running finishes.
 */
export class CrashingFollowUpTracker extends FollowUpTracker {
  private crashed = false;
  readonly dropped: string[] = [];

  constructor() {
    super({ warn: () => undefined });
  }

  crash(): void {
    this.crashed = true;
  }

  override track(kind: string, work: () => Promise<void>): void {
    if (this.crashed) {
      this.dropped.push(kind);
      return;
    }
    super.track(kind, work);
  }
}
