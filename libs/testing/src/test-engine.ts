import { InProcessBus } from '@ironflow/bus';
import { CallScope } from '@ironflow/contracts';
import { Engine, EngineConfig } from '@ironflow/engine';
import { Dialect } from '@ironflow/store';
import { PauseGate } from './pause-gate';
import { TestStore, openTestStore } from './test-stores';

export const SCOPE: CallScope = { project: 'default', env: 'default' };

export interface TestEngine {
  engine: Engine;
  db: TestStore;
  gate: PauseGate;
  bus: InProcessBus;
  /** Stops the engine (no loops run unless `start` was called) and disposes the store. */
  close(): Promise<void>;
}

/** An engine assembled by hand over a fresh store, no HTTP (DESIGN.md "Testing"). No loops run. */
export async function openTestEngine(dialect: Dialect, config: Partial<EngineConfig> = {}): Promise<TestEngine> {
  const db = await openTestStore(dialect);
  const gate = new PauseGate();
  const bus = new InProcessBus();
  const engine = new Engine({ store: db.store, clock: db.clock, bus, pausePoints: gate, config: { leaseMs: 30_000, ...config } });
  return {
    engine,
    db,
    gate,
    bus,
    close: async () => {
      await engine.stop(1000);
      await bus.close();
      await db.dispose();
    },
  };
}
