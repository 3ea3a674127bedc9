import { createClient } from './client';
import { createWorker } from './worker-factory';

describe('unknown options are refused by name, not replaced by defaults', () => {
  it('createClient: a misspelt serverUrl is an error, not a client of localhost:9123', () => {
    expect(() => createClient({ serverURL: 'http://10.0.0.1:9123' } as never)).toThrow(
      expect.objectContaining({ code: 'VALIDATION_ERROR', message: 'createClient: unknown option(s), not options of this SDK: serverURL' }),
    );
    expect(createClient({ serverUrl: 'http://10.0.0.1:9123', apiKey: 'k', environment: 'e', timeoutMs: 5 }).serverUrl).toBe('http://10.0.0.1:9123');
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
});
