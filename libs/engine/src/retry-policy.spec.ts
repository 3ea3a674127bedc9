import { DEFAULT_RETRY } from '@ironflow/contracts';
import { retryDelayMs } from './retry-policy';

describe('retryDelayMs', () => {
  it('follows initialDelayMs × backoffFactor^(failedAttempt-1) with the defaults: 1 s, 2 s, 4 s, 8 s', () => {
    expect([1, 2, 3, 4].map((attempt) => retryDelayMs(DEFAULT_RETRY, attempt))).toEqual([1000, 2000, 4000, 8000]);
  });

  it('caps the delay at maxDelayMs', () => {
    const retry = { maxAttempts: 20, initialDelayMs: 1000, backoffFactor: 2, maxDelayMs: 300_000 };
    expect(retryDelayMs(retry, 9)).toBe(256_000);
    expect(retryDelayMs(retry, 10)).toBe(300_000); // 512 s capped
    expect(retryDelayMs(retry, 11)).toBe(300_000);
    expect(retryDelayMs(retry, 1000)).toBe(300_000); // factor^n overflows to Infinity, still capped
  });

  it('caps even the first delay when initialDelayMs exceeds maxDelayMs', () => {
    expect(retryDelayMs({ maxAttempts: 3, initialDelayMs: 10_000, backoffFactor: 2, maxDelayMs: 5_000 }, 1)).toBe(5_000);
  });

  it('keeps a constant delay with backoffFactor 1 and none with initialDelayMs 0', () => {
    const constant = { maxAttempts: 5, initialDelayMs: 750, backoffFactor: 1, maxDelayMs: 300_000 };
    expect([1, 2, 3].map((a) => retryDelayMs(constant, a))).toEqual([750, 750, 750]);
    expect(retryDelayMs({ ...constant, initialDelayMs: 0, backoffFactor: 3 }, 4)).toBe(0);
  });

  it('rounds fractional factors to whole ms', () => {
    const retry = { maxAttempts: 5, initialDelayMs: 1000, backoffFactor: 1.5, maxDelayMs: 300_000 };
    expect([1, 2, 3, 4].map((a) => retryDelayMs(retry, a))).toEqual([1000, 1500, 2250, 3375]);
    expect(retryDelayMs({ ...retry, initialDelayMs: 333, backoffFactor: 1.1 }, 2)).toBe(366);
  });

  it('treats an attempt below 1 as the first', () => {
    expect(retryDelayMs(DEFAULT_RETRY, 0)).toBe(1000);
  });

  it('waits the cap, never NaN, when 0 × an overflowing factor', () => {
    expect(retryDelayMs({ maxAttempts: 100, initialDelayMs: 0, backoffFactor: 1e308, maxDelayMs: 5_000 }, 50)).toBe(5_000);
  });
});
