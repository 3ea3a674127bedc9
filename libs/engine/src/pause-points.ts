/**
 * Named points between a read and a write where a test can hold a unit of work, to force an
 * interleaving (DESIGN.md "Testing"). Production code passes `noPausePoints`.
 */
export type PausePointName = 'report.afterRead' | 'cancel.afterRead' | 'wake.afterRead';

export interface PausePoints {
  reached(point: PausePointName, runId: string): Promise<void>;
}

export const noPausePoints: PausePoints = { reached: async () => undefined };
