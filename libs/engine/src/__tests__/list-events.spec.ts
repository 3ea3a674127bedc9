import { EventView } from '@ironflow/contracts';
import { SCOPE, STORES, TestEngine, openTestEngine } from '@ironflow/testing';

/** `listEvents` (REST `GET /api/v1/events`): the event log of the caller's scope, newest first, paged. */
describe.each(STORES)('listing events [%s]', (dialect) => {
  let t: TestEngine;

  beforeEach(async () => {
    t = await openTestEngine(dialect);
  });
  afterEach(() => t.close());

  it('lists the events of the scope newest first, filtered by name, in pages that cover each event once', async () => {
    const emitted: string[] = [];
    for (let i = 0; i < 5; i++) emitted.push((await t.engine.api.trigger(SCOPE, { event: i % 2 ? 'order.paid' : 'order.placed', data: { i }, ...(i === 0 ? { idempotencyKey: 'k-0' } : {}) })).eventId);
    await t.engine.api.trigger({ project: 'default', env: 'other' }, { event: 'order.placed', data: {} });

    const all = await t.engine.api.listEvents(SCOPE, {});
    expect(all.nextCursor).toBe('');
    expect(all.events.map((e) => e.id).sort()).toEqual([...emitted].sort());
    const ts = all.events.map((e) => Date.parse(e.ts));
    expect(ts).toEqual([...ts].sort((a, b) => b - a));
    expect(all.events.find((e) => e.id === emitted[0])).toEqual({ id: emitted[0], name: 'order.placed', data: { i: 0 }, idempotencyKey: 'k-0', ts: expect.any(String) });
    expect(all.events.find((e) => e.id === emitted[1])).not.toHaveProperty('idempotencyKey');

    const paid = await t.engine.api.listEvents(SCOPE, { name: 'order.paid' });
    expect(paid.events.map((e) => e.id).sort()).toEqual([emitted[1], emitted[3]].sort());

    const seen: EventView[] = [];
    let cursor = '';
    for (let page = 0; page < 5; page++) {
      const res = await t.engine.api.listEvents(SCOPE, { limit: 2, cursor });
      seen.push(...res.events);
      cursor = res.nextCursor;
      if (!cursor) break;
      expect(res.events).toHaveLength(2);
    }
    expect(seen.map((e) => e.id)).toEqual(all.events.map((e) => e.id));
  });

  it('a cursor it did not return is a VALIDATION_ERROR', async () => {
    await expect(t.engine.api.listEvents(SCOPE, { cursor: 'nonsense' })).rejects.toMatchObject({ code: 'VALIDATION_ERROR' });
  });
});
