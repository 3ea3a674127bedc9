import { IronflowError } from './errors';
import { createStreamWorker, StreamWorkerOptions } from './stream-worker';
import { createWorker as createRestWorker, Worker, WorkerOptions } from './worker';

/** Options of {@link createWorker}: the REST pull worker (default) or, with `transport: 'stream'`, the streaming worker. */
export type AnyWorkerOptions = (WorkerOptions & { transport?: 'rest' }) | (StreamWorkerOptions & { transport: 'stream' });

/**
 * Creates a pull worker. `transport: 'rest'` (default): the REST worker of WIRE-PROTOCOL.md 3
 * (see `WorkerOptions`). `transport: 'stream'`: the `WorkerService.Connect` stream worker of
 * section 4 over gRPC (see {@link createStreamWorker} and `StreamWorkerOptions`). Throws like
 * the worker it builds, and `IronflowError` (`VALIDATION_ERROR`) for another `transport`.
 */
export function createWorker(options: WorkerOptions & { transport?: 'rest' }): Worker;
export function createWorker(options: StreamWorkerOptions & { transport: 'stream' }): Worker;
export function createWorker(options: AnyWorkerOptions): Worker;
export function createWorker(options: AnyWorkerOptions): Worker {
  const transport: unknown = options.transport;
  if (transport !== undefined && transport !== 'rest' && transport !== 'stream') {
    throw new IronflowError(`createWorker: transport is "rest" (the default) or "stream", not ${JSON.stringify(transport)}`, { code: 'VALIDATION_ERROR', retryable: false });
  }
  if (options.transport === 'stream') {
    const { transport: _transport, ...stream } = options;
    return createStreamWorker(stream);
  }
  const { transport: _transport, ...rest } = options;
  return createRestWorker(rest);
}
