import { StepResult } from '@ironflow/contracts';

/**
 * Sleeps follow the engine's clock (DESIGN.md principle 6; README "Sleeps and clocks"). A sleep's
 * `until` is a time on the worker's clock, which may be off. The engine corrects or bounds it
 * with the report's own times, against the store-clock time the report was received (`now`):
 *
 * 1. The report carries its send time (`sent_at`, our SDKs on every transport): the sleep lasts
 *    what the worker asked, `until − sent_at`, from receipt: `wakeAt = now + (until − sentAt)`.
 * 2. Otherwise, when the engine knows the worker's clock read at least W at a store-clock time E
 *    (the latest `ended_at` of the steps in this report, or of the steps this execution
 *    checkpointed, each against when its report arrived), the worker's clock is at least
 *    `W − E` ahead (`aheadAtLeastMs`, the largest such bound), and the sleep never wakes later
 *    than `until − aheadAtLeastMs`: a clock ahead of the engine's cannot park a sleep longer than
 *    asked. A bound that says "behind" changes nothing (a step may simply have ended a while
 *    before the report).
 * 3. Without either, `until` is taken as sent.
 *
 * The result is at most the latest storable time.
 */
export function sleepWakeAt(untilMs: number, now: number, evidence: { sentAt?: number; aheadAtLeastMs?: number | null }): number {
  let wakeAt = untilMs;
  if (evidence.sentAt !== undefined) wakeAt = now + (untilMs - evidence.sentAt);
  else if (evidence.aheadAtLeastMs !== undefined && evidence.aheadAtLeastMs !== null && evidence.aheadAtLeastMs > 0) wakeAt = untilMs - evidence.aheadAtLeastMs;
  return Math.min(Math.round(wakeAt), MAX_TIME_MS);
}

/**
 * How far the worker's clock is at least ahead of `now`, from the latest `ended_at` among
 * `steps` (a time it has already passed); `undefined` when no step carries a time.
 */
export function workerAheadAtLeast(steps: readonly StepResult[] | undefined, now: number): number | undefined {
  let latest: number | undefined;
  for (const step of steps ?? []) {
    const t = typeof step.ended_at === 'string' ? Date.parse(step.ended_at) : NaN;
    if (Number.isFinite(t) && (latest === undefined || t > latest)) latest = t;
  }
  return latest === undefined ? undefined : latest - now;
}

/** The latest time the engine stores (the largest valid JavaScript Date), in ms since the epoch. */
export const MAX_TIME_MS = 8.64e15;

/** A worker's `sent_at` (ISO-8601) as ms; `undefined` when absent or not a time (then it is ignored). */
export function parseSentAt(value: unknown): number | undefined {
  if (typeof value !== 'string') return undefined;
  const ms = Date.parse(value);
  return Number.isFinite(ms) ? ms : undefined;
}
