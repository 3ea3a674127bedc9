import { DEFAULT_RECORDING_PROFILE, FunctionDefinition, RecordingProfile } from '@ironflow/contracts';
import { FunctionRecord, mapFunction } from '../rows';
import { Tx } from '../tx';

export async function getFunction(tx: Tx, project: string, env: string, id: string): Promise<FunctionRecord | null> {
  const rows = await tx.query(`SELECT * FROM functions WHERE project = $1 AND env = $2 AND id = $3`, [project, env, id]);
  return rows.length ? mapFunction(rows[0]) : null;
}

/** A function's recording profile (the default when it stored none); `null` when the function does not exist. */
export async function getRecordingProfile(tx: Tx, project: string, env: string, id: string): Promise<RecordingProfile | null> {
  const fn = await getFunction(tx, project, env, id);
  return fn ? fn.definition.recordingProfile ?? DEFAULT_RECORDING_PROFILE : null;
}

export async function listFunctions(tx: Tx, project: string, env: string): Promise<FunctionRecord[]> {
  const rows = await tx.query(`SELECT * FROM functions WHERE project = $1 AND env = $2 ORDER BY id`, [project, env]);
  return rows.map(mapFunction);
}

/** Functions whose triggers name `eventName`. */
export async function listFunctionsForEvent(tx: Tx, project: string, env: string, eventName: string): Promise<FunctionRecord[]> {
  const rows = await tx.query(
    `SELECT f.* FROM functions f JOIN function_triggers t
       ON t.project = f.project AND t.env = f.env AND t.function_id = f.id
     WHERE t.project = $1 AND t.env = $2 AND t.event_name = $3 AND f.status = 'active' ORDER BY f.id`,
    [project, env, eventName],
  );
  return rows.map(mapFunction);
}

/**
 * Inserts or replaces a function's definition; the version goes up by one when the definition
 * changed. Returns the stored record and whether it was created.
 */
export async function upsertFunction(tx: Tx, project: string, env: string, def: FunctionDefinition): Promise<{ record: FunctionRecord; created: boolean }> {
  const existing = await getFunction(tx, project, env, def.id);
  const json = JSON.stringify(def);
  if (existing && JSON.stringify(existing.definition) === json) return { record: existing, created: false };
  if (existing) {
    await tx.execute(
      `UPDATE functions SET definition = $4, mode = $5, endpoint_url = $6, version = version + 1, updated_at = $7
       WHERE project = $1 AND env = $2 AND id = $3`,
      [project, env, def.id, json, def.mode, def.endpointUrl ?? null, tx.now],
    );
  } else {
    await tx.execute(
      `INSERT INTO functions (project, env, id, version, mode, endpoint_url, definition, status, created_at, updated_at)
       VALUES ($1, $2, $3, 1, $4, $5, $6, 'active', $7, $7)`,
      [project, env, def.id, def.mode, def.endpointUrl ?? null, json, tx.now],
    );
  }
  await tx.execute(`DELETE FROM function_triggers WHERE project = $1 AND env = $2 AND function_id = $3`, [project, env, def.id]);
  // A cron trigger's `event` names the event its ticks carry; it does not route emitted events.
  const names = [...new Set(def.triggers.filter((t) => !t.cron).map((t) => t.event).filter((e): e is string => !!e))];
  for (const name of names) {
    await tx.execute(
      `INSERT INTO function_triggers (project, env, event_name, function_id) VALUES ($1, $2, $3, $4)`,
      [project, env, name, def.id],
    );
  }
  const record = await getFunction(tx, project, env, def.id);
  return { record: record!, created: !existing };
}
