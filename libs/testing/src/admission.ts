import { RunRecord, runsSql } from '@ironflow/store';
import { TestEngine } from './test-engine';
import { waitFor } from './wait-for';

/**
 * Waits until a new run's admission has released it to the queue (or ended it): an invoked child,
 * or a run of a function with `cancelOn`, is created held and admitted off the creating call.
 * Returns the run as it then stands.
 */
export function waitForAdmission(t: Pick<TestEngine, 'db'>, runId: string, timeoutMs = 10_000): Promise<RunRecord> {
  return waitFor(`run ${runId} admitted`, async () => {
    const run = await t.db.store.read('test.admitted', (tx) => runsSql.getRun(tx, runId));
    return run && !run.held ? run : undefined;
  }, timeoutMs);
}
