import { EngineError } from '@ironflow/contracts';
import { EngineMetrics } from '@ironflow/observability';
import { Store, isLockTimeout } from '@ironflow/store';

/**
 * The store units of work that commit run outcomes (each one's work calls `commitOutcome` or
 * `commitFencedOutcomes`): a worker's report, a group commit of push reports, a cancel, a
 * `cancel_on` cancel, a lease recovery (the exhausted one), a release past the recovery ceiling,
 * a step timeout, a wake failing its parent, a refused resume, a held run's admission (a refusal or a
 * quiet cancel). A test over the engine's source keeps this list complete.
 */
export const OUTCOME_UNITS = ['applyReport', 'commitOutcomes', 'cancelRun', 'cancelOnCancel', 'recoverLease', 'releaseExecution', 'stepTimeout', 'wakeParent', 'refuseResume', 'admitRun'] as const;

/**
 * Wraps the store port (a decorator, like the fault hooks): a unit of {@link OUTCOME_UNITS} that
 * throws counts in `ironflow_outcome_commit_errors_total{unit}` — the store refused or lost the
 * transaction (connection, lock timeout, constraint), so nothing committed and the run did not
 * end; the reporter retries or the next pass comes back. An {@link EngineError} thrown by the work
 * is a decision (STALE_EXECUTION, RUN_NOT_RUNNING…), not an error of the commit, and is not
 * counted; a `LockTimeoutError` (an `EngineError` the store raises at its lock limit) is counted. Every other member passes through unchanged.
 */
export function countOutcomeCommitErrors(store: Store, metrics: EngineMetrics): Store {
  const outcomeUnits = new Set<string>(OUTCOME_UNITS);
  for (const unit of OUTCOME_UNITS) metrics.outcomeCommitErrors.inc({ unit }, 0);
  const unitOfWork: Store['unitOfWork'] = (name, work, options) => {
    if (!outcomeUnits.has(name)) return store.unitOfWork(name, work, options);
    return store.unitOfWork(name, work, options).catch((err: unknown) => {
      if (!(err instanceof EngineError) || isLockTimeout(err)) metrics.outcomeCommitErrors.inc({ unit: name });
      throw err;
    });
  };
  // A proxy, so whatever else the port (or the adapter behind it) offers passes through as is.
  return new Proxy(store, {
    get(target, prop) {
      if (prop === 'unitOfWork') return unitOfWork;
      const value: unknown = Reflect.get(target, prop, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}
