import { EventRecord, RunRecord, mapEvent, mapRun, toJson } from '../rows';
import { Tx } from '../tx';

/**
 * A trigger whose work is known before it runs (issue 11): the event, the functions the caller
 * expects its name to start (read by an earlier trigger), and the one run to insert, claimed for
 * the caller when `claim` is given. {@link insertTriggerAtOnce} writes it in one statement.
 */
export interface TriggerAtOnce {
  event: { id: string; project: string; env: string; name: string; data: unknown; idempotencyKey?: string; version: number; metadata: Record<string, unknown> | null };
  /** The active functions whose triggers name the event, as the caller expects them: at most one. */
  expected: { id: string; version: number }[];
  /**
   * The run of `expected[0]` to insert (its function accepts the event), or null for none. Never
   * held; `concurrencyLimit` null when `claim` is given.
   */
  run: { id: string; functionId: string; functionVersion: number; mode: string; maxAttempts: number; concurrencyKey: string | null; concurrencyLimit: number | null } | null;
  /** Claim the run (a trigger that dispatches at once): its new lease token, the lease's holder, lane, expiry and deadline (ms, store clock). */
  claim: { leaseToken: string; holder: string; lane: string; expiresAt: number; deadlineAt: number | null } | null;
}

/** What {@link insertTriggerAtOnce} wrote: the event and its run (`running` when claimed). */
export interface TriggerAtOnceRows {
  event: EventRecord;
  run: RunRecord | null;
}

/**
 * PostgreSQL: the trigger of {@link TriggerAtOnce} as one data-modifying statement (one round trip
 * instead of one per read and write; issue 11): it inserts the event and the run, and with `claim`
 * also claims the run as `runsSql.claimInsertedRun` would (`running`, execution 1, version 2, the
 * new lease token, started now; only while the instance is thawed, read `FOR SHARE` as
 * `thawedForRun` does, else the run stays queued) and inserts its lease. It writes nothing and
 * resolves `null` unless the case is the simple one it assumes, checked in the same snapshot: the
 * active functions for the event's name are exactly `expected` (ids and versions, so their
 * definitions are the ones the caller read), no `waitForEvent` correlation of that name is open,
 * and the event is new (its id and idempotency key unused; a concurrent one is waited for, within
 * the unit's lock limit). The caller then runs the general trigger in the same unit of work.
 * Run it inside a unit of work (its lock limit covers the waits). Not for SQLite.
 */
export async function insertTriggerAtOnce(tx: Tx, t: TriggerAtOnce): Promise<TriggerAtOnceRows | null> {
  if (tx.dialect !== 'postgres') throw new Error('insertTriggerAtOnce is PostgreSQL only');
  if (t.expected.length > 1) throw new Error('insertTriggerAtOnce expects at most one function');
  if (t.run && t.expected[0]?.id !== t.run.functionId) throw new Error('insertTriggerAtOnce: the run is not of the expected function');
  const { event, run, claim } = t;
  const rows = await tx.query<{ event: Record<string, unknown> | null; run: Record<string, unknown> | null }>(
    `WITH simple AS (
       SELECT 1 WHERE (SELECT COALESCE(array_agg(f.id || ':' || f.version ORDER BY f.id), '{}')
                         FROM functions f JOIN function_triggers t ON t.project = f.project AND t.env = f.env AND t.function_id = f.id
                        WHERE t.project = $2 AND t.env = $3 AND t.event_name = $4 AND f.status = 'active') = $10::text[]
         AND NOT EXISTS (SELECT 1 FROM waiting_correlations WHERE project = $2 AND env = $3 AND event_name = $4 AND satisfied = 0)
     ), ev AS (
       INSERT INTO events (id, project, env, name, data, idempotency_key, ts, version, metadata)
       SELECT $1::text, $2::text, $3::text, $4::text, $5::text, $6::text, $7::bigint, $8::int, $9::text FROM simple
       ON CONFLICT DO NOTHING RETURNING *
     ), thawed AS (
       SELECT 1 FROM instance_authority WHERE id = 1 AND state <> 'frozen' AND $16::text IS NOT NULL FOR SHARE
     ), claim AS (
       SELECT EXISTS (SELECT 1 FROM thawed) AS yes
     ), run AS (
       INSERT INTO runs (id, project, env, function_id, function_version, mode, event_id, status, version,
         attempt, max_attempts, execution_seq, lease_token, available_at, recoveries, wake_pending,
         concurrency_key, concurrency_limit, input, created_at, updated_at, started_at, held)
       SELECT $11::text, ev.project, ev.env, $12::text, $13::int, $14::text, ev.id, CASE WHEN claim.yes THEN 'running' ELSE 'waiting_for_capacity' END,
         CASE WHEN claim.yes THEN 2 ELSE 1 END, 1, $15::int, CASE WHEN claim.yes THEN 1 ELSE 0 END, CASE WHEN claim.yes THEN $16::text END,
         $7::bigint, 0, 0, $17::text, $18::int, ev.data, $7::bigint, $7::bigint, CASE WHEN claim.yes THEN $7::bigint END, 0
         FROM ev, claim WHERE $11::text IS NOT NULL
       RETURNING *
     ), lease AS (
       INSERT INTO leases (run_id, execution_seq, holder, lane, expires_at, deadline_at)
       SELECT run.id, run.execution_seq, $19::text, $20::text, $21::bigint, $22::bigint FROM run WHERE run.status = 'running'
     )
     SELECT (SELECT row_to_json(ev) FROM ev) AS event, (SELECT row_to_json(run) FROM run) AS run`,
    [
      event.id, event.project, event.env, event.name, toJson(event.data ?? {}), event.idempotencyKey ?? null, tx.now, event.version,
      event.metadata ? toJson(event.metadata) : null,
      t.expected.map((f) => `${f.id}:${f.version}`),
      run?.id ?? null, run?.functionId ?? null, run?.functionVersion ?? null, run?.mode ?? null, run?.maxAttempts ?? null,
      run && claim ? claim.leaseToken : null,
      run?.concurrencyKey ?? null, run?.concurrencyLimit ?? null,
      claim?.holder ?? null, claim?.lane ?? null, claim?.expiresAt ?? null, claim?.deadlineAt ?? null,
    ],
  );
  const written = rows[0];
  if (!written?.event) return null;
  return { event: mapEvent(written.event), run: written.run ? mapRun(written.run) : null };
}
