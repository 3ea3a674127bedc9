const http = require('http');
const { createFunction, serve } = require('/work/wt/trial/dist/libs/sdk/src/index.js');
const fs = require('fs');
const log = (m) => { fs.appendFileSync('/tmp/scratch/push-steps.log', `${new Date().toISOString()} ${process.pid} ${m}\n`); };
const fn = createFunction({ id: 'push.job', triggers: [{ event: 'push.go' }] }, async ({ event, step }) => {
  const a = await step.run('a', async () => { log(`a ${event.data.n}`); return 1; });
  const b = await step.run('b', async () => { log(`b start ${event.data.n}`); await new Promise((r) => setTimeout(r, event.data.ms ?? 5000)); log(`b end ${event.data.n}`); return a + 1; });
  await step.sleep('nap', '1s');
  return step.run('c', async () => { log(`c ${event.data.n}`); return b + 1; });
});
http.createServer(serve({ functions: [fn] })).listen(3472, async () => {
  const res = await fetch('http://localhost:9472/api/v1/functions', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ id: 'push.job', mode: 'push', endpointUrl: 'http://127.0.0.1:3472/', triggers: [{ event: 'push.go' }] }) });
  console.log('push ready', res.status, await res.text());
});
