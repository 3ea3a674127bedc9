import { Worker, createWorker } from '@ironflow/sdk';
import { functions } from './functions';

/** Starts a pull worker for the example's functions (it registers them as pull functions). */
export async function startPullWorker(serverUrl?: string): Promise<Worker> {
  const worker = createWorker({ serverUrl, functions, pollIntervalMs: 200 });
  await worker.start();
  return worker;
}

if (require.main === module) {
  startPullWorker().then(
    (w) => {
      console.log(`order-fulfilment pull worker ${w.workerId} polling ${process.env.IRONFLOW_SERVER_URL ?? 'http://localhost:9123'}`);
      const stop = () => void w.drain().then(() => process.exit(0));
      process.on('SIGINT', stop);
      process.on('SIGTERM', stop);
    },
    (err: unknown) => { console.error(String(err)); process.exit(1); },
  );
}
