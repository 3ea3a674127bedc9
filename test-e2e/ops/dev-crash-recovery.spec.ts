import { createServer, Server } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createClient, createFunction, serve } from '@ironflow/sdk';
import { waitFor } from '@ironflow/testing';
import { ServiceProcess, devApp, freePort } from '../support/service-processes';

/**
 * `ironflow dev` killed (SIGKILL) while a push call is in flight, then started again on the same
 * SQLite file (README "Using it"): the new process holds the file alone, so the push lease
 * the dead one left is expired at start and the first capacity scan recovers the run; the push
 * endpoint gets the call again and the run completes, long before the 90 s lease would have run
 * out (the wait's deadline is half of it).
 */
describe('ironflow dev restarted after a SIGKILL', () => {
  let push: Server;
  let pushUrl: string;
  let dir: string;
  let dev: ServiceProcess | undefined;
  let releaseFirst: () => void = () => undefined;
  const calls: string[] = [];

  /** The first call holds until the test ends (its caller is killed); a later call answers at once. */
  const held = createFunction({ id: 'crash.held', mode: 'push', triggers: [{ event: 'crash.go' }] }, async ({ step, run }) => {
    calls.push(run.id);
    const call = calls.length;
    await step.run('hold', () => (call === 1 ? new Promise<void>((resolve) => (releaseFirst = resolve)) : undefined));
    return { call };
  });

  beforeAll(async () => {
    push = createServer(serve({ functions: [held] }));
    await new Promise<void>((r) => push.listen(0, '127.0.0.1', r));
    pushUrl = `http://127.0.0.1:${(push.address() as AddressInfo).port}/`;
    dir = mkdtempSync(join(tmpdir(), 'ironflow-dev-crash-'));
  });
  afterAll(async () => {
    await dev?.kill9();
    releaseFirst();
    push.closeAllConnections();
    await new Promise((r) => push.close(r));
    rmSync(dir, { recursive: true, force: true });
  });

  it('recovers the run whose push call was in flight at the first capacity scan, and the second call completes it', async () => {
    dev = new ServiceProcess(devApp(join(dir, 'dev.db')), await freePort(), {});
    await dev.start();
    const client = createClient({ serverUrl: dev.url });
    await client.registerFunction(held, { endpointUrl: pushUrl });
    const { runIds: [runId] } = await client.emit('crash.go', {});
    await waitFor('the push call to reach the endpoint', () => calls.length === 1);
    await dev.kill9();

    await dev.restart();
    const outcome = await client.waitForRun(runId, { timeoutMs: 45_000, pollMs: 100 });
    expect(outcome).toMatchObject({ runId, status: 'completed', output: { call: 2 } });
    expect(calls).toEqual([runId, runId]);
    const { history } = await client.getRunSteps(runId);
    expect(history.filter((h) => h.eventType === 'run.lease_recovered')).toEqual([
      expect.objectContaining({ data: { execution_seq: 1, recoveries: 1, attempt: 1 } }),
    ]);
    expect(dev.log.join('')).toContain('1 push execution(s) left running by a process that is gone');
  });
});
