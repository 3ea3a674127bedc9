import { z } from 'zod';
import { CallScope, EngineError, RUN_ERROR_CODES, parseEnvironment, JobAckBody, JobAssignment, JobUpdateBody, WorkerHeartbeatBody, WorkerRegisterBody, YieldInfo, isTerminalRunStatus } from '@ironflow/contracts';
import { ExecutionFence, MISMATCHED_EXECUTION_SEQ, fenceMatches, parseJobId } from '@ironflow/fencing';
import { functionsSql, leasesSql, runsSql, workersSql } from '@ironflow/store';
import { DispatchSystem } from './dispatch-system';
import { ReportResult, ReportSystem, SegmentReport } from './report-system';
import { ReleaseSystem } from './release-system';
import { EngineResources } from './resources';
import { toJobAssignment } from './segment-loader';
import { refuseNulAnywhere } from './payload-limits';
import { parseSentAt } from './sleep-clock';

/** Ids must be usable as subject tokens (WIRE-PROTOCOL.md 3.1). */
const TOKEN = /^[A-Za-z0-9_-]{1,128}$/;

// R2 (WIRE-PROTOCOL.md 3.3) is strict: a key it does not name is refused, never dropped.
const registerSchema = z.object({
  worker_id: z.string().optional(),
  function_ids: z.array(z.string().min(1)).default([]),
  max_concurrent_jobs: z.number().int().min(1).max(10_000).default(10),
  hostname: z.string().max(256).optional(),
  labels: z.record(z.string()).default({}),
  version: z.object({ sdk: z.string().optional(), runtime: z.string().optional() }).optional(),
}).strict();

// R3 (3.3) is strict too: `worker_id`, `active_jobs` and `jobs[{job_id, started_at}]`, nothing else.
const heartbeatSchema = z.object({
  worker_id: z.string().optional(),
  active_jobs: z.number().optional(),
  jobs: z.array(z.object({ job_id: z.string(), started_at: z.string().optional() }).strict()).default([]),
}).strict();

/** The keys of R5's body and of our release's (3.3): the job's fence, nothing else. */
const FENCE_KEYS = ['run_id', 'execution_seq', 'lease_token'];

/**
 * What makes a body a report at all: its status, offset and fence. The rest (steps, error,
 * yield) is checked by `ReportSystem` for every transport, so a terminal report it cannot apply
 * fails its attempt instead of being refused here and leaving the run running.
 */
const updateSchema = z.object({
  status: z.enum(['progress', 'completed', 'failed', 'yielded']),
  steps: z.array(z.unknown()).optional(),
  step_offset: z.number().optional(),
  execution_seq: z.number().int().optional(),
  lease_token: z.string().optional(),
});

/**
 * The keys of R6's body (3.3): the ones the schema above reads, what `ReportSystem` reads
 * (`output`, `error`, `yield`), `run_id` (checked against the job, see `fenceOf`) and ours,
 * `sent_at`. Any other key is refused by name, never dropped.
 */
const UPDATE_KEYS = ['status', 'steps', 'step_offset', 'output', 'error', 'yield', 'execution_seq', 'lease_token', 'run_id', 'sent_at'];

/**
 * Pull workers over REST (WIRE-PROTOCOL.md section 3): register (R2), heartbeat (R3), poll (R4),
 * ack (R5) and job updates (R6). Errors: `VALIDATION_ERROR` (400), `WORKER_NOT_FOUND` (404, the
 * worker re-registers), `STALE_EXECUTION` / `RUN_NOT_RUNNING` (409).
 */
export class PullWorkerSystem {
  constructor(
    private readonly r: EngineResources,
    private readonly dispatch: DispatchSystem,
    private readonly reports: ReportSystem,
    private readonly releases: ReleaseSystem,
  ) {}

  /**
   * R2: stores the worker and the functions it serves, in `scope`'s project and env (an open
   * call's `labels.env` when its scope is the default env). Throws `VALIDATION_ERROR` for a key R2
   * does not name, a `worker_id` other than the path's, or a function id not registered there
   * (named; nothing is stored), `PERMISSION_DENIED` for a worker id of another project or a
   * `labels.env` other than the key's.
   */
  async register(scope: CallScope, workerId: string, body: WorkerRegisterBody): Promise<void> {
    checkWorkerId(workerId);
    refuseNulAnywhere('body', body);
    const parsed = registerSchema.safeParse(body ?? {});
    if (!parsed.success) throw new EngineError('VALIDATION_ERROR', parsed.error.issues.map((i) => `${i.path.join('.') || 'body'}: ${i.message}`).join('; '));
    refuseOtherWorkerId(parsed.data.worker_id, workerId);
    const envLabel = parsed.data.labels.env ? parseEnvironment(parsed.data.labels.env) : undefined;
    // A keyed call's env is its key's: a label naming another env is refused, never followed.
    if (scope.apiKeyId && envLabel && envLabel !== scope.env) {
      throw new EngineError('PERMISSION_DENIED', `labels.env ${JSON.stringify(envLabel)}: this API key is for env ${JSON.stringify(scope.env)}`);
    }
    const env = scope.env !== 'default' || !envLabel ? scope.env : envLabel;
    await this.r.store.unitOfWork('registerWorker', async (tx) => {
      const taken = await workersSql.upsertWorker(tx, {
        id: workerId,
        project: scope.project,
        env,
        functionIds: parsed.data.function_ids,
        maxConcurrentJobs: parsed.data.max_concurrent_jobs,
        hostname: parsed.data.hostname ?? null,
        labels: parsed.data.labels,
      });
      if (!taken) throw new EngineError('PERMISSION_DENIED', `worker id ${workerId} is registered in another project`);
      // A worker serves only registered functions (R1 precedes R2): an id it names that is not
      // registered would be stored and never acted on, so it is refused by name (the unit rolls back).
      const unregistered: string[] = [];
      for (const id of new Set(parsed.data.function_ids)) {
        if (!(await functionsSql.getFunction(tx, scope.project, env, id))) unregistered.push(id);
      }
      if (unregistered.length > 0) {
        throw new EngineError('VALIDATION_ERROR', `function_ids: not registered in project ${JSON.stringify(scope.project)} env ${JSON.stringify(env)}: ${unregistered.join(', ')} (register each function first)`);
      }
    });
  }

  /**
   * R3: refreshes the leases of the jobs the worker lists (REST heartbeats carry no fence: by job
   * id) and answers each job's state, in the order listed: `refreshed` when this worker holds the
   * job's live lease (extended `leaseMs` from now), else `lost` — its lease expired (an expired
   * lease is never revived), was recovered, released or handed to another worker, its execution
   * ended or timed out, or the id is not a job id. A worker should stop a lost job: any report of
   * it is stale. Throws `VALIDATION_ERROR` for a body that is not a heartbeat (a `worker_id` other
   * than the path's included), `WORKER_NOT_FOUND` for a worker not registered (in `scope`'s
   * project, and its key's env, when given).
   */
  async heartbeat(workerId: string, body: WorkerHeartbeatBody, scope?: CallScope): Promise<{ jobs: { job_id: string; state: 'refreshed' | 'lost' }[] }> {
    checkWorkerId(workerId);
    const parsed = heartbeatSchema.safeParse(body ?? {});
    if (!parsed.success) throw new EngineError('VALIDATION_ERROR', parsed.error.issues.map((i) => `${i.path.join('.') || 'body'}: ${i.message}`).join('; '));
    refuseOtherWorkerId(parsed.data.worker_id, workerId);
    return this.r.store.unitOfWork('workerHeartbeat', async (tx) => {
      if (!(await workersSql.touchWorker(tx, workerId, scope && ownerOf(scope)))) throw new EngineError('WORKER_NOT_FOUND', `worker ${workerId} is not registered`);
      const jobs: { job_id: string; state: 'refreshed' | 'lost' }[] = [];
      for (const job of parsed.data.jobs) {
        let held = false;
        try {
          const { runId, executionSeq } = parseJobId(job.job_id);
          held = await leasesSql.refreshLeaseHeldBy(tx, runId, executionSeq, workerId, tx.now + this.r.config.leaseMs);
        } catch {
          // a job id the engine never issued refreshes nothing
        }
        jobs.push({ job_id: job.job_id, state: held ? 'refreshed' : 'lost' });
      }
      return { jobs };
    });
  }

  /**
   * Claims up to `available` jobs of the worker's functions (capped by `maxJobsPerPoll`). Throws
   * `WORKER_NOT_FOUND` for a worker not registered (in `scope`'s project, and its key's env, when
   * given: a key never polls another project's jobs).
   */
  async poll(workerId: string, available: number, scope?: CallScope): Promise<JobAssignment[]> {
    checkWorkerId(workerId);
    const worker = await this.r.store.read('getWorker', (tx) => workersSql.getWorker(tx, workerId));
    if (!worker || (scope && !sameOwner(worker, scope))) throw new EngineError('WORKER_NOT_FOUND', `worker ${workerId} is not registered`);
    const limit = Math.max(0, Math.min(Number.isFinite(available) && available > 0 ? Math.floor(available) : 1, this.r.config.maxJobsPerPoll, worker.maxConcurrentJobs));
    const segments = await this.dispatch.claim(
      { mode: 'pull', limit, project: worker.project, env: worker.env, functionIds: worker.functionIds },
      workerId,
    );
    return segments.map(toJobAssignment);
  }

  /** R5: the worker acks before user code; a fence that no longer matches gets 409. */
  async ack(workerId: string, jobId: string, body: JobAckBody): Promise<void> {
    checkWorkerId(workerId);
    const { runId, executionSeq } = parseJobId(jobId);
    refuseUnknownKeys(body, FENCE_KEYS);
    const fence = fenceOf(body, { runId, executionSeq });
    await this.r.store.unitOfWork('ackJob', async (tx) => {
      const run = await runsSql.getRun(tx, runId);
      if (!run) throw new EngineError('RUN_NOT_FOUND', `run ${runId} does not exist`);
      if (isTerminalRunStatus(run.status)) throw new EngineError('RUN_NOT_RUNNING', `run ${runId} is ${run.status}`);
      if (run.status !== 'running' || !fenceMatches(run, fence)) throw new EngineError('STALE_EXECUTION', `job ${jobId} is not the live execution of run ${runId}`);
      // Only the worker the job was handed to may ack it.
      if (!(await leasesSql.refreshLeaseHeldBy(tx, runId, executionSeq, workerId, tx.now + this.r.config.leaseMs))) {
        throw new EngineError('STALE_EXECUTION', `job ${jobId} was not handed to worker ${workerId}`);
      }
    });
  }

  /**
   * R6 refused unread: the HTTP layer answered 413 because the body is over the request limit, so
   * its fence could not be read. When the job's execution is live and its lease is held by
   * `workerId` (the lease holder stands in for the fence), the attempt fails at once with
   * `PAYLOAD_TOO_LARGE`, not retryable — whether the update was progress or terminal: its steps
   * or output can never be stored, and the Ironflow SDK never retries the terminal report.
   * Anything else (not a job id, another worker's job, an execution no longer live) changes
   * nothing. Answers whether the run was failed.
   */
  async failTooLarge(workerId: string, jobId: string, limitBytes: number): Promise<boolean> {
    let id: { runId: string; executionSeq: number };
    try {
      checkWorkerId(workerId);
      id = parseJobId(jobId);
    } catch {
      return false;
    }
    const fence = await this.r.store.read('tooLargeFence', async (tx) => {
      const run = await runsSql.getRun(tx, id.runId);
      if (!run || run.status !== 'running' || run.executionSeq !== id.executionSeq || !run.leaseToken) return undefined;
      return (await leasesSql.leaseHolder(tx, id.runId, id.executionSeq)) === workerId ? { executionSeq: run.executionSeq, leaseToken: run.leaseToken } : undefined;
    });
    if (!fence) return false;
    const error = { message: `an update of job ${jobId} over the engine's ${limitBytes}-byte request limit was refused unread (413)`, code: RUN_ERROR_CODES.PAYLOAD_TOO_LARGE, retryable: false };
    try {
      await this.reports.apply(id.runId, fence, { kind: 'failed', error, byEngine: true });
      return true;
    } catch (err) {
      this.r.logger.warn('oversized update: the attempt could not be failed', { worker_id: workerId, job_id: jobId, error: String(err) });
      return false;
    }
  }

  /**
   * Ours: `PUT /api/v1/workers/{workerId}/jobs/{jobId}/release` — the worker gives back a job it
   * will not finish (it is stopping): the execution goes back to the queue at once, same attempt,
   * its checkpointed steps kept (see `ReleaseSystem`). Body: the fence echoed, as on R6 (optional:
   * without it, holding the lease suffices). Throws `STALE_EXECUTION` / `RUN_NOT_RUNNING` (409)
   * when the job is not this worker's live execution.
   */
  async release(workerId: string, jobId: string, body: JobAckBody): Promise<void> {
    checkWorkerId(workerId);
    const { runId, executionSeq } = parseJobId(jobId);
    refuseUnknownKeys(body, FENCE_KEYS);
    await this.releases.release(runId, executionSeq, workerId, fenceOf(body, { runId, executionSeq }), `worker ${workerId} released job ${jobId}`);
  }

  /** R6: a progress checkpoint or the execution's terminal report. */
  async update(workerId: string, jobId: string, body: JobUpdateBody): Promise<ReportResult> {
    checkWorkerId(workerId);
    const { runId, executionSeq } = parseJobId(jobId);
    const parsed = updateSchema.safeParse(body);
    if (!parsed.success) throw new EngineError('VALIDATION_ERROR', parsed.error.issues.map((i) => `${i.path.join('.') || 'body'}: ${i.message}`).join('; '));
    const fence = fenceOf(body, { runId, executionSeq });
    try {
      refuseUnknownKeys(body, UPDATE_KEYS);
    } catch (err) {
      // A fenced terminal report refused fails its attempt, as one `ReportSystem` refuses does.
      if (fence && body.status !== 'progress') await this.reports.failUnapplied(runId, fence, toReport(body), err as EngineError, workerId);
      throw err;
    }
    return this.reports.apply(runId, fence, toReport(body), workerId);
  }
}

/** Refuses, with `VALIDATION_ERROR` naming each, the keys of a JSON object body not in `known`. */
function refuseUnknownKeys(body: unknown, known: readonly string[]): void {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return;
  const unknown = Object.keys(body).filter((k) => !known.includes(k));
  if (unknown.length > 0) throw new EngineError('VALIDATION_ERROR', `unknown field(s): ${unknown.join(', ')} (this route takes ${known.join(', ')})`);
}

/**
 * A body's `worker_id` (R2, R3) must be the worker of the path, which is the one acted on: another
 * is `VALIDATION_ERROR` naming both, never ignored.
 */
function refuseOtherWorkerId(bodyWorkerId: string | undefined, workerId: string): void {
  if (bodyWorkerId !== undefined && bodyWorkerId !== workerId) {
    throw new EngineError('VALIDATION_ERROR', `worker_id ${JSON.stringify(bodyWorkerId)} is not the worker of the path, ${JSON.stringify(workerId)}`);
  }
}

/** A worker id names a subject token (WIRE-PROTOCOL.md 3.1); anything else (U+0000 included) is `VALIDATION_ERROR` on every route. */
function checkWorkerId(workerId: string): void {
  if (typeof workerId !== 'string' || !TOKEN.test(workerId)) throw new EngineError('VALIDATION_ERROR', `worker id ${JSON.stringify(workerId)}: letters, digits, "_" and "-" only (1 to 128)`);
}

/**
 * Who may act on a worker: its project always; its env too for a keyed call (the key's env is the
 * worker's). An open call's env header may differ from a worker that registered with `labels.env`.
 */
function ownerOf(scope: CallScope): { project: string; env?: string } {
  return scope.apiKeyId ? { project: scope.project, env: scope.env } : { project: scope.project };
}

function sameOwner(worker: { project: string; env: string }, scope: CallScope): boolean {
  const owner = ownerOf(scope);
  return worker.project === owner.project && (owner.env === undefined || worker.env === owner.env);
}

/**
 * The fence a request carries; its `execution_seq` must be the job id's. A `run_id` that is not
 * the job's run is `STALE_EXECUTION` (409, nothing changes): the request is not about this job.
 */
function fenceOf(body: { run_id?: unknown; execution_seq?: number; lease_token?: string } | undefined, job: { runId: string; executionSeq: number }): ExecutionFence | undefined {
  if (body?.run_id !== undefined && body.run_id !== job.runId) {
    throw new EngineError('STALE_EXECUTION', `run_id ${JSON.stringify(body.run_id)} is not the run of job ${job.runId}-${job.executionSeq}`, { runId: job.runId, executionSeq: job.executionSeq });
  }
  const jobSeq = job.executionSeq;
  if (!body?.lease_token) return undefined;
  if (body.execution_seq !== undefined && body.execution_seq !== jobSeq) return { executionSeq: MISMATCHED_EXECUTION_SEQ, leaseToken: body.lease_token };
  return { executionSeq: jobSeq, leaseToken: body.lease_token };
}

function toReport(body: JobUpdateBody): SegmentReport {
  const sentAt = parseSentAt(body.sent_at);
  const base = { steps: body.steps ?? [], ...(body.step_offset !== undefined ? { stepOffset: body.step_offset } : {}), ...(sentAt !== undefined ? { sentAt } : {}) };
  switch (body.status) {
    case 'progress':
      return { ...base, kind: 'progress' };
    case 'completed':
      return { ...base, kind: 'completed', output: body.output };
    case 'failed':
      return { ...base, kind: 'failed', error: body.error ?? { message: 'failed without an error', retryable: false } };
    case 'yielded':
      // A missing `yield` is refused by ReportSystem, which then fails the attempt.
      return { ...base, kind: 'yielded', yield: body.yield as YieldInfo };
  }
}
