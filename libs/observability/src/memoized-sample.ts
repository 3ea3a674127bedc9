/**
 * Wraps an async sampler for scrape-time gauges: calls within `reuseMs` of the last sample's start
 * share it, running or done (several gauges, one query); a sample that fails or takes
 * longer than `deadlineMs` resolves `undefined` (the gauges keep their last values) without
 * holding later scrapes: the next call after the deadline starts a new sample.
 */
export function memoizedSample<T>(sample: () => Promise<T>, options: { reuseMs: number; deadlineMs: number }, now: () => number = Date.now): () => Promise<T | undefined> {
  let current: { startedAt: number; value: Promise<T | undefined> } | undefined;
  return () => {
    const started = now();
    if (current && started - current.startedAt < options.reuseMs) return current.value;
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<undefined>((resolve) => {
      timer = setTimeout(() => resolve(undefined), options.deadlineMs);
      timer.unref();
    });
    const value = Promise.race([sample().catch(() => undefined), deadline]).finally(() => clearTimeout(timer));
    current = { startedAt: started, value };
    return value;
  };
}
