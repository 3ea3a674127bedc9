import { RetryConfig } from '@ironflow/contracts';

/**
 * Delay before the attempt after `failedAttempt` (1-based): `initialDelayMs × backoffFactor^(failedAttempt-1)`,
 * capped at `maxDelayMs`. With the defaults: 1 s, 2 s, 4 s … 300 s.
 */
export function retryDelayMs(retry: RetryConfig, failedAttempt: number): number {
  const delay = retry.initialDelayMs * Math.pow(retry.backoffFactor, Math.max(0, failedAttempt - 1));
  // A factor so large that the product overflows (or 0 × ∞) waits the cap, never NaN or ∞.
  if (!Number.isFinite(delay)) return retry.maxDelayMs;
  return Math.max(0, Math.min(Math.round(delay), retry.maxDelayMs));
}
