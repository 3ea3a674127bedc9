import { setImmediate as nextTurn } from 'node:timers/promises';
import { runFields } from '@ironflow/observability';
import { subjects } from '@ironflow/bus';
import { RunResultView } from '@ironflow/contracts';
import { RunRecord, deadLettersSql } from '@ironflow/store';
import { boundedFollowUpWrite } from './bounded-follow-up-write';
import { EngineResources } from './resources';
import { recordRunCreated } from './run-created-audit';
import { toRunResultView } from './views';
import type { ResultWaiters } from './result-waiters';

/** Why an outcome was committed; the audit row's cause. */
export type OutcomeCause =
  | 'report'
  | 'user-cancel'
  | 'invoke-failed'
  | 'step-timeout'
  | 'wake'
  | 'recovery-exhausted'
  /** A `cancel_on` match, live or replayed (specification, "Two recovery paths announce the same way"). */
  | 'cancel-on-event'
  /** A queue admission refused for a reason no retry can change. */
  | 'admission-refused';

/**
 * The follow-ups of a committed outcome (specification, "What follows a commit"), announced from
 * the committed row, never from a re-read, off the caller's path and in this order: the RESULTS
 * frame (msg-id `result-{runId}`; a failure is counted in
 * `ironflow_run_result_publish_failures_total` and the caller still sees success) and right behind
 * it the run event (best effort: a failure is counted and kept in `dead_letters` without payload, a
 * write that takes a follow-up slot and keeps to its 5 s budget), sent together without waiting
 * for the frame's acknowledgement; then, once both are settled, the audit row. The parent wake of
 * a child starts at once, in its own follow-up.
 *
 * An outcome that ended a run still held (created, its admission not yet through its dispatch: a
 * `cancel_on` match, a cancel or a refusal that reached it first) writes the run's `run.created`
 * row before its own ({@link recordRunCreated}; the store keeps one a run, so the admission's row,
 * landed or still to come, changes nothing). Its admission may not have written that row yet, and
 * the trail must not show the outcome before the creation, by time or by insert order.
 */
export class OutcomeAnnouncer {
  private wakeParent: (child: RunRecord) => Promise<void> = async () => undefined;

  constructor(private readonly r: EngineResources) {}

  /** Wired by the engine once the wake system exists (the two refer to each other). */
  setParentWake(wake: (child: RunRecord) => Promise<void>): void {
    this.wakeParent = wake;
  }

  private localFrames?: Pick<ResultWaiters, 'deliver'>;

  /** Wired by the engine: the sync calls of this process, which hear its frames before the bus carries them ({@link ResultWaiters.deliver}). */
  setLocalFrames(waiters: Pick<ResultWaiters, 'deliver'>): void {
    this.localFrames = waiters;
  }

  /**
   * Announces `committed`. Resolves when its audit row has landed or been dropped: a user cancel
   * awaits that; every other caller ignores the promise. Never rejects. `background`: nobody
   * awaits the promise, so the row may wait for other rows to share its insert (`auditLingerMs`).
   * `held`: the run was held when the outcome committed (as its committing unit read it under the
   * run's lock; the commit clears it), so its `run.created` row goes first (default `false`).
   */
  announce(committed: RunRecord, cause: OutcomeCause, options: { background?: boolean; held?: boolean } = {}): Promise<void> {
    const { held = false, ...recording } = options;
    this.r.metrics.runOutcomes.inc({ status: committed.status });
    if (committed.parentRunId) this.r.followUps.track('parent-wake', () => this.wakeParent(committed));
    return new Promise<void>((resolve) => {
      this.r.followUps.track('announce', async () => {
        try {
          // A sync call of this process waiting for the frame hears it first, and answers before the
          // publishes' work (they start on the next turn). Both go out at once, the frame first (one
          // connection keeps their order; NATS then sends them in one write), and the row waits for
          // both; neither publish rejects.
          const frame = toRunResultView(committed);
          if (this.localFrames?.deliver(committed.project, committed.env, frame)) await nextTurn();
          await Promise.all([this.publishFrame(committed, frame), this.publishRunEvent(committed)]);
          if (held) await recordRunCreated(this.r, committed, recording);
          await this.r.audit.record({
            project: committed.project,
            env: committed.env,
            runId: committed.id,
            functionId: committed.functionId,
            eventType: committed.status === 'cancelled' ? 'run.cancelled' : 'run.status_changed',
            cause,
            data: { status: committed.status, attempt: committed.attempt, ...(committed.error ? { error: committed.error } : {}) },
          }, recording);
        } finally {
          resolve();
        }
      });
    });
  }

  private async publishFrame(run: RunRecord, frame: RunResultView): Promise<void> {
    try {
      await this.r.bus.publish(subjects.result(run.project, run.env, run.id), frame, { msgId: `result-${run.id}` });
    } catch (err) {
      this.r.metrics.resultPublishFailures.inc();
      this.r.logger.warn('RESULTS frame not published; sync callers read the stored run', { ...runFields(run), error: String(err) });
    }
  }

  /**
   * Publishes a run or step event, best effort (also used for events that do not end a run). A
   * failed publish is counted and kept in `dead_letters` (`boundedFollowUpWrite`: a slot and the
   * follow-up budget), or logged when that write cannot be made. Never rejects.
   */
  async publishRunEvent(run: RunRecord, event: string = run.status): Promise<void> {
    const subject = subjects.runEvent(run.env, run.id, event);
    try {
      await this.r.bus.publish(subject, { runId: run.id, functionId: run.functionId, status: run.status, attempt: run.attempt });
    } catch (err) {
      this.r.metrics.runEventPublishFailures.inc({ event });
      const notWritten = await boundedFollowUpWrite(this.r, 'deadLetter', (tx) => deadLettersSql.insertDeadLetter(tx, subject, String(err)));
      if (notWritten) this.r.logger.warn('run event lost and not recorded as a dead letter', { subject, error: notWritten });
    }
  }
}
