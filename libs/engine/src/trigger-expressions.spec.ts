import { DEFAULT_RETRY, WireEvent } from '@ironflow/contracts';
import { EngineMetrics } from '@ironflow/observability';
import { FunctionRecord } from '@ironflow/store';
import { TriggerExpressions } from './trigger-expressions';

const fn = (triggers: FunctionRecord['definition']['triggers']): FunctionRecord => ({
  project: 'p', env: 'e', version: 1, createdAt: 0, updatedAt: 0,
  definition: { id: 'orders', name: 'orders', mode: 'pull', triggers, retry: DEFAULT_RETRY, timeoutMs: 1000, cancelOn: [] },
});
const event = (data: unknown, name = 'order.placed'): WireEvent => ({ id: 'ev-1', name, data, timestamp: '2024-01-01T00:00:00.000Z', version: 1 });

async function errorsOf(metrics: EngineMetrics, functionId: string): Promise<number> {
  const values = (await metrics.triggerExpressionErrors.get()).values;
  return values.find((v) => v.labels.function_id === functionId)?.value ?? 0;
}

describe('trigger expressions (CEL, @marcbachmann/cel-js)', () => {
  it.each([
    ['event.data.amount >', /Unexpected token/],
    ['data.amount > 10', /Unknown variable: data/],
    ['1 + 2', /evaluates to int, not bool/],
  ])('refuses %s at compile time, saying why', (expression, why) => {
    expect(() => TriggerExpressions.compile(expression)).toThrow(why);
  });

  it('event.data.amount > 10 accepts 11 and 10.5 and refuses 10 (JSON numbers compare with int literals)', () => {
    const expressions = new TriggerExpressions(new EngineMetrics());
    const f = fn([{ event: 'order.placed', expression: 'event.data.amount > 10' }]);
    expect(expressions.accepts(f, event({ amount: 11 }))).toBe(true);
    expect(expressions.accepts(f, event({ amount: 10.5 }))).toBe(true);
    expect(expressions.accepts(f, event({ amount: 10 }))).toBe(false);
  });

  it('sees the event as the handler does: name, id, data', () => {
    const expressions = new TriggerExpressions(new EngineMetrics());
    const f = fn([{ event: 'order.placed', expression: 'event.name == "order.placed" && event.id == "ev-1" && event.data.tags.exists(t, t == "vip")' }]);
    expect(expressions.accepts(f, event({ tags: ['new', 'vip'] }))).toBe(true);
    expect(expressions.accepts(f, event({ tags: ['new'] }))).toBe(false);
  });

  it('an expression that fails at run time does not match and is counted for its function', async () => {
    const metrics = new EngineMetrics();
    const expressions = new TriggerExpressions(metrics);
    const f = fn([{ event: 'order.placed', expression: 'event.data.amount > 10' }]);
    expect(expressions.accepts(f, event({ total: 99 }))).toBe(false);
    expect(expressions.accepts(f, event({ amount: 'eleven' }))).toBe(false);
    expect(await errorsOf(metrics, 'orders')).toBe(2);
    expect(expressions.accepts(f, event({ amount: 11 }))).toBe(true);
    expect(await errorsOf(metrics, 'orders')).toBe(2);
  });

  it('a trigger without an expression on the same event accepts every event; any matching expression is enough', () => {
    const expressions = new TriggerExpressions(new EngineMetrics());
    expect(expressions.accepts(fn([{ event: 'order.placed', expression: 'event.data.amount > 10' }, { event: 'order.placed' }]), event({ amount: 1 }))).toBe(true);
    const two = fn([{ event: 'order.placed', expression: 'event.data.amount > 10' }, { event: 'order.placed', expression: 'event.data.vip == true' }]);
    expect(expressions.accepts(two, event({ amount: 1, vip: true }))).toBe(true);
    expect(expressions.accepts(two, event({ amount: 1, vip: false }))).toBe(false);
    // Only the triggers naming the event count: another event's expression does not filter this one.
    expect(expressions.accepts(fn([{ event: 'order.placed' }, { event: 'other', expression: 'false' }]), event({}))).toBe(true);
  });
});
