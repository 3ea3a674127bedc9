import { Bus, InProcessBus, NatsBus } from '@ironflow/bus';
import { AuditWriter, FollowUpTracker, InProcessAuditSink, SlotSet, slotsFor } from '@ironflow/follow-up';
import { BlockingAuditSink } from './blocking-audit-sink';
import { randomBytes } from 'node:crypto';
import { FaultyBus } from './faulty-bus';
import { CallScope } from '@ironflow/contracts';
import { Engine, EngineConfig, EngineOptions } from '@ironflow/engine';
import { Dialect } from '@ironflow/store';
import { PauseGate } from './pause-gate';
import { TestStore, openTestStore } from './test-stores';

export const SCOPE: CallScope = { project: 'default', env: 'default' };

export interface TestEngineOptions {
  /** `nats`: the real NATS JetStream bus (IRONFLOW_TEST_NATS_URL); default in-process. */
  bus?: 'nats' | 'in-process';
  /** Replaces the follow-up tracker (e.g. `CrashingFollowUpTracker`). */
  followUps?: FollowUpTracker;
  /** The secrets key and API key options the engine (and a restarted one) gets. */
  security?: Pick<EngineOptions, 'secretsKey' | 'auth'>;
  /** Where the engine logs; default silent. */
  logger?: EngineOptions['logger'];
}

export interface TestEngine {
  engine: Engine;
  db: TestStore;
  gate: PauseGate;
  /** The engine's bus: a `FaultyBus` around the real one. */
  bus: FaultyBus;
  /** The engine's audit sink: the "block audit insert" hook around the in-process writer. */
  audit: BlockingAuditSink;
  /** A scope of its own (unique project and env), so subjects on a shared NATS do not mix. */
  scope: CallScope;
  /** A second engine over the same store, as a fresh node after a crash (its own bus and tracker; `config` overrides the first engine's). */
  restart(options?: TestEngineOptions & { config?: Partial<EngineConfig> }): Promise<Engine>;
  /** Stops the engine (no loops run unless `start` was called) and disposes the store. */
  close(): Promise<void>;
}

/** An engine assembled by hand over a fresh store, no HTTP (DESIGN.md "Testing"). No loops run. */
export async function openTestEngine(dialect: Dialect, config: Partial<EngineConfig> = {}, options: TestEngineOptions = {}): Promise<TestEngine> {
  const db = await openTestStore(dialect);
  const gate = new PauseGate();
  const openBus = async (kind = options.bus): Promise<Bus> => (kind === 'nats' ? NatsBus.connect({ url: natsUrl() }) : new InProcessBus());
  const bus = new FaultyBus(await openBus());
  const suffix = randomBytes(4).toString('hex');
  const scope: CallScope = { project: `p${suffix}`, env: `e${suffix}` };
  const audit = new BlockingAuditSink(new InProcessAuditSink(new AuditWriter(db.store, new SlotSet(slotsFor(dialect, 8)))));
  const engine = new Engine({ store: db.store, clock: db.clock, bus, pausePoints: gate, followUps: options.followUps, logger: options.logger, ...options.security, auditSink: audit, poolSize: 8, config: { leaseMs: 30_000, ...config } });
  const extra: { engine: Engine; bus: Bus }[] = [];
  return {
    engine,
    db,
    gate,
    bus,
    audit,
    scope,
    restart: async (restartOptions = {}) => {
      const reopened = await db.reopen();
      const nextBus = await openBus(restartOptions.bus ?? options.bus);
      const next = new Engine({
        store: reopened.store,
        clock: reopened.clock,
        bus: nextBus,
        pausePoints: gate,
        followUps: restartOptions.followUps,
        ...(restartOptions.security ?? options.security),
        config: { leaseMs: 30_000, ...config, ...restartOptions.config },
      });
      extra.push({ engine: next, bus: nextBus });
      return next;
    },
    close: async () => {
      for (const e of [engine, ...extra.map((x) => x.engine)]) await e.stop(1000);
      for (const b of [bus, ...extra.map((x) => x.bus)]) await b.close();
      await db.dispose();
    },
  };
}

function natsUrl(): string {
  const url = process.env.IRONFLOW_TEST_NATS_URL;
  if (!url) throw new Error('IRONFLOW_TEST_NATS_URL is not set (see libs/testing/src/global-setup.ts)');
  return url;
}
