import { Bus, InProcessBus, NatsBus } from '@ironflow/bus';
import { AuditWriter, FollowUpTracker, InProcessAuditSink, SlotSet, slotsFor } from '@ironflow/follow-up';
import { BlockingAuditSink } from './blocking-audit-sink';
import { randomBytes } from 'node:crypto';
import { FaultyBus } from './faulty-bus';
import { FaultyStore } from './faulty-store';
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
  /** The store's pool (PostgreSQL) and the engine's `poolSize`, which sizes its slot sets (default 8). */
  poolSize?: number;
}

export interface TestEngine {
  engine: Engine;
  db: TestStore;
  gate: PauseGate;
  /** The engine's bus: a `FaultyBus` around the real one. */
  bus: FaultyBus;
  /** The engine's store: a `FaultyStore` around `db.store` (the test's own reads use `db.store`). */
  faults: FaultyStore;
  /** The engine's audit sink: the "block audit insert" hook around the in-process writer (`auditOf(engine)` for a restarted one). */
  audit: BlockingAuditSink;
  /** A scope of its own (unique project and env), so subjects on a shared NATS do not mix. */
  scope: CallScope;
  /**
   * A second engine over the same store, as a fresh node after a crash or another node (its own
   * bus, tracker, `FaultyStore` (`faultsOf(engine)`) and audit sink (`auditOf(engine)`); `config`
   * overrides the first engine's).
   */
  restart(options?: TestEngineOptions & { config?: Partial<EngineConfig> }): Promise<Engine>;
  /** Stops the engine (no loops run unless `start` was called) and disposes the store. */
  close(): Promise<void>;
}

/**
 * What a test engine changes from the defaults: a 30 s lease, and audit rows sent as soon as a slot
 * frees (`auditLingerMs` 0): the `BlockingAuditSink` blocks a whole request when one of its rows
 * matches, so rows of different kinds must not share one unless a test asks for it.
 */
const TEST_ENGINE_CONFIG: Partial<EngineConfig> = { leaseMs: 30_000, auditLingerMs: 0 };

/** An engine assembled by hand over a fresh store, no HTTP (DESIGN.md "Testing"). No loops run. */
export async function openTestEngine(dialect: Dialect, config: Partial<EngineConfig> = {}, options: TestEngineOptions = {}): Promise<TestEngine> {
  const poolSize = options.poolSize ?? 8;
  const db = await openTestStore(dialect, poolSize);
  const gate = new PauseGate();
  const openBus = async (kind = options.bus): Promise<Bus> => (kind === 'nats' ? NatsBus.connect({ url: natsUrl() }) : new InProcessBus());
  const bus = new FaultyBus(await openBus());
  const suffix = randomBytes(4).toString('hex');
  const scope: CallScope = { project: `p${suffix}`, env: `e${suffix}` };
  const faults = new FaultyStore(db.store);
  const audit = new BlockingAuditSink(new InProcessAuditSink(new AuditWriter(db.store, new SlotSet(slotsFor(dialect, 8)))));
  const engine = new Engine({ store: faults, clock: db.clock, bus, pausePoints: gate, followUps: options.followUps, logger: options.logger, ...options.security, auditSink: audit, poolSize, config: { ...TEST_ENGINE_CONFIG, ...config } });
  auditSinks.set(engine, audit);
  const extra: { engine: Engine; bus: Bus }[] = [];
  return {
    engine,
    db,
    gate,
    bus,
    faults,
    audit,
    scope,
    restart: async (restartOptions = {}) => {
      const reopened = await db.reopen();
      const nextBus = await openBus(restartOptions.bus ?? options.bus);
      const nextAudit = new BlockingAuditSink(new InProcessAuditSink(new AuditWriter(reopened.store, new SlotSet(slotsFor(dialect, 8)))));
      const next = new Engine({
        store: new FaultyStore(reopened.store),
        clock: reopened.clock,
        bus: nextBus,
        pausePoints: gate,
        followUps: restartOptions.followUps,
        ...(restartOptions.security ?? options.security),
        auditSink: nextAudit,
        poolSize,
        config: { ...TEST_ENGINE_CONFIG, ...config, ...restartOptions.config },
      });
      auditSinks.set(next, nextAudit);
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

/** The audit sink of every engine `openTestEngine` built (and its restarts). */
const auditSinks = new WeakMap<Engine, BlockingAuditSink>();

/** The `BlockingAuditSink` an engine of `openTestEngine` (or its `restart`) writes its audit rows through. */
export function auditOf(engine: Engine): BlockingAuditSink {
  const sink = auditSinks.get(engine);
  if (!sink) throw new Error('this engine was not built by openTestEngine');
  return sink;
}

/** The `FaultyStore` an engine of `openTestEngine` (or its `restart`) runs on. */
export function faultsOf(engine: Engine): FaultyStore {
  const store = engine.resources.store;
  if (!(store instanceof FaultyStore)) throw new Error('this engine does not run on a FaultyStore');
  return store;
}
