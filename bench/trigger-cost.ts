/**
 * The trigger's unit of work alone (issue 11): `--runs` triggers of one push function (no
 * dispatch: the runs stay queued), `--inflight` at once, twice, on a fresh PostgreSQL schema
 * (`IRONFLOW_BENCH_DATABASE_URL`) with an in-process bus. Prints per pass the CPU ms per trigger
 * of this process (the engine) and of the pool's PostgreSQL backends (`/proc`), the statements
 * per trigger (BEGIN and COMMIT not counted) and triggers/s. CPU per trigger is the figure to
 * compare on a shared machine; triggers/s is noise there.
 *
 *   node dist/bench/trigger-cost.js [--runs 2000] [--inflight 1,64]
 */
import { SCOPE, openTestEngine } from '@ironflow/testing';
import { Tx } from '@ironflow/store';
import { DATABASE_URL, intArg, stringArg } from './lib/common';
import { cpuMs } from './compare/proc-stat';

async function main(): Promise<void> {
  process.env.IRONFLOW_TEST_DATABASE_URL = DATABASE_URL;
  const runs = intArg('runs', 2000);
  const inflights = (stringArg('inflight') ?? '1,64').split(',').map(Number);
  const t = await openTestEngine('postgres', { auditLingerMs: 100 }, { poolSize: 8 });
  try {
    await t.engine.api.registerFunction(SCOPE, { id: 'pushed', mode: 'push', endpointUrl: 'http://127.0.0.1:9/api/ironflow', triggers: [{ event: 'push.started' }] });
    let statements = 0;
    const store = t.faults;
    const unitOfWork = store.unitOfWork.bind(store);
    store.unitOfWork = (name, work, options) =>
      unitOfWork(name, (tx) => work({ ...tx, query: (sql, p) => (statements++, tx.query(sql, p)), execute: (sql, p) => (statements++, tx.execute(sql, p)) }), options);
    // The pool's backends: every connection held at once (read before each pass: the pool may have replaced some).
    const backendPids = async (): Promise<number[]> => {
      let open = 0;
      let release!: () => void;
      const all = new Promise<void>((resolve) => (release = resolve));
      return [...new Set(await Promise.all(Array.from({ length: 8 }, () => t.db.store.unitOfWork('bench.pid', async (tx: Tx) => {
        const [row] = await tx.query<{ pid: number }>(`SELECT pg_backend_pid() AS pid`);
        if (++open === 8) release();
        await all;
        return Number(row.pid);
      }))))];
    };
    for (const inflight of [...inflights, ...inflights]) {
      await t.engine.api.trigger(SCOPE, { event: 'push.started', data: { warm: true } });
      await t.engine.resources.followUps.drain(60_000);
      const pids = await backendPids();
      statements = 0;
      const pg0 = pids.map((p) => cpuMs(p) ?? 0);
      const cpu0 = process.cpuUsage();
      const started = Date.now();
      let next = 0;
      await Promise.all(Array.from({ length: inflight }, async () => {
        while (next < runs) {
          const i = next++;
          await t.engine.api.trigger(SCOPE, { event: 'push.started', data: { i } });
        }
      }));
      await t.engine.resources.followUps.drain(60_000);
      const ms = Date.now() - started;
      const cpu = process.cpuUsage(cpu0);
      const pg = pids.reduce((sum, p, i) => sum + ((cpuMs(p) ?? 0) - pg0[i]), 0);
      const per = (v: number) => Math.round((v / runs) * 1000) / 1000;
      console.log(JSON.stringify({ runs, inflight, triggersPerSecond: Math.round((runs / ms) * 1000), engineCpuMsPerRun: per((cpu.user + cpu.system) / 1000), postgresCpuMsPerRun: per(pg), statementsPerRun: per(statements) }));
    }
  } finally {
    await t.close();
  }
}

void main().catch((err) => {
  console.error(err);
  process.exit(1);
});
