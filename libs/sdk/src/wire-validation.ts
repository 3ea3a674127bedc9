import type { JobAssignment, PullCompletedStep, PushCompletedStep, PushRequest, WireEvent } from '@ironflow/contracts';

/**
 * Strict checks of the bodies the engine sends to the SDK: the push request (WIRE-PROTOCOL.md
 * 2.2) and a pull job assignment (3.4). Unknown keys are ignored; optional fields must be absent,
 * not `null` (exceptions: push `steps` and pull `event.metadata` may be null); keys the Ironflow
 * SDK declares `z.unknown()` without `.optional()` (`event.data`, `completed_steps[].output`) must
 * be present, `null` allowed. Each check returns the typed value or the list of problems, one
 * `path: reason` per entry.
 */
export type Checked<T> = { ok: true; value: T } | { ok: false; problems: string[] };

type Obj = Record<string, unknown>;

const isObject = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

class Checker {
  readonly problems: string[] = [];

  fail(path: string, reason: string): void {
    this.problems.push(`${path}: ${reason}`);
  }

  object(v: unknown, path: string): Obj | undefined {
    if (isObject(v)) return v;
    this.fail(path, 'expected object');
    return undefined;
  }

  string(o: Obj, key: string, path: string, required: boolean): void {
    if (!(key in o) || o[key] === undefined) {
      if (required) this.fail(`${path}${key}`, 'required');
      return;
    }
    if (typeof o[key] !== 'string') this.fail(`${path}${key}`, 'expected string');
  }

  number(o: Obj, key: string, path: string, required: boolean): void {
    if (!(key in o) || o[key] === undefined) {
      if (required) this.fail(`${path}${key}`, 'required');
      return;
    }
    if (typeof o[key] !== 'number' || !Number.isFinite(o[key])) this.fail(`${path}${key}`, 'expected number');
  }

  stringMap(o: Obj, key: string, path: string): void {
    if (!(key in o) || o[key] === undefined) return;
    const m = o[key];
    if (!isObject(m)) return this.fail(`${path}${key}`, 'expected object of strings');
    for (const [k, v] of Object.entries(m)) if (typeof v !== 'string') this.fail(`${path}${key}.${k}`, 'expected string');
  }

  /** A key the SDK's schema declares `z.unknown()` without `.optional()`: any value, `null` included, but present. */
  present(o: Obj, key: string, path: string): void {
    if (!(key in o) || o[key] === undefined) this.fail(`${path}${key}`, 'required (null when there is no value)');
  }

  event(v: unknown, path: string, metadataMayBeNull: boolean): void {
    const e = this.object(v, path);
    if (!e) return;
    const p = `${path}.`;
    this.string(e, 'id', p, true);
    this.string(e, 'name', p, true);
    this.present(e, 'data', p);
    this.string(e, 'timestamp', p, true);
    if ('version' in e && e.version !== undefined) {
      if (typeof e.version !== 'number' || !Number.isInteger(e.version) || e.version < 1) this.fail(`${p}version`, 'expected integer >= 1');
    }
    this.string(e, 'idempotency_key', p, false);
    this.string(e, 'source', p, false);
    if ('metadata' in e && e.metadata !== undefined && !(metadataMayBeNull && e.metadata === null) && !isObject(e.metadata)) {
      this.fail(`${p}metadata`, 'expected object');
    }
  }
}

const STEP_STATUSES = ['completed', 'failed', 'timed_out'];
const RESUME_TYPES = ['sleep', 'wait_for_event', 'invoke_function', 'invoke_function_async'];

/** Validates a push request body (2.2). `steps: null` or absent becomes `[]`; event `version` defaults to 1. */
export function checkPushRequest(body: unknown): Checked<PushRequest> {
  const c = new Checker();
  const o = c.object(body, '(body)');
  if (!o) return { ok: false, problems: c.problems };
  c.string(o, 'run_id', '', true);
  c.string(o, 'function_id', '', true);
  c.number(o, 'attempt', '', true);
  if (o.event === undefined) c.fail('event', 'required');
  else c.event(o.event, 'event', false);
  if (o.steps !== undefined && o.steps !== null) {
    if (!Array.isArray(o.steps)) c.fail('steps', 'expected array');
    else
      o.steps.forEach((s, i) => {
        const p = `steps[${i}]`;
        const step = c.object(s, p);
        if (!step) return;
        c.string(step, 'id', `${p}.`, true);
        c.string(step, 'name', `${p}.`, true);
        if (!STEP_STATUSES.includes(step.status as string)) c.fail(`${p}.status`, `expected one of ${STEP_STATUSES.join('|')}`);
        c.string(step, 'error', `${p}.`, false);
      });
  }
  if ('resume' in o && o.resume !== undefined) {
    const r = c.object(o.resume, 'resume');
    if (r) {
      c.string(r, 'step_id', 'resume.', true);
      if (!RESUME_TYPES.includes(r.type as string)) c.fail('resume.type', `expected one of ${RESUME_TYPES.join('|')}`);
    }
  }
  c.stringMap(o, 'secrets', '');
  if (c.problems.length > 0) return { ok: false, problems: c.problems };

  const event = normalizeEvent(o.event as Obj);
  const request: PushRequest = {
    run_id: o.run_id as string,
    function_id: o.function_id as string,
    attempt: o.attempt as number,
    event,
    steps: [...((o.steps as PushCompletedStep[] | null | undefined) ?? [])],
  };
  if (o.resume !== undefined) request.resume = o.resume as PushRequest['resume'];
  if (o.secrets !== undefined) request.secrets = o.secrets as Record<string, string>;
  return { ok: true, value: request };
}

/** Validates one pull job assignment (3.4). `event.metadata: null` is dropped; `version` defaults to 1. */
export function checkJobAssignment(body: unknown): Checked<JobAssignment> {
  const c = new Checker();
  const o = c.object(body, '(job)');
  if (!o) return { ok: false, problems: c.problems };
  c.string(o, 'job_id', '', true);
  c.string(o, 'run_id', '', true);
  c.string(o, 'function_id', '', true);
  c.number(o, 'attempt', '', true);
  if (o.event === undefined) c.fail('event', 'required');
  else c.event(o.event, 'event', true);
  if (!Array.isArray(o.completed_steps)) c.fail('completed_steps', 'expected array');
  else
    o.completed_steps.forEach((s, i) => {
      const p = `completed_steps[${i}]`;
      const step = c.object(s, p);
      if (!step) return;
      c.string(step, 'step_id', `${p}.`, true);
      c.string(step, 'name', `${p}.`, true);
      c.present(step, 'output', `${p}.`);
    });
  c.number(o, 'step_sequence_base', '', false);
  c.string(o, 'actor_id', '', false);
  c.number(o, 'execution_seq', '', false);
  c.string(o, 'lease_token', '', false);
  if ('context' in o && o.context !== undefined) {
    const ctx = c.object(o.context, 'context');
    if (ctx) {
      c.string(ctx, 'trace_id', 'context.', false);
      c.stringMap(ctx, 'metadata', 'context.');
      c.stringMap(ctx, 'secrets', 'context.');
    }
  }
  // Optional fields must be absent, never null.
  for (const key of ['step_sequence_base', 'actor_id', 'execution_seq', 'lease_token', 'context']) {
    if (o[key] === null) c.fail(key, 'must be absent, not null');
  }
  if (c.problems.length > 0) return { ok: false, problems: c.problems };

  const job: JobAssignment = {
    job_id: o.job_id as string,
    run_id: o.run_id as string,
    function_id: o.function_id as string,
    attempt: o.attempt as number,
    event: normalizeEvent(o.event as Obj),
    completed_steps: o.completed_steps as PullCompletedStep[],
  };
  for (const key of ['step_sequence_base', 'execution_seq', 'lease_token', 'context'] as const) {
    if (o[key] !== undefined) (job as unknown as Obj)[key] = o[key];
  }
  return { ok: true, value: job };
}

function normalizeEvent(e: Obj): WireEvent {
  const event: WireEvent = {
    id: e.id as string,
    name: e.name as string,
    data: e.data,
    timestamp: e.timestamp as string,
    version: (e.version as number | undefined) ?? 1,
  };
  if (e.idempotency_key !== undefined) event.idempotency_key = e.idempotency_key as string;
  if (e.source !== undefined) event.source = e.source as string;
  if (isObject(e.metadata)) event.metadata = e.metadata;
  return event;
}
