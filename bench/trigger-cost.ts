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
import { DATABASE_URL, intArg, stringArg } from './lib/common';
import { backendPids, countStatements, inFlight } from './lib/engine-cpu';

async function main(): Promise<void> {
  process.env.IRONFLOW_TEST_DATABASE_URL = DATABASE_URL;
  const runs = intArg('runs', 2000);
  const inflights = (stringArg('inflight') ?? '1,64').split(',').map(Number);
  const t = await openTestEngine('postgres', { auditLingerMs: 100 }, { poolSize: 8 });
  try {
    await t.engine.api.registerFunction(SCOPE, { id: 'pushed', mode: 'push', endpointUrl: 'http://127.0.0.1:9/api/ironflow', triggers: [{ event: 'push.started' }] });
    const statements = countStatements(t);
    for (const inflight of [...inflights, ...inflights]) {
      await t.engine.api.trigger(SCOPE, { event: 'push.started', data: { warm: true } });
      await t.engine.resources.followUps.drain(60_000);
      const pids = await backendPids(t, 8);
      statements.count = 0;
      const m = await inFlight(t, pids, inflight, runs, (i) => t.engine.api.trigger(SCOPE, { event: 'push.started', data: { i } }));
      const per = (v: number) => Math.round((v / runs) * 1000) / 1000;
      console.log(JSON.stringify({ runs, inflight, triggersPerSecond: Math.round((runs / m.ms) * 1000), engineCpuMsPerRun: per(m.engineCpuMs), postgresCpuMsPerRun: per(m.postgresCpuMs), statementsPerRun: per(statements.count) }));
    }
  } finally {
    await t.close();
  }
}

void main().catch((err) => {
  console.error(err);
  process.exit(1);
});
