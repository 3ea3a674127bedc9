import { subjects } from '@ironflow/bus';
import { RunRecord } from '@ironflow/store';
import { EngineResources } from './resources';
import { toRunResultView } from './views';

/**
 * The follow-ups of a committed outcome (specification, "What follows a commit"), announced from
 * the committed row, never from a re-read, each off the caller's path: the RESULTS frame
 * (msg-id `result-{runId}`), the run event (best effort), and the parent wake for a child.
 */
export class OutcomeAnnouncer {
  private wakeParent: (child: RunRecord) => Promise<void> = async () => undefined;

  constructor(private readonly r: EngineResources) {}

  /** Wired by the engine once the wake system exists (the two refer to each other). */
  setParentWake(wake: (child: RunRecord) => Promise<void>): void {
    this.wakeParent = wake;
  }

  announce(committed: RunRecord): void {
    this.r.metrics.runOutcomes.inc({ status: committed.status });
    this.r.followUps.track('results-frame', () =>
      this.r.bus.publish(subjects.result(committed.project, committed.env, committed.id), toRunResultView(committed), {
        msgId: `result-${committed.id}`,
      }),
    );
    this.r.followUps.track('run-event', () =>
      this.r.bus.publish(subjects.runEvent(committed.env, committed.id, committed.status), { runId: committed.id, status: committed.status }),
    );
    if (committed.parentRunId) this.r.followUps.track('parent-wake', () => this.wakeParent(committed));
  }
}
