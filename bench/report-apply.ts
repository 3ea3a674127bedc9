/**
 * The push dispatcher's hot path after the claim, alone: applying one-step completions as a push
 * dispatch does (`ReportSystem.apply`, `owner`, a step offset), `--runs` of them with `--inflight`
 * at once, each report alone (`groupCommit` off) and then grouped (on), twice, on a fresh
 * PostgreSQL schema (`IRONFLOW_BENCH_DATABASE_URL`) with an in-process bus. Prints, per mode, the CPU ms per run
 * of this process (the engine: the apply and its follow-ups) and of the pool's PostgreSQL
 * backends (`/proc`; a connection the pool replaces during the phase is missed), the units of
 * work and statements per run (BEGIN/COMMIT not counted), and runs/s. CPU per run is the
 * figure to compare on a shared machine; runs/s is noise there.
 *
 *   node dist/bench/report-apply.js [--runs 2000] [--inflight 64]
 */
import { SCOPE, TestEngine, openTestEngine } from '@ironflow/testing';
import { DEFAULT_ENGINE_CONFIG } from '@ironflow/engine';
import { ExecutionFence } from '@ironflow/fencing';
import { DATABASE_URL, intArg } from './lib/common';
import { backendPids, countStatements, inFlight } from './lib/engine-cpu';

interface Claimed {
  runId: string;
  fence: ExecutionFence;
  nextSequence: number;
}

async function claimAll(t: TestEngine, n: number): Promise<Claimed[]> {
  for (let i = 0; i < n; i += 100) {
    await Promise.all(Array.from({ length: Math.min(100, n - i) }, (_v, k) => t.engine.api.trigger(SCOPE, { event: 'push.started', data: { i: i + k } })));
  }
  const out: Claimed[] = [];
  while (out.length < n) {
    const segments = await t.engine.dispatch.claim({ mode: 'push', limit: 100, project: SCOPE.project, env: SCOPE.env }, 'bench');
    if (segments.length === 0) throw new Error(`claimed ${out.length} of ${n}`);
    for (const s of segments) out.push({ runId: s.run.id, fence: { executionSeq: s.run.executionSeq, leaseToken: s.run.leaseToken! }, nextSequence: s.nextSequence });
  }
  return out;
}

async function main(): Promise<void> {
  process.env.IRONFLOW_TEST_DATABASE_URL = DATABASE_URL;
  const runs = intArg('runs', 2000);
  const inflight = intArg('inflight', 64);
  const t = await openTestEngine('postgres', { auditLingerMs: DEFAULT_ENGINE_CONFIG.auditLingerMs }, { poolSize: 8 });
  try {
    await t.engine.api.registerFunction(SCOPE, { id: 'pushed', mode: 'push', endpointUrl: 'http://127.0.0.1:9/api/ironflow', triggers: [{ event: 'push.started' }] });
    const statements = countStatements(t);
    for (const groupCommit of [false, true, false, true]) {
      const claimed = await claimAll(t, runs);
      await t.engine.resources.followUps.drain(60_000);
      const pids = await backendPids(t, 8);
      statements.units.clear();
      statements.count = 0;
      const m = await inFlight(t, pids, inflight, claimed.length, (i) => {
        const c = claimed[i];
        const owner = { project: SCOPE.project, env: SCOPE.env, id: c.runId, functionId: 'pushed' };
        return t.engine.reports.apply(c.runId, c.fence, {
          kind: 'completed',
          output: { ok: true, n: i + 1 },
          stepOffset: c.nextSequence,
          steps: [{ id: `${c.runId}:work:0`, name: 'work', type: 'invoke', status: 'completed', output: { v: 1 } } as never],
        }, undefined, { owner, groupCommit });
      });
      const per = (v: number) => Math.round((v / runs) * 1000) / 1000;
      console.log(JSON.stringify({
        groupCommit,
        runs,
        inflight,
        runsPerSecond: Math.round((runs / m.ms) * 1000),
        engineCpuMsPerRun: per(m.engineCpuMs),
        postgresCpuMsPerRun: per(m.postgresCpuMs),
        unitsPerRun: Object.fromEntries([...statements.units].map(([k, v]) => [k, per(v)])),
        statementsPerRun: per(statements.count),
      }));
    }
  } finally {
    await t.close();
  }
}

void main().catch((err) => {
  console.error(err);
  process.exit(1);
});
