import { Bus } from '@ironflow/bus';
import { AuditRecorder, FollowUpTracker, SlotSet } from '@ironflow/follow-up';
import { EngineLogger, EngineMetrics } from '@ironflow/observability';
import { Clock, Store } from '@ironflow/store';
import { EngineConfig } from './config';
import { PausePoints } from './pause-points';

/** What every engine system receives: one typed bundle, no globals. */
export interface EngineResources {
  store: Store;
  bus: Bus;
  clock: Clock;
  config: EngineConfig;
  logger: EngineLogger;
  metrics: EngineMetrics;
  followUps: FollowUpTracker;
  pausePoints: PausePoints;
  /** Every workflow audit row passes here. */
  audit: AuditRecorder;
  /** Where API reads of `audit_events` go (`run get`): a small pool of its own on PostgreSQL. */
  auditReads: Store;
  /** Slots for follow-up store work (parent wakes): a quarter of the pool, 4 on SQLite. */
  wakeSlots: SlotSet;
  /**
   * The third set of slots, for best-effort store work of follow-ups (a run event's dead letter;
   * `boundedFollowUpWrite`): a quarter of the pool, 4 on SQLite.
   */
  followUpSlots: SlotSet;
}
