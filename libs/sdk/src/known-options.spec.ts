import { createClient } from './client';
import { serve } from './serve';
import { createWorker } from './worker-factory';

describe('unknown options are refused by name, not replaced by defaults', () => {
  it('createClient: a misspelt serverUrl is an error, not a client of localhost:9123', () => {
    expect(() => createClient({ serverURL: 'http://10.0.0.1:9123' } as never)).toThrow(
      expect.objectContaining({ code: 'VALIDATION_ERROR', message: 'createClient: unknown option(s), not options of this SDK: serverURL' }),
    );
    expect(createClient({ serverUrl: 'http://10.0.0.1:9123', apiKey: 'k', environment: 'e', timeoutMs: 5 }).serverUrl).toBe('http://10.0.0.1:9123');
  });

  it('a server URL without an http(s) scheme is refused, naming where it came from (else every call fails as unreachable)', () => {
    const refused = (message: string) => expect.objectContaining({ code: 'VALIDATION_ERROR', message });
    expect(() => createClient({ serverUrl: 'localhost:9123' })).toThrow(refused('serverUrl: "localhost:9123" is not an http:// or https:// URL (e.g. http://localhost:9123)'));
    expect(() => createWorker({ serverUrl: 'ftp://engine', functions: [] })).toThrow(refused('serverUrl: "ftp://engine" is not an http:// or https:// URL (e.g. http://localhost:9123)'));
    const saved = process.env.IRONFLOW_SERVER_URL;
    process.env.IRONFLOW_SERVER_URL = 'engine:9123';
    try {
      expect(() => createClient()).toThrow(refused('IRONFLOW_SERVER_URL: "engine:9123" is not an http:// or https:// URL (e.g. http://localhost:9123)'));
      expect(createClient({ serverUrl: 'https://engine.example/' }).serverUrl).toBe('https://engine.example');
    } finally {
      if (saved === undefined) delete process.env.IRONFLOW_SERVER_URL;
      else process.env.IRONFLOW_SERVER_URL = saved;
    }
  });

  it('client calls refuse an option they would drop, before sending anything (emit with a misspelt idempotencyKey would emit twice)', async () => {
    const client = createClient({ serverUrl: 'http://127.0.0.1:9' });
    const refused = (what: string, key: string) => expect.objectContaining({ code: 'VALIDATION_ERROR', message: `${what}: unknown option(s), not options of this SDK: ${key}` });
    await expect(client.emit('order.placed', {}, { idempotencykey: 'k-1' } as never)).rejects.toEqual(refused('emit', 'idempotencykey'));
    await expect(client.emitSync('order.placed', {}, { timeout: 5 } as never)).rejects.toEqual(refused('emitSync', 'timeout'));
    await expect(client.invoke('pay', {}, { timeout: 5 } as never)).rejects.toEqual(refused('invoke', 'timeout'));
    await expect(client.waitForRun('r-1', { timeout: 5 } as never)).rejects.toEqual(refused('waitForRun', 'timeout'));
    await expect(client.listRuns({ function: 'pay' } as never)).rejects.toEqual(refused('listRuns', 'function'));
    await expect(client.listEvents({ event: 'a' } as never)).rejects.toEqual(refused('listEvents', 'event'));
    await expect(client.registerFunction({ id: 'pay' }, { endpointURL: 'http://x' } as never)).rejects.toEqual(refused('registerFunction', 'endpointURL'));
    await expect(client.registerFunction({ id: 'pay', retries: 3, endpointUrl: 'http://x' } as never)).rejects.toEqual(refused('function "pay"', 'retries'));
  });

  it('createWorker over REST and over the stream', () => {
    expect(() => createWorker({ functions: [], pollInterval: 5, handleSignals: false } as never)).toThrow(
      expect.objectContaining({ code: 'VALIDATION_ERROR', message: 'createWorker: unknown option(s), not options of this SDK: pollInterval' }),
    );
    // `registerFunctions` is an option of the stream worker only.
    expect(() => createWorker({ transport: 'rest', functions: [], registerFunctions: false, handleSignals: false } as never)).toThrow(
      expect.objectContaining({ code: 'VALIDATION_ERROR', message: 'createWorker: unknown option(s), not options of this SDK: registerFunctions' }),
    );
    expect(() => createWorker({ transport: 'stream', functions: [], pollIntervalMs: 5, handleSignals: false } as never)).toThrow(
      expect.objectContaining({ code: 'VALIDATION_ERROR', message: 'createStreamWorker: unknown option(s), not options of this SDK: pollIntervalMs' }),
    );
  });

  it('createWorker refuses a transport it does not have (it built a REST worker for "grpc")', () => {
    for (const transport of ['grpc', 'Stream', '']) {
      expect(() => createWorker({ transport, functions: [], handleSignals: false } as never)).toThrow(
        expect.objectContaining({ code: 'VALIDATION_ERROR', message: `createWorker: transport is "rest" (the default) or "stream", not ${JSON.stringify(transport)}` }),
      );
    }
  });

  it('serve: a misspelt signingKey is an error, not an endpoint that skips the signature check', () => {
    expect(() => serve({ functions: [], signingkey: 'a-signing-key-of-16+' } as never)).toThrow(
      expect.objectContaining({ code: 'VALIDATION_ERROR', message: 'serve: unknown option(s), not options of this SDK: signingkey' }),
    );
    expect(typeof serve({ functions: [], signingKey: 'a-signing-key-of-16+', skipVerification: false, env: 'e' })).toBe('function');
  });
});
