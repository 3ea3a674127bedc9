import type { ProcessLogger } from '@ironflow/observability';
import type { RunningServer } from './server';

/**
 * How a shutdown spends its hard cap `capMs` (`IRONFLOW_SHUTDOWN_TIMEOUT_MS`, default 30000):
 * the engine and the sync calls in flight drain for `drainMs` (the cap less a reserve of a
 * quarter of it, at most 2000 ms); then the listener closes, giving the requests still in flight
 * `graceLeft()` (at most 2000 ms, and never past half the reserve before the cap: connections that
 * stay open, such as worker streams, are cut then); the rest closes the bus and the store.
 */
export function drainPlan(capMs: number, now: () => number = Date.now): { drainMs: number; graceLeft(): number } {
  const started = now();
  const reserveMs = Math.min(2000, Math.floor(capMs / 4));
  return {
    drainMs: capMs - reserveMs,
    graceLeft: () => Math.max(0, Math.min(2000, started + capMs - Math.ceil(reserveMs / 2) - now())),
  };
}

/**
 * On SIGTERM or SIGINT: logs, drains and stops `server` (`RunningServer.close`) and exits 0; a
 * hard cap of `settings.shutdownTimeoutMs` exits 1 whatever is still running (a push call that
 * never answers, a stuck follow-up). A second signal changes nothing.
 */
export function exitOnSignals(server: RunningServer, logger: ProcessLogger): void {
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    const capMs = server.runtime.settings.shutdownTimeoutMs;
    logger.log(`${signal}: draining (exit within ${capMs} ms)`, { signal });
    const cap = setTimeout(() => {
      logger.fatal(`shutdown cap of ${capMs} ms reached: exiting before the drain finished`, { shutdown_timeout_ms: capMs });
      process.exit(1);
    }, capMs);
    cap.unref();
    server.close().then(
      () => {
        logger.log('stopped');
        process.exit(0);
      },
      (err: unknown) => {
        logger.error('shutdown failed', { error: err instanceof Error ? err.message : String(err) });
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}
