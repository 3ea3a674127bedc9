import { ChildProcess, spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { DEFAULT_SERVER_URL, IronflowClient, createClient } from '@ironflow/sdk';
import { OrderPlaced } from './functions';
import { startPullWorker } from './pull-worker';
import { startPushServer } from './push-server';

/**
 * The README's first command: starts `ironflow dev` (unless one answers at the server URL), then
 * runs `order.placed` through the example once with a push endpoint and once with a pull worker,
 * printing each run with its steps, child run and retry. With `--exit` it stops everything after;
 * otherwise the dev server keeps running for `ironflow run list/get`. Exits 1 if a run does not
 * complete with the expected output.
 */
async function main(): Promise<void> {
  const exitAfter = process.argv.includes('--exit');
  const serverUrl = demoServerUrl(process.env);
  const client = createClient({ serverUrl });
  const cli = cliPrefix(serverUrl);
  const dev = (await isUp(client)) ? undefined : await startDevServer(serverUrl);

  const results: boolean[] = [];
  console.log('\n=== push: the engine calls the example over HTTP ===');
  const pushServer = await startPushServer(client, Number(process.env.PUSH_PORT ?? 3400));
  results.push(await placeOrder(client, 'A-1001', cli));
  await new Promise((r) => pushServer.close(r));

  console.log('\n=== pull: a worker polls the engine over REST ===');
  const worker = await startPullWorker(serverUrl);
  results.push(await placeOrder(client, 'A-1002', cli));
  await worker.stop();

  const ok = results.every(Boolean);
  console.log(`\n${ok ? 'both runs completed with the expected output' : 'a run did not complete as expected'}`);
  if (exitAfter || !dev) {
    dev?.kill('SIGTERM');
    process.exitCode = ok ? 0 : 1;
    return;
  }
  console.log(`\nIronflow dev keeps running at ${serverUrl} (Ctrl-C stops it); the runs UI is at ${serverUrl}/. Try:\n  ${cli} run list\n  ${cli} emit order.placed --data '{"orderId":"A-2000","customer":"you","items":[{"sku":"x","quantity":1,"unitPrice":5}]}' --wait`);
  const workerEnv = serverUrl === DEFAULT_SERVER_URL ? '' : `IRONFLOW_SERVER_URL=${serverUrl} `;
  console.log(`(the example workers have stopped: start one with \`${workerEnv}node dist/examples/order-fulfilment/src/pull-worker.js\`)`);
  dev.on('exit', () => process.exit(ok ? 0 : 1));
}

/**
 * The server the demo uses (and starts `ironflow dev` on when nothing answers there):
 * `IRONFLOW_SERVER_URL`, else `http://localhost:$IRONFLOW_PORT` (the dev server's own variable, so
 * `IRONFLOW_PORT=9400 npm run example` runs on 9400, not on 9123), else `http://localhost:9123`.
 * Empty variables count as unset. Throws on an `IRONFLOW_PORT` that is not a port number.
 */
function demoServerUrl(env: NodeJS.ProcessEnv): string {
  if (env.IRONFLOW_SERVER_URL) return env.IRONFLOW_SERVER_URL;
  const port = env.IRONFLOW_PORT;
  if (!port) return DEFAULT_SERVER_URL;
  if (!/^\d{1,5}$/.test(port) || Number(port) < 1 || Number(port) > 65535) throw new Error(`IRONFLOW_PORT: a port number (1-65535) is required; got ${JSON.stringify(port)}`);
  return `http://localhost:${port}`;
}

/** The CLI command the demo's hints print: with `--server` when the demo does not run on the default URL, so a copied hint reaches it. */
function cliPrefix(serverUrl: string): string {
  return serverUrl === DEFAULT_SERVER_URL ? 'npm run ironflow --' : `npm run ironflow -- --server ${serverUrl}`;
}

async function placeOrder(client: IronflowClient, orderId: string, cli: string): Promise<boolean> {
  const order: OrderPlaced = { orderId, customer: 'Ada Lovelace', items: [{ sku: 'loom-card', quantity: 3, unitPrice: 12.5 }, { sku: 'gear', quantity: 1, unitPrice: 40 }] };
  const result = await client.emitSync('order.placed', order, { timeoutMs: 60_000 });
  const detail = await client.getRunSteps(result.runId);
  const child = detail.children[0];
  const childDetail = child ? await client.getRunSteps(child.id) : undefined;
  console.log(`run ${result.runId} ${result.status} in ${result.durationMs} ms`);
  console.log(`output ${JSON.stringify(result.output)}`);
  console.log('steps');
  for (const s of detail.steps) console.log(`  ${s.type.padEnd(14)} ${s.name.padEnd(20)} ${s.status}${s.childRunId ? ` (child run ${s.childRunId})` : ''}`);
  if (child) {
    console.log(`child run ${child.id} ${child.functionId} ${child.status} on attempt ${child.attempt}`);
    for (const h of childDetail?.history ?? []) console.log(`  ${h.eventType}: ${h.cause ?? ''}`);
  }
  console.log(`inspect: ${cli} run get ${result.runId}`);
  const out = result.output as { status?: string; total?: number; chargedOnAttempt?: number; trackingNumber?: string };
  return result.status === 'completed' && out.status === 'shipped' && out.total === 77.5 && out.chargedOnAttempt === 2 && out.trackingNumber === `TRK-${orderId}`;
}

async function isUp(client: IronflowClient): Promise<boolean> {
  try {
    await client.health();
    return true;
  } catch {
    return false;
  }
}

/** A signal is stopping the demo and its dev server: a call the stop cuts short is not a failure to report. */
let stopping = false;

async function startDevServer(serverUrl: string): Promise<ChildProcess> {
  const port = new URL(serverUrl).port || '9123';
  const cli = resolve(__dirname, '../../../apps/ironflow/src/main.js');
  const child = spawn(process.execPath, [cli, 'dev', '--port', port], { stdio: ['ignore', 'inherit', 'inherit'] });
  // The dev server is the demo's own child: it stops with the demo however the demo ends (an error,
  // a SIGTERM or SIGINT sent to the demo alone), never left running behind it.
  process.on('exit', () => child.kill('SIGTERM'));
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      stopping = true;
      child.once('exit', () => process.exit(signal === 'SIGINT' ? 130 : 143));
      child.kill(signal);
    });
  }
  const client = createClient({ serverUrl });
  const deadline = Date.now() + 20_000;
  while (!(await isUp(client))) {
    if (child.exitCode !== null) throw new Error(`ironflow dev exited with code ${child.exitCode}`);
    if (Date.now() > deadline) throw new Error('ironflow dev did not answer within 20 s');
    await new Promise((r) => setTimeout(r, 100));
  }
  return child;
}

main().catch((err: unknown) => {
  if (stopping) return; // the dev server's exit ends the demo (130 or 143)
  console.error(err instanceof Error ? err.stack ?? err.message : String(err));
  process.exit(1);
});
