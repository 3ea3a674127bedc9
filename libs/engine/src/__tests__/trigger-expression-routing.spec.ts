import { EngineError } from '@ironflow/contracts';
import { SCOPE, STORES, TestEngine, openTestEngine } from '@ironflow/testing';
import { counterValue, countRows, registerPull } from './engine-kit.test';

/**
 * Trigger expressions (issue 9, item 3): a CEL `expression` that does not compile is refused at
 * registration naming its trigger; at emit, it decides whether its function starts a run; one that
 * fails on an event starts no run and is counted in `ironflow_trigger_expression_errors_total`.
 */
describe.each(STORES)('trigger expressions [%s]', (dialect) => {
  let t: TestEngine;

  beforeEach(async () => {
    t = await openTestEngine(dialect);
  });
  afterEach(() => t.close());

  it('registration refuses an expression that does not parse, naming the trigger, and registers nothing', async () => {
    const err = await t.engine.api
      .registerFunction(SCOPE, { id: 'big-orders', mode: 'pull', triggers: [{ event: 'order.placed' }, { event: 'order.placed', expression: 'event.data.amount >' }] })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(EngineError);
    expect((err as EngineError).code).toBe('VALIDATION_ERROR');
    expect((err as EngineError).message).toContain('triggers.1.expression');
    expect(await t.engine.api.listFunctions(SCOPE)).toEqual([]);
  });

  it('event.data.amount > 10 starts a run for 11 and none for 5; the event is logged either way', async () => {
    await registerPull(t, { id: 'big-orders', triggers: [{ event: 'order.placed', expression: 'event.data.amount > 10' }] });
    await registerPull(t, { id: 'all-orders', triggers: [{ event: 'order.placed' }] });
    const small = await t.engine.api.trigger(SCOPE, { event: 'order.placed', data: { amount: 5 } });
    const big = await t.engine.api.trigger(SCOPE, { event: 'order.placed', data: { amount: 11 } });
    const functionsOf = async (runIds: string[]) => Promise.all(runIds.map(async (id) => (await t.engine.api.getRun(SCOPE, id)).functionId));
    expect(await functionsOf(small.runIds)).toEqual(['all-orders']);
    expect((await functionsOf(big.runIds)).sort()).toEqual(['all-orders', 'big-orders']);
    expect(await countRows(t, 'events')).toBe(2);
  });

  it('an expression that errors on an event starts no run of its function and is counted; other functions still run', async () => {
    await registerPull(t, { id: 'big-orders', triggers: [{ event: 'order.placed', expression: 'event.data.amount > 10' }] });
    await registerPull(t, { id: 'all-orders', triggers: [{ event: 'order.placed' }] });
    const errors = () => counterValue(t.engine.resources.metrics.triggerExpressionErrors, { function_id: 'big-orders' });
    const started = await t.engine.api.trigger(SCOPE, { event: 'order.placed', data: { total: 99 } }); // no `amount`
    expect(started.runIds).toHaveLength(1);
    expect((await t.engine.api.getRun(SCOPE, started.runIds[0])).functionId).toBe('all-orders');
    expect(await errors()).toBe(1);
  });
});
