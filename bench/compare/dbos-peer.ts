/**
 * The DBOS Transact peer of `bench/compare`, as its own process (forked with IPC): DBOS runs in
 * this process on the system database `argv[2]` (PostgreSQL), with the same workloads as
 * Ironflow's worker — `one` (a workflow with one step) and `parent` (a workflow that starts the
 * child workflow `child`, one step, and waits for its result). DBOS is a library, so the load is
 * generated here too: each `PhaseRequest` message is answered with `{result: PhaseResult}`;
 * `{progress: n}` messages follow the calls as they end.
 */
import { DBOS } from '@dbos-inc/dbos-sdk';
import { PhaseRequest, Workload, runPhase } from './load';

const [systemDatabaseUrl] = process.argv.slice(2);

const work = async (i: number) => ({ i });
const one = DBOS.registerWorkflow(async (i: number) => DBOS.runStep(() => work(i), { name: 'work' }), { name: 'one' });
const child = DBOS.registerWorkflow(async (i: number) => DBOS.runStep(() => work(i), { name: 'work' }), { name: 'child' });
const parent = DBOS.registerWorkflow(
  async (i: number) => {
    const handle = await DBOS.startWorkflow(child)(i);
    return handle.getResult();
  },
  { name: 'parent' },
);

/** Starts the workload's workflow and waits for its result (the counterpart of TriggerSync). */
async function call(workload: Workload, i: number): Promise<unknown> {
  const handle = await DBOS.startWorkflow(workload === 'one-step' ? one : parent)(i);
  return handle.getResult();
}

async function main(): Promise<void> {
  DBOS.setConfig({ name: 'ironflow-bench', systemDatabaseUrl, systemDatabasePoolSize: 10, logLevel: 'error' });
  await DBOS.launch();
  process.on('message', (message: PhaseRequest) => {
    let lastSent = 0;
    const onCompleted = (n: number) => {
      const now = Date.now();
      if (now - lastSent < 200) return; // progress at most every 200 ms: IPC costs this process CPU
      lastSent = now;
      process.send?.({ progress: n });
    };
    runPhase(message, call, onCompleted).then(
      (result) => process.send?.({ result }),
      (err) => process.send?.({ error: String(err) }),
    );
  });
  process.on('disconnect', () => {
    DBOS.shutdown().finally(() => process.exit(0));
  });
  process.send?.({ ready: true });
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
