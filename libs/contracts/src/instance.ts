/**
 * The instance authority as the admin API shows it (`GET /api/v1/instance`, `ironflow instance
 * status`; README "Freezing an instance").
 */
export interface InstanceStatusView {
  /** `thawed`: work is admitted; `frozen`: new work waits for the thaw. */
  state: 'thawed' | 'frozen';
  /** Bumped by every freeze and thaw. */
  version: number;
  /** When the current state began (store clock, ISO-8601); `null` when it never changed. */
  since: string | null;
  /** Who asked for it: `admin` (the admin key) or `anonymous` (an open server); `null` when unknown. */
  by: string | null;
  /** The reason given with it; `null` without one. */
  reason: string | null;
  /**
   * Work waiting for admission now: due queued segments, runs created and not yet admitted (held,
   * e.g. invoked children), due sleeps, ended children whose parent wake is pending, and the total.
   */
  held: { queued: number; admissions: number; sleeps: number; wakes: number; total: number };
}

/** The answer of a freeze or thaw: whether it changed the state (`false`: it was already there), and the status after it. */
export interface InstanceTransitionView {
  changed: boolean;
  status: InstanceStatusView;
}
