import { EventRecord, mapEvent } from '../rows';
import { placeholders } from '../sql';
import { Tx } from '../tx';

/** One `cancelOn` spec of a run (DESIGN.md `cancel_on_specs`). */
export interface CancelOnSpecRow {
  runId: string;
  specIndex: number;
  eventName: string;
  /** The spec's `match` path; `null` when any event of that name matches. */
  matchPath: string | null;
  /** JSON text of the run's value at `matchPath` (`null` without a path). */
  matchValue: string | null;
  /** The spec's CEL `if` condition, `null` when it has none. */
  condition: string | null;
}

/** A run that specs of an event's name match by path and value, with those specs' conditions. */
export interface MatchedRun {
  runId: string;
  /** The matched specs' conditions (`null` for a spec without one). */
  conditions: (string | null)[];
}

/** Writes a new run's specs, in the run's creating unit of work. */
export async function insertSpecs(tx: Tx, project: string, env: string, specs: CancelOnSpecRow[]): Promise<void> {
  for (const s of specs) {
    await tx.execute(
      `INSERT INTO cancel_on_specs (run_id, spec_index, project, env, event_name, match_path, match_value, condition, created_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
      [s.runId, s.specIndex, project, env, s.eventName, s.matchPath, s.matchValue, s.condition, tx.now],
    );
  }
}

/** A run's specs, in declaration order (the replay's spec read). */
export async function listSpecsOfRun(tx: Tx, runId: string): Promise<CancelOnSpecRow[]> {
  const rows = await tx.query(`SELECT * FROM cancel_on_specs WHERE run_id = $1 ORDER BY spec_index`, [runId]);
  return rows.map((r) => ({
    runId: String(r.run_id),
    specIndex: Number(r.spec_index),
    eventName: String(r.event_name),
    matchPath: r.match_path === null ? null : String(r.match_path),
    matchValue: r.match_value === null ? null : String(r.match_value),
    condition: r.condition === null || r.condition === undefined ? null : String(r.condition),
  }));
}

/** An event's project, env and name: what its specs are found by. */
export interface SpecKey {
  project: string;
  env: string;
  eventName: string;
}

/** The map key of a {@link SpecKey} (see {@link listMatchPaths}). */
export const specKeyOf = (k: SpecKey): string => `${k.project}\u0000${k.env}\u0000${k.eventName}`;

/**
 * The distinct `match` paths of the specs of each event name among `keys` (`null`: a spec without
 * a path), by {@link specKeyOf}; a key no spec names is absent. On PostgreSQL one statement for
 * all the keys (issue 11: the live matches of the events a node committed together share one
 * read), on SQLite one a key.
 */
export async function listMatchPaths(tx: Tx, keys: SpecKey[]): Promise<Map<string, (string | null)[]>> {
  const paths = new Map<string, (string | null)[]>();
  const add = (key: string, path: unknown) => paths.set(key, [...(paths.get(key) ?? []), path === null ? null : String(path)]);
  if (tx.dialect === 'postgres') {
    if (keys.length === 0) return paths;
    const rows = await tx.query<{ project: string; env: string; event_name: string; match_path: string | null }>(
      `SELECT DISTINCT s.project, s.env, s.event_name, s.match_path FROM cancel_on_specs s
       JOIN unnest($1::text[], $2::text[], $3::text[]) AS k(project, env, event_name) ON s.project = k.project AND s.env = k.env AND s.event_name = k.event_name`,
      [keys.map((k) => k.project), keys.map((k) => k.env), keys.map((k) => k.eventName)],
    );
    for (const r of rows) add(specKeyOf({ project: r.project, env: r.env, eventName: r.event_name }), r.match_path);
    return paths;
  }
  for (const key of new Map(keys.map((k) => [specKeyOf(k), k])).values()) {
    const rows = await tx.query<{ match_path: string | null }>(
      `SELECT DISTINCT match_path FROM cancel_on_specs WHERE project = $1 AND env = $2 AND event_name = $3`,
      [key.project, key.env, key.eventName],
    );
    for (const r of rows) add(specKeyOf(key), r.match_path);
  }
  return paths;
}

/**
 * Runs whose specs an event named `eventName` matches (the live match), given the distinct
 * `match` paths of that name's specs (`paths`, from {@link listMatchPaths}): for each path,
 * `valueAt(path)` gives the JSON text of the event's value there (`null` when it has none: no
 * spec of that path matches), and a spec matches when the run's value is the same text; a spec
 * without a path matches any event of the name. With
 * `createdUpTo` (store clock ms), only runs whose specs were written by then (the reconcile: runs
 * the event could have cancelled live or by its replay). Returns the runs, sorted by id, each with
 * its matched specs' conditions.
 */
export async function listMatchingRuns(
  tx: Tx,
  project: string,
  env: string,
  eventName: string,
  paths: (string | null)[],
  valueAt: (path: string) => string | null,
  createdUpTo?: number,
): Promise<MatchedRun[]> {
  const bound = createdUpTo === undefined ? '' : ' AND created_at <= $4';
  const bounded = createdUpTo === undefined ? [] : [createdUpTo];
  const runs = new Map<string, (string | null)[]>();
  for (const path of paths) {
    const value = path === null ? null : valueAt(path);
    // An event without a value at the path matches no spec of that path.
    if (path !== null && value === null) continue;
    const rows = path === null
      ? await tx.query<{ run_id: string; condition: string | null }>(
        `SELECT run_id, condition FROM cancel_on_specs WHERE project = $1 AND env = $2 AND event_name = $3 AND match_path IS NULL${bound}`,
        [project, env, eventName, ...bounded],
      )
      : await tx.query<{ run_id: string; condition: string | null }>(
        `SELECT run_id, condition FROM cancel_on_specs WHERE project = $1 AND env = $2 AND event_name = $3${bound} AND match_path = $${4 + bounded.length} AND match_value = $${5 + bounded.length}`,
        [project, env, eventName, ...bounded, path, value],
      );
    for (const r of rows) {
      const id = String(r.run_id);
      runs.set(id, [...(runs.get(id) ?? []), r.condition === null ? null : String(r.condition)]);
    }
  }
  return [...runs].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([runId, conditions]) => ({ runId, conditions }));
}

/** Deletes a run's specs (its `cancel_on` cleanup). */
export async function deleteSpecsOfRun(tx: Tx, runId: string): Promise<void> {
  await tx.execute(`DELETE FROM cancel_on_specs WHERE run_id = $1`, [runId]);
}

/**
 * The cleanup a lost follow-up left: reads the next `limit` runs with specs after `afterRunId`
 * (by id, so a pass costs a page however many runs wait) and deletes the specs of those that
 * have ended. Returns the specs deleted and the next page's cursor (`''` at the end).
 */
export async function deleteSpecsOfEndedRuns(tx: Tx, afterRunId: string, limit: number): Promise<{ deleted: number; next: string }> {
  const page = (await tx.query<{ run_id: string }>(
    `SELECT DISTINCT run_id FROM cancel_on_specs WHERE run_id > $1 ORDER BY run_id LIMIT $2`,
    [afterRunId, limit],
  )).map((r) => String(r.run_id));
  const next = page.length < limit ? '' : page[page.length - 1];
  if (page.length === 0) return { deleted: 0, next };
  const ended = (await tx.query<{ id: string }>(
    `SELECT id FROM runs WHERE id IN (${placeholders(1, page.length)}) AND status IN ('completed', 'failed', 'cancelled')`,
    page,
  )).map((r) => String(r.id));
  if (ended.length === 0) return { deleted: 0, next };
  const deleted = (await tx.execute(`DELETE FROM cancel_on_specs WHERE run_id IN (${placeholders(1, ended.length)})`, ended)).affected;
  return { deleted, next };
}

/**
 * The replay's read of the event log: events named `eventName` stamped at or after `sinceTs`,
 * oldest first, at most `limit` (the specification's "~1000 log rows a spec"), without the event
 * that created the run. No upper bound: the log is read up to the store's own clock.
 */
export async function listReplayEvents(
  tx: Tx,
  project: string,
  env: string,
  eventName: string,
  sinceTs: number,
  exceptEventId: string | null,
  limit: number,
): Promise<EventRecord[]> {
  const rows = await tx.query(
    `SELECT * FROM events WHERE project = $1 AND env = $2 AND name = $3 AND ts >= $4 AND id <> $5 ORDER BY ts, id LIMIT $6`,
    [project, env, eventName, sinceTs, exceptEventId ?? '', limit],
  );
  return rows.map(mapEvent);
}

/**
 * The reconcile's page (a live match lost between the event's commit and its announce): events
 * after `(afterTs, afterId)` and stamped up to `upToTs`, oldest first, of names some run not yet
 * cleaned up has a `cancelOn` spec for, in the same project and env. At most `limit`.
 */
export async function listReconcileEvents(tx: Tx, afterTs: number, afterId: string, upToTs: number, limit: number): Promise<EventRecord[]> {
  const rows = await tx.query(
    `SELECT e.* FROM events e
     WHERE (e.ts > $1 OR (e.ts = $1 AND e.id > $2)) AND e.ts <= $3
       AND EXISTS (SELECT 1 FROM cancel_on_specs s WHERE s.project = e.project AND s.env = e.env AND s.event_name = e.name)
     ORDER BY e.ts, e.id LIMIT $4`,
    [afterTs, afterId, upToTs, limit],
  );
  return rows.map(mapEvent);
}
