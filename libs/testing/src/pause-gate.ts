import { PausePointName, PausePoints } from '@ironflow/engine';

/**
 * Pause points a test arms: the next unit of work that reaches `point` for `runId` stops there
 * until `release()`; `reached` resolves once it is held. Lets a test force one interleaving.
 */
export class PauseGate implements PausePoints {
  private armed = new Map<string, { reached: () => void; release: Promise<void> }>();

  arm(point: PausePointName, runId: string): { reached: Promise<void>; release: () => void } {
    let onReached!: () => void;
    let release!: () => void;
    const reached = new Promise<void>((resolve) => (onReached = resolve));
    const released = new Promise<void>((resolve) => (release = resolve));
    this.armed.set(`${point}:${runId}`, { reached: onReached, release: released });
    return { reached, release };
  }

  async reached(point: PausePointName, runId: string): Promise<void> {
    const key = `${point}:${runId}`;
    const gate = this.armed.get(key);
    if (!gate) return;
    this.armed.delete(key);
    gate.reached();
    await gate.release;
  }
}
