import { Body, Controller, Get, HttpCode, Inject, Param, Post, Put, Query, Req, Res } from '@nestjs/common';
import type { Request, Response } from 'express';
import { EngineError, JobAckBody, JobUpdateBody, WorkerHeartbeatBody, WorkerRegisterBody } from '@ironflow/contracts';
import { workersSql } from '@ironflow/store';
import { EngineRuntime } from '../runtime/engine-runtime';
import { ENGINE_RUNTIME } from '../runtime/tokens';
import { parseJsonBody } from '../http/json-body';
import { refuseUnknownKeys } from '../http/refuse-unknown-keys';
import { scopeOf } from '../http/scope';

/**
 * Pull workers over REST (WIRE-PROTOCOL.md 3.2, R2–R6, and ours: `…/jobs/:jobId/release`). Poll answers `200 {jobs:[…]}` or `204`;
 * an unknown worker gets `404 WORKER_NOT_FOUND` (it re-registers); a report that does not hold
 * the live execution's fence gets `409 STALE_EXECUTION`, one for a run no longer running
 * `409 RUN_NOT_RUNNING`. Every route needs the API key when keys are required (`ApiKeyGuard`);
 * a worker is found only in its key's project and env, and a report is authorized by its fence.
 * A query parameter other than the poll's `available` is `VALIDATION_ERROR` naming it.
 */
@Controller('api/v1/workers')
export class WorkersController {
  constructor(@Inject(ENGINE_RUNTIME) private readonly runtime: EngineRuntime) {}

  @Get()
  async list(@Req() req: Request, @Query() q: Record<string, unknown>) {
    refuseUnknownKeys('unknown query parameter(s)', q, []);
    const { project, env } = scopeOf(req);
    const workers = await this.runtime.store.read('listWorkers', (tx) => workersSql.listWorkers(tx, project, env));
    return { workers: workers.map((w) => ({ id: w.id, functionIds: w.functionIds, maxConcurrentJobs: w.maxConcurrentJobs, hostname: w.hostname, labels: w.labels, lastSeenAt: new Date(w.lastSeenAt).toISOString() })) };
  }

  @Post(':workerId/register')
  @HttpCode(200)
  async register(@Req() req: Request, @Param('workerId') workerId: string, @Body() body: Buffer, @Query() q: Record<string, unknown>) {
    refuseUnknownKeys('unknown query parameter(s)', q, []);
    await this.runtime.engine.pull.register(scopeOf(req), workerId, parseJsonBody<WorkerRegisterBody>(body));
    // A third of the lease, at most the SDK's 30 s: a short lease needs more frequent heartbeats.
    return { worker_id: workerId, heartbeat_interval_ms: Math.min(30_000, Math.floor(this.runtime.settings.leaseMs / 3)) };
  }

  /** R3 → `{ok: true, jobs: [{job_id, state: "refreshed" | "lost"}]}`, one entry per listed job (ours; the SDK ignores the body). */
  @Post(':workerId/heartbeat')
  @HttpCode(200)
  async heartbeat(@Req() req: Request, @Param('workerId') workerId: string, @Body() body: Buffer, @Query() q: Record<string, unknown>) {
    refuseUnknownKeys('unknown query parameter(s)', q, []);
    const { jobs } = await this.runtime.engine.pull.heartbeat(workerId, parseJsonBody<WorkerHeartbeatBody>(body), scopeOf(req));
    return { ok: true, jobs };
  }

  @Get(':workerId/jobs')
  async poll(@Req() req: Request, @Param('workerId') workerId: string, @Query() q: Record<string, unknown>, @Res() res: Response) {
    refuseUnknownKeys('unknown query parameter(s)', q, ['available']);
    const jobs = await this.runtime.engine.pull.poll(workerId, availableParam(q.available), scopeOf(req));
    if (jobs.length === 0) res.status(204).end();
    else res.status(200).json({ jobs });
  }

  @Put(':workerId/jobs/:jobId/ack')
  async ack(@Param('workerId') workerId: string, @Param('jobId') jobId: string, @Body() body: Buffer, @Query() q: Record<string, unknown>) {
    refuseUnknownKeys('unknown query parameter(s)', q, []);
    await this.runtime.engine.pull.ack(workerId, jobId, parseJsonBody<JobAckBody>(body));
    return { ok: true };
  }

  /** Ours: the worker gives a job back (it is stopping); body: the fence, as on R6. → `{ok: true}`; 409 when not its live job. */
  @Put(':workerId/jobs/:jobId/release')
  async release(@Param('workerId') workerId: string, @Param('jobId') jobId: string, @Body() body: Buffer, @Query() q: Record<string, unknown>) {
    refuseUnknownKeys('unknown query parameter(s)', q, []);
    await this.runtime.engine.pull.release(workerId, jobId, parseJsonBody<JobAckBody>(body));
    return { ok: true };
  }

  @Put(':workerId/jobs/:jobId')
  async update(@Param('workerId') workerId: string, @Param('jobId') jobId: string, @Body() body: Buffer, @Query() q: Record<string, unknown>) {
    refuseUnknownKeys('unknown query parameter(s)', q, []);
    const result = await this.runtime.engine.pull.update(workerId, jobId, parseJsonBody<JobUpdateBody>(body));
    return { ok: true, effect: result.effect, status: result.run.status };
  }
}

/**
 * R4's `available` (WIRE-PROTOCOL.md 3.3, ≥ 1): absent → 1; anything but one whole number ≥ 1
 * (`abc`, `0`, `1.5`, given twice) → `VALIDATION_ERROR`, before any job is claimed (it used to
 * claim one job whatever it said).
 */
function availableParam(available: unknown): number {
  if (available === undefined) return 1;
  if (typeof available !== 'string' || !/^\d+$/.test(available) || Number(available) < 1) {
    throw new EngineError('VALIDATION_ERROR', `available: a whole number of at least 1, not ${JSON.stringify(available)}`);
  }
  return Number(available);
}
