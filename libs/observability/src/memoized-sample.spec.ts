import { memoizedSample } from './memoized-sample';

describe('a scrape-time sample', () => {
  it('is shared by the calls within its reuse window and read again after it', async () => {
    let clock = 1000;
    let reads = 0;
    const latest = memoizedSample(async () => ++reads, { reuseMs: 1000, deadlineMs: 5000 }, () => clock);
    expect(await latest()).toBe(1);
    clock += 999;
    expect(await latest()).toBe(1);
    clock += 1;
    expect(await latest()).toBe(2);
    expect(reads).toBe(2);
  });

  it('that fails or outlives its deadline answers undefined, and the next call reads again instead of waiting on it', async () => {
    let clock = 0;
    const never = new Promise<number>(() => undefined);
    const samples: (() => Promise<number>)[] = [() => Promise.reject(new Error('store down')), () => never, () => Promise.resolve(7)];
    const latest = memoizedSample(() => samples.shift()!(), { reuseMs: 10, deadlineMs: 50 }, () => clock);
    expect(await latest()).toBeUndefined();
    clock += 10;
    const started = Date.now();
    expect(await latest()).toBeUndefined();
    expect(Date.now() - started).toBeGreaterThanOrEqual(45);
    clock += 10;
    expect(await latest()).toBe(7);
  });
});
