import { RunRecord } from '@ironflow/store';
import { DispatchHints } from './dispatch-hints';
import { InvokeAdmission } from './invoke-admission';
import { EngineResources } from './resources';
import { recordRunCreated } from './run-created-audit';

/**
 * The follow-up of a run created by a trigger, a direct invoke or a scheduler pass, after its
 * commit: a held run (its function declares `cancelOn`) goes to its admission, which writes its
 * `run.created` row, replays `cancel_on` and then dispatches it; any other run is hinted to a
 * dispatcher now (unless `hinted`: the caller hints once per mode) and its `run.created` row is
 * written, tracked, off the caller's path (a background row: it may share a later insert).
 */
export function afterNewRun(r: EngineResources, hints: DispatchHints, admissions: InvokeAdmission, run: RunRecord, hinted = false): void {
  if (run.held) {
    admissions.afterCreate(run);
    return;
  }
  if (!hinted) hints.queued(run.project, run.env, run.mode);
  r.followUps.track('run-created-audit', () => recordRunCreated(r, run, { background: true }).then(() => undefined));
}

/** The follow-ups of runs a scheduler pass created, after its commit: count each, then `afterNewRun`. */
export function announceNewRuns(r: EngineResources, hints: DispatchHints, admissions: InvokeAdmission, runs: RunRecord[]): void {
  for (const run of runs) {
    r.metrics.runsCreated.inc({ function_id: run.functionId });
    afterNewRun(r, hints, admissions, run);
  }
}
