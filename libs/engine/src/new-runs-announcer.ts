import { RunRecord } from '@ironflow/store';
import { DispatchHints } from './dispatch-hints';
import { EngineResources } from './resources';
import { recordRunCreated } from './run-created-audit';

/**
 * The follow-ups of runs a scheduler pass created, after its commit: count them, hint a
 * dispatcher, and write each run's `run.created` row (tracked, off the pass's path).
 */
export function announceNewRuns(r: EngineResources, hints: DispatchHints, runs: RunRecord[]): void {
  for (const run of runs) {
    r.metrics.runsCreated.inc({ function_id: run.functionId });
    hints.queued(run.project, run.env, run.mode);
    r.followUps.track('run-created-audit', () => recordRunCreated(r, run).then(() => undefined));
  }
}
