import { drainPlan } from './shutdown';

describe('drainPlan', () => {
  it('drains for the cap less a quarter (at most 2000 ms) and gives the listener at most 2000 ms, ending before the cap', () => {
    let now = 1_000;
    const plan = drainPlan(30_000, () => now);
    expect(plan.drainMs).toBe(28_000);
    now += 28_000;
    expect(plan.graceLeft()).toBe(1_000); // half the 2000 ms reserve is left for closing the store
    now = 1_000;
    expect(plan.graceLeft()).toBe(2_000);
  });

  it('a short cap keeps every phase inside it', () => {
    let now = 0;
    const plan = drainPlan(3_000, () => now);
    expect(plan.drainMs).toBe(2_250);
    now = 2_250;
    expect(plan.graceLeft()).toBe(375);
    now = 5_000;
    expect(plan.graceLeft()).toBe(0);
  });
});
