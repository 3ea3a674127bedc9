import { StepResult } from '@ironflow/contracts';
import { EngineResources } from './resources';

/** Whose step a row belongs to: the run's scope and function (its recording profile decides). */
export interface StepOwner {
  project: string;
  env: string;
  id: string;
  functionId: string;
}

/**
 * Writes one step's row (`step.completed` / `step.failed`) through the recorder, which writes it
 * only for a function whose recording profile is `all` (specification, "Two kinds of row on the
 * way to an outcome"). Resolves once the row landed or was dropped (counted by the recorder);
 * never rejects. A step row stays on its caller's path, so the rows of a report land in order.
 */
export function recordStepRow(r: EngineResources, owner: StepOwner, step: Pick<StepResult, 'id' | 'name' | 'status' | 'error'>, cause: string): Promise<boolean> {
  return r.audit.record({
    project: owner.project,
    env: owner.env,
    runId: owner.id,
    functionId: owner.functionId,
    eventType: `step.${step.status}`,
    cause,
    data: { step_id: step.id, name: step.name, ...(step.error ? { error: step.error } : {}) },
  });
}
