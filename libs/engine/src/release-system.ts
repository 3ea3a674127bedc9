import { EngineError, isTerminalRunStatus, RUN_ERROR_CODES } from '@ironflow/contracts';
import { ExecutionFence, fenceMatches } from '@ironflow/fencing';
import { commitOutcome } from '@ironflow/outcome';
import { RunRecord, leaseRecoverySql, leasesSql, runsSql } from '@ironflow/store';
import { DispatchHints } from './dispatch-hints';
import { OutcomeAnnouncer } from './outcome-announcer';
import { announceParked } from './pause-announcer';
import { EngineResources } from './resources';

/**
 * A worker gives work back (issue 7 item 8): a worker that stops releases the executions it has
 * not finished, over REST (`PUT /api/v1/workers/{workerId}/jobs/{jobId}/release`) or by closing
 * its stream. A released execution goes back to the queue at once with the same attempt —
 * `waiting_for_capacity`, available now, its lease deleted and its token cleared — so another
 * worker picks it up without waiting for the lease to expire; the steps it checkpointed are kept.
 * A release counts toward the recovery ceiling like a lease recovery (`recoveries + 1`, reset by
 * the next normal report): a job given back again and again — a worker that cannot run it and
 * stops, a stream that breaks on it — fails on the `recoveryCeiling + 1`-th consecutive release
 * with `EXECUTION_RECOVERY_EXHAUSTED` instead of looping, counted in
 * `ironflow_lease_recoveries_total{effect="exhausted"}` like a lease recovery's. A run with a pause
 * requested parks instead of queueing (`paused`, resumed to the queue; its `run.paused` row and
 * `paused` event follow), as its segment's report would have parked it. One unit of work, fenced:
 * only the live execution, and only by the worker holding its lease (or presenting its lease token).
 */
export class ReleaseSystem {
  constructor(
    private readonly r: EngineResources,
    private readonly hints: DispatchHints,
    private readonly announcer: OutcomeAnnouncer,
  ) {}

  /**
   * Releases execution `executionSeq` of `runId` held by `holder`. `fence`, when given (a REST body
   * echoing the assignment), must be the live one. Throws `RUN_NOT_FOUND`, `RUN_NOT_RUNNING` (the
   * run ended) or `STALE_EXECUTION` (another execution is live, the fence does not match, or
   * `holder` does not hold the lease). Returns the run as written: queued, `paused` (a pause was
   * requested), or `failed` with `EXECUTION_RECOVERY_EXHAUSTED` past the recovery ceiling
   * (announced like any failure).
   */
  async release(runId: string, executionSeq: number, holder: string, fence: ExecutionFence | undefined, reason: string): Promise<RunRecord> {
    const written = await this.r.store.unitOfWork('releaseExecution', async (tx) => {
      const run = await runsSql.getRun(tx, runId, { lock: true });
      if (!run) throw new EngineError('RUN_NOT_FOUND', `run ${runId} does not exist`);
      if (isTerminalRunStatus(run.status)) throw new EngineError('RUN_NOT_RUNNING', `run ${runId} is ${run.status}`);
      const live = run.status === 'running' && run.executionSeq === executionSeq && !!run.leaseToken;
      if (!live || (fence && !fenceMatches(run, fence))) throw new EngineError('STALE_EXECUTION', `execution ${executionSeq} of run ${runId} is not the live one`);
      if ((await leasesSql.leaseHolder(tx, runId, executionSeq)) !== holder) throw new EngineError('STALE_EXECUTION', `execution ${executionSeq} of run ${runId} is not held by ${holder}`);
      if (run.recoveries + 1 > this.r.config.recoveryCeiling) {
        const failed = await commitOutcome(tx, runId, {
          status: 'failed',
          error: { message: `execution given back or lost ${run.recoveries + 1} times in a row (last: ${reason})`, code: RUN_ERROR_CODES.EXECUTION_RECOVERY_EXHAUSTED, retryable: false },
        }, { kind: 'version', status: 'running', version: run.version });
        if (!failed) throw new EngineError('STALE_EXECUTION', `run ${runId} changed while it was released`);
        return { run: failed, exhausted: true };
      }
      const requeued = await leaseRecoverySql.requeueReleased(tx, runId, executionSeq, run.leaseToken!);
      if (!requeued) throw new EngineError('STALE_EXECUTION', `run ${runId} changed while it was released`);
      return { run: requeued, exhausted: false };
    });
    if (written.exhausted) {
      this.r.metrics.leaseRecoveries.inc({ effect: 'exhausted' });
      void this.announcer.announce(written.run, 'recovery-exhausted');
      return written.run;
    }
    const queued = written.run;
    if (queued.status === 'paused') this.r.followUps.track('paused-audit', () => announceParked(this.r, this.announcer, queued, 'release'));
    else this.hints.queued(queued.project, queued.env, queued.mode);
    this.r.followUps.track('execution-released-audit', async () => void (await this.r.audit.record({
      project: queued.project,
      env: queued.env,
      runId: queued.id,
      functionId: queued.functionId,
      eventType: 'run.execution_released',
      cause: reason,
      data: { execution_seq: executionSeq, holder, attempt: queued.attempt },
    })));
    return queued;
  }

  /**
   * Releases each of `jobs` (a closed stream's) that `holder` still holds; the others (already
   * reported, recovered) are skipped. Never throws; answers how many were released.
   */
  async releaseAll(holder: string, jobs: readonly { runId: string; executionSeq: number; leaseToken: string }[], reason: string): Promise<number> {
    let released = 0;
    for (const job of jobs) {
      try {
        await this.release(job.runId, job.executionSeq, holder, job.leaseToken ? { executionSeq: job.executionSeq, leaseToken: job.leaseToken } : undefined, reason);
        released += 1;
      } catch (err) {
        if (!(err instanceof EngineError)) this.r.logger.warn('release failed; lease expiry recovers the execution', { run_id: job.runId, execution_seq: job.executionSeq, error: String(err) });
      }
    }
    return released;
  }
}
