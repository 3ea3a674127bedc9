/**
 * Polls `probe` until it returns a value that is not `undefined`/`false`, or throws at the deadline
 * with `what` and the last value seen. Tests wait on conditions, never on fixed sleeps.
 */
export async function waitFor<T>(what: string, probe: () => Promise<T | undefined | false> | T | undefined | false, timeoutMs = 10_000, everyMs = 20): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    last = await probe();
    if (last !== undefined && last !== false) return last as T;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}; last value: ${JSON.stringify(last)}`);
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}
