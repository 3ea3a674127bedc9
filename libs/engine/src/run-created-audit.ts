import { RunRecord } from '@ironflow/store';
import { EngineResources } from './resources';

/**
 * Writes a run's `run.created` row through the recorder, stamped with the run's creation time
 * (capped at the store clock), so it sorts first even when it lands late. Resolves `false` when
 * the row was dropped (counted by the recorder). `background`: nothing waits for the row, so it
 * may wait for other rows to share its insert (`auditLingerMs`).
 */
export function recordRunCreated(r: EngineResources, run: RunRecord, options: { background?: boolean } = {}): Promise<boolean> {
  return r.audit.record({
    project: run.project,
    env: run.env,
    runId: run.id,
    functionId: run.functionId,
    eventType: 'run.created',
    cause: run.parentRunId ? 'invoke' : 'trigger',
    data: { functionVersion: run.functionVersion, ...(run.parentRunId ? { parentRunId: run.parentRunId, parentStepId: run.parentStepId } : {}), ...(run.eventId ? { eventId: run.eventId } : {}) },
    ts: run.createdAt,
  }, options);
}
