import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CallScope } from '@ironflow/contracts';
import { EngineLogger, LogFields } from '@ironflow/observability';
import { openSqliteElsewhere, waitFor } from '@ironflow/testing';
import { EngineRuntime, pushSlotsFor } from './engine-runtime';
import { loadSettings } from './settings';

const SCOPE: CallScope = { project: 'default', env: 'default' };
/** The default lease: a recovery within a test's 10 s deadline can only come from the start's expiry. */
const LEASE_MS = 90_000;

/** An EngineLogger that keeps its lines. */
function recordingLogger(): EngineLogger & { lines: { level: string; message: string; fields?: LogFields }[] } {
  const lines: { level: string; message: string; fields?: LogFields }[] = [];
  const keep = (level: string) => (message: string, fields?: LogFields) => void lines.push({ level, message, fields });
  return { lines, log: keep('info'), warn: keep('warn'), error: keep('error') };
}

interface LeaseRow {
  run_id: string;
  holder: string;
  expires_at: number;
}

/**
 * Lease recovery after a crash of a process that held its SQLite store exclusively (`ironflow dev`,
 * DESIGN.md "Leases and fencing"): a fresh runtime on the file expires the push leases the dead
 * process left, so its first capacity scan recovers them; a runtime on a store it does not hold
 * alone leaves every lease to its expiry.
 */
describe('EngineRuntime.open: leases a killed process left [sqlite]', () => {
  let dir: string;
  let url: string;
  const opened: EngineRuntime[] = [];

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'ironflow-runtime-'));
    url = `sqlite:${join(dir, 'dev.db')}`;
  });
  afterEach(async () => {
    for (const runtime of opened.splice(0)) await runtime.close();
    rmSync(dir, { recursive: true, force: true });
  });

  async function open(exclusiveStore: boolean, logger: EngineLogger = recordingLogger()): Promise<EngineRuntime> {
    const runtime = await EngineRuntime.open(loadSettings({}, { databaseUrl: url, exclusiveStore, leaseMs: LEASE_MS, scanMs: 50 }), logger);
    opened.push(runtime);
    return runtime;
  }

  /**
   * What a process killed mid-call leaves: a push run claimed by its node (`dead-node`) and a pull
   * run claimed by a worker (`w1`), both `running` with live leases. Closed without draining
   * anything: no loop ran, so nothing released them.
   */
  async function leaveRunningExecutions(): Promise<{ pushRun: string; pullRun: string; leases: LeaseRow[] }> {
    const logger = recordingLogger();
    const dead = await open(true, logger);
    expect(logger.lines).toEqual([]); // a fresh file: nothing left, nothing said
    const { engine } = dead;
    await engine.api.registerFunction(SCOPE, { id: 'pushed', mode: 'push', endpointUrl: 'http://127.0.0.1:9/', triggers: [{ event: 'push.go' }] });
    await engine.api.registerFunction(SCOPE, { id: 'pulled', mode: 'pull', triggers: [{ event: 'pull.go' }] });
    await engine.pull.register(SCOPE, 'w1', { worker_id: 'w1', function_ids: ['pulled'] });
    const pushRun = (await engine.api.trigger(SCOPE, { event: 'push.go', data: {} })).runIds[0];
    const pullRun = (await engine.api.trigger(SCOPE, { event: 'pull.go', data: {} })).runIds[0];
    expect(await engine.dispatch.claim({ mode: 'push', limit: 1 }, 'dead-node')).toHaveLength(1);
    expect(await engine.pull.poll('w1', 1)).toHaveLength(1);
    const leases = await readLeases(dead);
    await dead.close();
    opened.splice(opened.indexOf(dead), 1);
    return { pushRun, pullRun, leases };
  }

  async function readLeases(runtime: EngineRuntime): Promise<LeaseRow[]> {
    const rows = await runtime.store.read('test.leases', (tx) => tx.query<LeaseRow>(`SELECT run_id, holder, expires_at FROM leases ORDER BY holder`));
    return rows.map((r) => ({ run_id: String(r.run_id), holder: String(r.holder), expires_at: Number(r.expires_at) }));
  }

  async function readRun(runtime: EngineRuntime, runId: string): Promise<{ status: string; recoveries: number; execution_seq: number }> {
    const rows = await runtime.store.read('test.run', (tx) => tx.query<{ status: string; recoveries: unknown; execution_seq: unknown }>(`SELECT status, recoveries, execution_seq FROM runs WHERE id = $1`, [runId]));
    return { status: rows[0].status, recoveries: Number(rows[0].recoveries), execution_seq: Number(rows[0].execution_seq) };
  }

  it('exclusive: the push lease is expired at open and the first capacity scan requeues its execution; the worker\'s lease is kept', async () => {
    const { pushRun, pullRun, leases } = await leaveRunningExecutions();
    expect(leases).toEqual([
      { run_id: pushRun, holder: 'dead-node', expires_at: expect.any(Number) },
      { run_id: pullRun, holder: 'w1', expires_at: expect.any(Number) },
    ]);
    const logger = recordingLogger();
    const runtime = await open(true, logger);
    const before = Date.now();
    const [pushLease, pullLease] = await readLeases(runtime);
    expect(pushLease.expires_at).toBeLessThanOrEqual(before);
    expect(pullLease).toEqual(leases[1]);
    expect(pullLease.expires_at).toBeGreaterThan(before + LEASE_MS / 2);
    expect(logger.lines).toEqual([expect.objectContaining({ level: 'warn', fields: { count: 1 } })]);
    expect(logger.lines[0].message).toContain('1 push execution(s) left running by a process that is gone');

    runtime.engine.start({ pushDispatch: false, scheduler: false, scanner: true });
    await waitFor('the push run to be requeued by lease recovery', async () => (await readRun(runtime, pushRun)).status === 'waiting_for_capacity');
    expect(await readRun(runtime, pushRun)).toEqual({ status: 'waiting_for_capacity', recoveries: 1, execution_seq: 1 });
    const recoveries = (await runtime.metrics.leaseRecoveries.get()).values.filter((v) => v.value > 0);
    expect(recoveries).toEqual([expect.objectContaining({ labels: { effect: 'requeued' }, value: 1 })]);
    const audit = await waitFor('the lease_recovered audit row', async () => {
      const rows = await runtime.store.read('test.audit', (tx) => tx.query<{ data: string }>(`SELECT data FROM audit_events WHERE run_id = $1 AND event_type = 'run.lease_recovered'`, [pushRun]));
      return rows.length > 0 && rows;
    });
    expect(audit.map((r) => JSON.parse(r.data) as unknown)).toEqual([{ execution_seq: 1, recoveries: 1, attempt: 1 }]);
    // The worker's execution is untouched: still running under its live lease.
    expect(await readRun(runtime, pullRun)).toEqual({ status: 'running', recoveries: 0, execution_seq: 1 });
    expect((await readLeases(runtime)).filter((l) => l.run_id === pullRun)).toEqual([leases[1]]);
  });

  it('not exclusive: every lease is left to its expiry, and a scan recovers nothing', async () => {
    const { pushRun, leases } = await leaveRunningExecutions();
    const logger = recordingLogger();
    const runtime = await open(false, logger);
    expect(await readLeases(runtime)).toEqual(leases);
    expect(logger.lines).toEqual([]);
    expect(await runtime.engine.recovery.scan()).toEqual([]);
    expect(await readRun(runtime, pushRun)).toEqual({ status: 'running', recoveries: 0, execution_seq: 1 });
  });

  it('while an exclusive open holds the file, a second open of it fails (the premise of the expiry)', async () => {
    const first = await open(true);
    expect(await openSqliteElsewhere(url.replace(/^sqlite:/, ''))).toMatch(/locked|busy/i);
    expect(first.store.dialect).toBe('sqlite');
    await first.close();
    opened.splice(0);
    expect(await openSqliteElsewhere(url.replace(/^sqlite:/, ''))).toBe('opened');
  });
});

describe('pushSlotsFor: the push slots of a process', () => {
  const settings = loadSettings({ IRONFLOW_GATEWAY_PUSH_SLOTS: '48' });
  it('an api-gateway without a dispatcher has IRONFLOW_GATEWAY_PUSH_SLOTS; a dispatcher, ironflow dev (every service) and the others keep the engine default', () => {
    expect(pushSlotsFor(settings, ['api-gateway'])).toBe(48);
    expect([pushSlotsFor(settings, ['dispatcher']), pushSlotsFor(settings, ['api-gateway', 'dispatcher', 'scheduler', 'capacity-scanner', 'audit-writer']), pushSlotsFor(settings, ['scheduler'])]).toEqual([undefined, undefined, undefined]);
  });

  it('reaches the engine: a runtime opened with them has that many push slots', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ironflow-slots-'));
    const runtime = await EngineRuntime.open(loadSettings({ IRONFLOW_DATABASE_URL: `sqlite:${join(dir, 'dev.db')}` }), recordingLogger(), { pushConcurrency: pushSlotsFor(settings, ['api-gateway']) });
    try {
      expect(runtime.engine.resources.config.pushConcurrency).toBe(48);
    } finally {
      await runtime.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
