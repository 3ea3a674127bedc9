import { stopOnSignals } from './signals';

describe('stopOnSignals', () => {
  it('stops every registered worker on SIGTERM, once, and leaves the exit to an app that listens itself', async () => {
    const before = process.listenerCount('SIGTERM');
    const stopped: string[] = [];
    const unregisterA = stopOnSignals(async () => void stopped.push('a'));
    stopOnSignals(async () => void stopped.push('b'));
    const unregisterC = stopOnSignals(async () => void stopped.push('c'));
    unregisterC();
    expect(process.listenerCount('SIGTERM')).toBe(before + 1);
    expect(process.listenerCount('SIGINT')).toBeGreaterThanOrEqual(1);

    let appSawIt = false;
    const app = () => (appSawIt = true); // the app owns shutdown: the process must not be killed
    process.on('SIGTERM', app);
    try {
      process.emit('SIGTERM', 'SIGTERM');
      await new Promise((resolve) => setImmediate(resolve));
      expect(stopped.sort()).toEqual(['a', 'b']);
      expect(appSawIt).toBe(true);
      // Our listeners are gone after the signal; unregistering again is harmless.
      expect(process.listenerCount('SIGTERM')).toBe(before + 1);
      unregisterA();
      process.emit('SIGTERM', 'SIGTERM');
      await new Promise((resolve) => setImmediate(resolve));
      expect(stopped).toHaveLength(2);
    } finally {
      process.removeListener('SIGTERM', app);
    }
  });

  it('removes its listeners when the last worker unregisters', () => {
    const before = [process.listenerCount('SIGTERM'), process.listenerCount('SIGINT')];
    const unregister = stopOnSignals(async () => undefined);
    expect([process.listenerCount('SIGTERM'), process.listenerCount('SIGINT')]).toEqual([before[0] + 1, before[1] + 1]);
    unregister();
    expect([process.listenerCount('SIGTERM'), process.listenerCount('SIGINT')]).toEqual(before);
  });
});
