/**
 * Named points between a read and a write where a test can hold a unit of work, to force an
 * interleaving (DESIGN.md "Testing"). Production code passes `noPausePoints`.
 */
export type PausePointName =
  | 'report.afterRead'
  | 'cancel.afterRead'
  | 'wake.afterRead'
  /** A `cancel_on` cancel, between its locked read of the run and its commit. */
  | 'cancelOn.afterRead'
  /** A refused resume, between the wake's read of the parent and the failure's commit. */
  | 'admission.afterRead'
  /** Lease recovery, between the commit of an exhausted run's failure and its announcement. */
  | 'recovery.afterCommit';

export interface PausePoints {
  reached(point: PausePointName, runId: string): Promise<void>;
}

export const noPausePoints: PausePoints = { reached: async () => undefined };
