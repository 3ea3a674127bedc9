/**
 * A worker process for the stop tests (test-e2e/sdk/worker-stop.spec.ts): our SDK from the build
 * output, one function whose step takes 60 s (it ignores the abort signal, as user code often
 * does), default signal handling (SIGTERM stops the worker, which gives its job back, then the
 * process ends as SIGTERM would end it). Configured by environment: WORKER_TRANSPORT (rest |
 * stream), IRONFLOW_SERVER_URL, FUNCTION_ID, EVENT_NAME. Prints `ready` once started and
 * `step-started <runId>` when the long step begins.
 */
const { resolve } = require('node:path');
const { createFunction, createWorker } = require(resolve(__dirname, '../../dist/libs/sdk/src/index.js'));

const fn = createFunction({ id: process.env.FUNCTION_ID, triggers: [{ event: process.env.EVENT_NAME }] }, async ({ step, run }) => {
  const slow = await step.run('long', async () => {
    process.stdout.write(`step-started ${run.id}\n`);
    await new Promise((done) => setTimeout(done, 60_000));
    return 'slow';
  });
  return { by: 'first', slow };
});

const worker = createWorker({
  transport: process.env.WORKER_TRANSPORT === 'stream' ? 'stream' : 'rest',
  serverUrl: process.env.IRONFLOW_SERVER_URL,
  functions: [fn],
  // The poll period is a REST worker's option; the stream worker refuses it (it has no poll).
  ...(process.env.WORKER_TRANSPORT === 'stream' ? {} : { pollIntervalMs: 50 }),
  logger: { warn: () => undefined, error: (m) => process.stderr.write(`${m}\n`) },
});
worker.start().then(() => process.stdout.write('ready\n'), (err) => {
  process.stderr.write(`start failed: ${err}\n`);
  process.exit(1);
});
