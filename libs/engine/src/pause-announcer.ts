import { RunRecord } from '@ironflow/store';
import { OutcomeAnnouncer } from './outcome-announcer';
import { EngineResources } from './resources';

/**
 * Why a run parked: an operator paused it at once, or its segment ended with a pause requested (a
 * report, a lost lease, a worker giving the execution back).
 */
export type ParkCause = 'operator' | 'report' | 'lease-recovery' | 'release';

/**
 * What follows a run entering `paused`: its `run.paused` audit row and the best-effort run event
 * `public.{env}.system.run.{id}.paused`. Resolves once the row landed or was dropped (the row of
 * a change that does not end a run stays on its caller's path).
 */
export async function announceParked(r: EngineResources, announcer: OutcomeAnnouncer, run: RunRecord, cause: ParkCause): Promise<void> {
  await announcer.publishRunEvent(run, 'paused');
  await r.audit.record({
    project: run.project,
    env: run.env,
    runId: run.id,
    functionId: run.functionId,
    eventType: 'run.paused',
    cause,
    data: { resume_status: run.resumeStatus, attempt: run.attempt, ...(run.pauseReason ? { reason: run.pauseReason } : {}) },
  });
}

/** A paused run whose wait is still open (`resume_status` = `waiting`) counts as waiting for the wake paths. */
export function holdsOpenWait(run: RunRecord): boolean {
  return run.status === 'waiting' || (run.status === 'paused' && run.resumeStatus === 'waiting');
}
