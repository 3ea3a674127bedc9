/**
 * SIGTERM / SIGINT for workers: one listener per signal serves every running worker. On a signal,
 * each registered worker's `stop()` runs (giving its in-flight jobs back to the engine); once they
 * are done, if nothing else listens to that signal (the app does not handle it itself), the signal
 * is raised again with Node's default action, so the process ends as the signal would have ended
 * it. An app that listens itself owns the shutdown: the process is left running.
 */
const SIGNALS = ['SIGTERM', 'SIGINT'] as const;
type StopFn = () => Promise<void>;

const stops = new Set<StopFn>();

function onSignal(signal: NodeJS.Signals): void {
  const pending = [...stops];
  stops.clear();
  detach();
  void Promise.allSettled(pending.map((stop) => stop())).then(() => {
    if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
  });
}

function attach(): void {
  for (const signal of SIGNALS) process.on(signal, onSignal);
}

function detach(): void {
  for (const signal of SIGNALS) process.removeListener(signal, onSignal);
}

/** Registers `stop` to run on SIGTERM / SIGINT; returns the function that unregisters it. */
export function stopOnSignals(stop: StopFn): () => void {
  if (stops.size === 0) attach();
  stops.add(stop);
  return () => {
    if (!stops.delete(stop)) return;
    if (stops.size === 0) detach();
  };
}
