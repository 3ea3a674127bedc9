/**
 * The push worker of `bench/compare` for Ironflow (cluster and dev), as its own process (forked
 * with IPC): serves `bench.one` (one step), `bench.parent` (invokes `bench.child`) and
 * `bench.child` (one step) over HTTP, registers them on `argv[2]` (the API) in environment
 * `argv[3]`, then sends `{ready: true}` to its parent.
 */
import { AddressInfo } from 'node:net';
import { createClient, createFunction, listen, serve } from '@ironflow/sdk';

const [serverUrl, environment] = process.argv.slice(2);

const one = createFunction<{ i: number }>({ id: 'bench.one', mode: 'push', triggers: [{ event: 'bench.one' }] }, async ({ event, step }) =>
  step.run('work', async () => ({ i: event.data.i })),
);
const child = createFunction<{ i: number }>({ id: 'bench.child', mode: 'push' }, async ({ event, step }) => step.run('work', async () => ({ i: event.data.i })));
const parent = createFunction<{ i: number }>({ id: 'bench.parent', mode: 'push', triggers: [{ event: 'bench.parent' }] }, async ({ event, step }) =>
  step.invoke('bench.child', { i: event.data.i }),
);

async function main(): Promise<void> {
  const server = await listen(0, serve({ functions: [one, child, parent], env: environment }));
  server.keepAliveTimeout = 60_000;
  const endpointUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  const client = createClient({ serverUrl, environment });
  for (const fn of [one, child, parent]) await client.registerFunction(fn, { endpointUrl });
  process.send?.({ ready: true });
  process.on('disconnect', () => process.exit(0));
  // An exit of its own (not the signal's default), so a `--cpu-prof` profile is written.
  process.once('SIGTERM', () => process.exit(0));
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
