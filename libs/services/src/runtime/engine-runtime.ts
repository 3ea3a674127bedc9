import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { Bus, BusNamespace, InProcessBus, NatsBus } from '@ironflow/bus';
import { AuditSink, AuditWriter, InProcessAuditSink, NatsAuditSink, SlotSet, StoreAuditFates, slotsFor } from '@ironflow/follow-up';
import { Engine } from '@ironflow/engine';
import { EngineLogger, EngineMetrics } from '@ironflow/observability';
import { Store, openStore } from '@ironflow/store';
import { IronflowSettings, SettingsError } from './settings';
import { redactDatabaseUrl } from './redact-database-url';
import { isGatewayAlone } from './gateway-alone';

/**
 * The one core a process shares across its service modules (DESIGN.md "Deployables"): one
 * store, bus, engine and metrics registry. Built once, closed once.
 */
export class EngineRuntime {
  private constructor(
    readonly settings: IronflowSettings,
    readonly engine: Engine,
    readonly store: Store,
    readonly bus: Bus,
    readonly metrics: EngineMetrics,
    /** The audit-writer's side: used by the audit-writer service, and in-process without NATS. */
    readonly auditWriter: AuditWriter,
    /** The small pool `run get` reads `audit_events` through (the store itself on SQLite). */
    private readonly auditReads: Store,
  ) {}

  /**
   * Opens the store (running migrations), the bus (NATS JetStream when `natsUrl` is set, creating
   * its streams; else in-process) and builds the engine. On a store held exclusively
   * (`exclusiveStore` on SQLite), expires the push leases a killed process left
   * (`LeaseRecoverySystem.expireLeftoverPushLeases`). `options.pushConcurrency`: the engine's push
   * slots, when not the default 16 (an api-gateway's, {@link pushSlotsFor}). Throws when either
   * cannot be opened.
   */
  static async open(settings: IronflowSettings, logger: EngineLogger, options: { pushConcurrency?: number } = {}): Promise<EngineRuntime> {
    if (settings.databaseUrl.startsWith('sqlite:') && !settings.databaseUrl.includes(':memory:')) {
      mkdirSync(dirname(settings.databaseUrl.slice('sqlite:'.length)) || '.', { recursive: true });
    }
    const { store, clock, exclusive } = await openStore({ url: settings.databaseUrl, poolSize: settings.poolSize, exclusive: settings.exclusiveStore }).catch((err: unknown) => {
      const reason = err instanceof Error ? err.message : String(err);
      const hint = /locked|busy/i.test(reason) ? ' (is another ironflow dev using this file? stop it, or use --db)' : '';
      throw new SettingsError(`IRONFLOW_DATABASE_URL: cannot open the store at ${redactDatabaseUrl(settings.databaseUrl)}: ${reason}${hint}`);
    });
    // `run get` reads audit rows through a pool of its own (PostgreSQL), never the engine's.
    const auditReads = store.dialect === 'postgres' ? (await openStore({ url: settings.databaseUrl, poolSize: AUDIT_READ_POOL_SIZE }).catch(async (err: unknown) => { await store.close(); throw err; })).store : store;
    let bus: Bus;
    try {
      bus = settings.natsUrl
        ? await NatsBus.connect({ url: settings.natsUrl, name: `ironflow-${settings.clusterId}-${settings.nodeId}`, namespace: new BusNamespace(settings.clusterId) })
        : new InProcessBus();
    } catch (err) {
      await store.close();
      if (auditReads !== store) await auditReads.close();
      throw new SettingsError(`NATS_URL: cannot connect to NATS at ${settings.natsUrl}: ${err instanceof Error ? err.message : String(err)}`);
    }
    const metrics = new EngineMetrics({ defaultMetrics: true });
    const auditWriter = new AuditWriter(store, new SlotSet(slotsFor(store.dialect, settings.poolSize)));
    const auditSink: AuditSink = bus instanceof NatsBus ? new NatsAuditSink(bus, undefined, new StoreAuditFates(store), (fate, rows) => metrics.auditUnansweredRows.inc({ fate }, rows), () => metrics.auditWriteRetries.inc()) : new InProcessAuditSink(auditWriter);
    const engine = new Engine({
      auditSink,
      auditReadStore: auditReads,
      poolSize: settings.poolSize,
      store,
      clock,
      bus,
      logger,
      metrics,
      secretsKey: settings.secretsKey,
      auth: { requireApiKey: settings.requireApiKey, adminKey: settings.adminKey, cacheMs: settings.apiKeyCacheMs },
      config: {
        nodeId: settings.nodeId,
        leaseMs: settings.leaseMs,
        tickMs: settings.tickMs,
        dispatchPollMs: settings.dispatchPollMs,
        scanMs: settings.scanMs,
        maxPayloadBytes: settings.maxPayloadBytes,
        streamMaxMessageBytes: settings.streamMaxMessageBytes,
        pushAllowedHosts: settings.pushAllowedHosts,
        cronCatchUpMs: settings.cronCatchUpMs,
        triggerForwardTimeoutMs: settings.triggerForwardTimeoutMs,
        forwardedTriggerWaitMs: settings.forwardedTriggerWaitMs,
        ...(options.pushConcurrency !== undefined ? { pushConcurrency: options.pushConcurrency } : {}),
        ...(settings.signingKey ? { signingKey: settings.signingKey } : {}),
      },
    });
    // A store this process holds alone (`ironflow dev` on SQLite) has no other live node: push leases
    // left in it are a killed process's, recovered by the first capacity scan, not after `leaseMs`.
    // Before any loop starts (the services start theirs after `open`), so no lease of ours is there yet.
    if (exclusive) await engine.recovery.expireLeftoverPushLeases();
    return new EngineRuntime(settings, engine, store, bus, metrics, auditWriter, auditReads);
  }

  private closed = false;
  /** True once shutdown began: `/ready` answers 503 so a load balancer stops sending work. */
  draining = false;

  /** Stops the engine's loops (draining work in flight), then closes the bus and the store. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.draining = true;
    await this.engine.stop();
    await this.bus.close();
    if (this.auditReads !== this.store) await this.auditReads.close();
    await this.store.close();
  }
}

/** Connections of the pool that `run get`'s audit reads use on PostgreSQL. */
const AUDIT_READ_POOL_SIZE = 2;

/**
 * The push slots of a process serving `services`: an api-gateway without a dispatcher calls only
 * the push runs of its TriggerSync calls, `settings.gatewayPushSlots` at once
 * (`IRONFLOW_GATEWAY_PUSH_SLOTS`, default 128); any other keeps the engine's default (16 per
 * dispatcher). `undefined` for the default.
 */
export function pushSlotsFor(settings: Pick<IronflowSettings, 'gatewayPushSlots'>, services: readonly string[]): number | undefined {
  return isGatewayAlone(services) ? settings.gatewayPushSlots : undefined;
}
