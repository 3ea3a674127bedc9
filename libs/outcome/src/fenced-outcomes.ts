import { StepResult } from '@ironflow/contracts';
import { ExecutionFence } from '@ironflow/fencing';
import { RunRecord, Tx, mapRun, stepsSql, toJson } from '@ironflow/store';
import { Outcome, commitOutcome, terminalAssignments } from './outcome';

/**
 * One live execution's report that ends its run: the outcome, the fence that must still hold, and
 * the report's steps, saved from `stepOffset` (the run's next step sequence) in the same commit.
 */
export interface FencedOutcome {
  runId: string;
  fence: ExecutionFence;
  outcome: Outcome;
  steps: StepResult[];
  stepOffset: number;
}

/**
 * Commits several runs' outcomes together (DESIGN.md "The outcome transaction", each run's write
 * exactly as `commitOutcome` with an execution guard): a run whose row is `running` at its
 * report's execution and lease token ends with its outcome, its lease row is deleted and its
 * steps are upserted (a `completed` step is never changed); any other run is left untouched, and
 * so are its lease and steps. Returns the committed rows by run id: a run missing from it was
 * not written here (its fence no longer holds, it already ended, or its row was locked), and its
 * report is for the caller to apply alone, which decides what it answers.
 *
 * PostgreSQL: one statement (a data-modifying CTE on arrays, the same text for any number of
 * runs), atomic on its own, so the unit of work may run it without BEGIN/COMMIT
 * (`UnitOptions.oneStatement`). A run row another transaction has locked is skipped
 * (`SKIP LOCKED`), so the statement never waits behind a cancel or a recovery of one run. SQLite:
 * one guarded update per run in the caller's unit of work (units there run one at a time).
 * A statement error (a value the store cannot hold, a lost connection) rolls back every run.
 */
export async function commitFencedOutcomes(tx: Tx, reports: FencedOutcome[]): Promise<Map<string, RunRecord>> {
  const committed = new Map<string, RunRecord>();
  if (reports.length === 0) return committed;
  if (tx.dialect !== 'postgres') {
    for (const report of reports) {
      const row = await commitOutcome(tx, report.runId, report.outcome, { kind: 'execution', fence: report.fence });
      if (!row) continue;
      if (report.steps.length) await stepsSql.saveReportedSteps(tx, report.runId, report.steps, report.stepOffset);
      committed.set(row.id, row);
    }
    return committed;
  }
  const steps = reports.flatMap((report) => report.steps.map((step, i) => ({ runId: report.runId, ...stepsSql.reportedStepRow(step, report.stepOffset + i, tx.now) })));
  const rows = await tx.query(
    `WITH input AS (
       SELECT * FROM unnest($1::text[], $2::int[], $3::text[], $4::text[], $5::text[], $6::text[])
         AS i(run_id, execution_seq, lease_token, new_status, new_output, new_error)
     ), live AS (
       SELECT r.id FROM runs r JOIN input i ON r.id = i.run_id
        WHERE r.status = 'running' AND r.execution_seq = i.execution_seq AND r.lease_token = i.lease_token
        FOR UPDATE OF r SKIP LOCKED
     ), ended AS (
       UPDATE runs SET ${terminalAssignments('i.new_status', 'i.new_output', 'i.new_error', '$7')}
         FROM input i
        WHERE runs.id = i.run_id AND runs.id IN (SELECT id FROM live)
          AND runs.status = 'running' AND runs.execution_seq = i.execution_seq AND runs.lease_token = i.lease_token
        RETURNING runs.*
     ), released AS (
       DELETE FROM leases WHERE run_id IN (SELECT id FROM ended)
     ), saved AS (
       INSERT INTO steps (run_id, step_id, name, type, status, output, error, sequence, created_at, ended_at, started_at)
       SELECT s.run_id, s.step_id, s.name, 'run', s.status, s.output, s.error, s.sequence, $7, s.ended_at, s.started_at
         FROM unnest($8::text[], $9::text[], $10::text[], $11::text[], $12::text[], $13::text[], $14::int[], $15::bigint[], $16::bigint[])
           AS s(run_id, step_id, name, status, output, error, sequence, ended_at, started_at)
        WHERE s.run_id IN (SELECT id FROM ended)
       ON CONFLICT (run_id, step_id) DO UPDATE SET ${stepsSql.REPORTED_STEP_UPSERT}
     )
     SELECT * FROM ended`,
    [
      reports.map((r) => r.runId),
      reports.map((r) => r.fence.executionSeq),
      reports.map((r) => r.fence.leaseToken),
      reports.map((r) => r.outcome.status),
      reports.map((r) => (r.outcome.status === 'completed' ? toJson(r.outcome.output ?? null) : null)),
      reports.map((r) => (r.outcome.status === 'completed' ? null : toJson(r.outcome.error))),
      tx.now,
      steps.map((s) => s.runId),
      steps.map((s) => s.stepId),
      steps.map((s) => s.name),
      steps.map((s) => s.status),
      steps.map((s) => s.output),
      steps.map((s) => s.error),
      steps.map((s) => s.sequence),
      steps.map((s) => s.endedAt),
      steps.map((s) => s.startedAt),
    ],
  );
  for (const row of rows) {
    const run = mapRun(row);
    committed.set(run.id, run);
  }
  return committed;
}
