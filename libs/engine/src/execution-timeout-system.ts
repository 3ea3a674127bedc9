import { RUN_ERROR_CODES, EngineError } from '@ironflow/contracts';
import { leasesSql, runsSql } from '@ironflow/store';
import { ReportSystem } from './report-system';
import { EngineResources } from './resources';

/**
 * The function timeout (`timeoutMs`, default 600000), enforced by the engine on every transport
 * (DESIGN.md "Leases and fencing"): each claim stores the execution's deadline with its lease
 * (claim time + `timeoutMs`, store clock); heartbeats and progress extend the lease, never the
 * deadline. The capacity scanner's pass fails an execution past its deadline as the worker's own
 * failure would: `FUNCTION_TIMED_OUT`, retryable, so the function's `retry` decides between the
 * next attempt and a failed run. It goes through `ReportSystem.apply` with the execution's fence,
 * so a report that won the race wins and the timeout changes nothing. The worker learns from its
 * next report (409 `STALE_EXECUTION`) or heartbeat (the job answered lost / stale). Push calls are
 * also bounded in the dispatcher by the same timeout, with the same code.
 */
export class ExecutionTimeoutSystem {
  constructor(
    private readonly r: EngineResources,
    private readonly reports: ReportSystem,
  ) {}

  /** One pass: fails up to a page of executions past their deadline. Returns how many it failed. */
  async scan(): Promise<number> {
    const overdue = await this.r.store.read('listOverdueExecutions', (tx) => leasesSql.listOverdueExecutions(tx, this.r.config.passPageSize));
    let failed = 0;
    for (const execution of overdue) {
      try {
        if (await this.timeOut(execution.runId, execution.executionSeq, execution.deadlineAt)) failed += 1;
      } catch (err) {
        this.r.logger.warn('execution timeout not applied; the next scan tries again', { run_id: execution.runId, execution_seq: execution.executionSeq, error: String(err) });
      }
    }
    return failed;
  }

  private async timeOut(runId: string, executionSeq: number, deadlineAt: number): Promise<boolean> {
    const run = await this.r.store.read('getRun', (tx) => runsSql.getRun(tx, runId));
    if (!run || run.status !== 'running' || run.executionSeq !== executionSeq || !run.leaseToken) return false;
    const error = {
      message: `execution ${executionSeq} of run ${runId} ran past its function's timeout (deadline ${new Date(deadlineAt).toISOString()})`,
      code: RUN_ERROR_CODES.FUNCTION_TIMED_OUT,
      retryable: true,
    };
    try {
      await this.reports.apply(runId, { executionSeq, leaseToken: run.leaseToken }, { kind: 'failed', error, byEngine: true });
      return true;
    } catch (err) {
      // The execution reported or was recovered meanwhile: nothing to time out.
      if (err instanceof EngineError && (err.code === 'STALE_EXECUTION' || err.code === 'RUN_NOT_RUNNING')) return false;
      throw err;
    }
  }
}
