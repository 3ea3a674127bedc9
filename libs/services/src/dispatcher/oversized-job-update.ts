import type { Request } from 'express';
import { EngineRuntime } from '../runtime/engine-runtime';

/** R6, `PUT /api/v1/workers/{workerId}/jobs/{jobId}` (not `/ack`). */
const JOB_UPDATE = /^\/api\/v1\/workers\/([^/]+)\/jobs\/([^/]+)$/;

/**
 * For the raw-body middleware's `onTooLarge`: an R6 job update refused unread as over the request
 * limit fails its job's attempt at once (`PullWorkerSystem.failTooLarge`, PAYLOAD_TOO_LARGE), so
 * the run does not sit `running` until lease recovery. Other requests: nothing.
 */
export async function failOversizedJobUpdate(runtime: EngineRuntime, req: Request, limitBytes: number): Promise<void> {
  const match = req.method === 'PUT' ? JOB_UPDATE.exec(req.path) : null;
  if (!match) return;
  let workerId: string;
  let jobId: string;
  try {
    workerId = decodeURIComponent(match[1]);
    jobId = decodeURIComponent(match[2]);
  } catch {
    return; // not a path the route would take either
  }
  await runtime.engine.pull.failTooLarge(workerId, jobId, limitBytes);
}
