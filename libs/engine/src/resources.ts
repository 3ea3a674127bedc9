import { Bus } from '@ironflow/bus';
import { FollowUpTracker } from '@ironflow/follow-up';
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
}
