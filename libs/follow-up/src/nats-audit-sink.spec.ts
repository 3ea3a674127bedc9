import { randomBytes } from 'node:crypto';
import { JSONCodec, NatsConnection, connect } from 'nats';
import { BusNamespace, NatsBus } from '@ironflow/bus';
import { TestStore, dropNamespaceStreams, openTestStore, waitFor } from '@ironflow/testing';
import { AuditRecorder, ScopedAuditRow } from './audit-recorder';
import { AuditWriter } from './audit-writer';
import { AuditWriteRequest, NatsAuditSink, auditWriteSubject } from './nats-audit-sink';
import { SlotSet } from './slot-set';
import { StoreAuditFates } from './store-audit-fates';

/** Audit rows of one run each, all of project `p` and env `e`. */
const row = (runId: string): ScopedAuditRow => ({ project: 'p', env: 'e', runId, functionId: 'f', eventType: 'run.created' });

/**
 * Real PostgreSQL and NATS for the tests of a describe, opened before each and closed after: a
 * store, the sink's bus in a namespace of the describe's own, and a raw connection for stand-in
 * audit-writers; `stored` reads the run ids of the audit rows written, in insert order.
 */
function realParts() {
  const namespace = new BusNamespace(`t${randomBytes(4).toString('hex')}`);
  const parts = {} as { db: TestStore; bus: NatsBus; responder: NatsConnection };
  beforeEach(async () => {
    parts.db = await openTestStore('postgres');
    parts.bus = await NatsBus.connect({ url: process.env.IRONFLOW_TEST_NATS_URL!, namespace });
    parts.responder = await connect({ servers: process.env.IRONFLOW_TEST_NATS_URL! });
  });
  afterEach(async () => {
    await parts.responder.close();
    await parts.bus.close();
    await parts.db.dispose();
  });
  afterAll(() => dropNamespaceStreams(namespace, process.env.IRONFLOW_TEST_NATS_URL!));
  const stored = () => parts.db.store.read('t', (tx) => tx.query<{ run_id: string }>(`SELECT run_id FROM audit_events ORDER BY id`)).then((rows) => rows.map((r) => r.run_id));
  return { namespace, parts, stored };
}

/**
 * The sender's side of an audit write that gets no answer (issue 10: "lost rows are counted
 * exactly"), on real NATS and PostgreSQL. A stand-in audit-writer answers nothing: it stores the
 * rows and dies before replying, or it never gets to them.
 */
describe('NatsAuditSink with no answer [postgres]', () => {
  const { namespace, parts, stored } = realParts();

  /** Answers nothing; with `store`, first writes the request's rows as the audit-writer would (a writer killed after its commit). */
  async function silentWriter(store: boolean): Promise<{ done: Promise<void> }> {
    const writer = new AuditWriter(parts.db.store, new SlotSet(1));
    const sub = parts.responder.subscribe(namespace.subject(auditWriteSubject('p', 'e')), { max: 1 });
    await parts.responder.flush(); // the server knows the subscription before the sink's request
    const done = (async () => {
      for await (const msg of sub) {
        const { data } = msg.json<{ data: AuditWriteRequest }>();
        // Its own budget (the default 5 s), so a loaded machine cannot make it miss the rows.
        if (store) await writer.write(data.rows, { requestId: data.requestId });
      }
    })();
    return { done };
  }

  it('rows a writer stored before dying unanswered are known as written, not counted as lost', async () => {
    const writing = await silentWriter(true);
    // The request times out for real; its error surfaces once the writer has committed (ordering, not timing).
    const request = parts.bus.request.bind(parts.bus);
    jest.spyOn(parts.bus, 'request').mockImplementation((...args) => request(...args).catch(async (err: unknown) => { await writing.done; throw err; }));
    const unanswered = jest.fn();
    const sink = new NatsAuditSink(parts.bus, 300, new StoreAuditFates(parts.db.store), unanswered);
    await sink.write([row('stored')], { budgetMs: 500, signal: new AbortController().signal });
    await writing.done;
    expect(await stored()).toEqual(['stored']);
    expect(unanswered.mock.calls).toEqual([['written', 1]]);
  });

  it('rows no writer got to are given up and counted as lost; a writer that gets to them later does not store them', async () => {
    const reached = await silentWriter(false);
    const unanswered = jest.fn();
    const sink = new NatsAuditSink(parts.bus, 300, new StoreAuditFates(parts.db.store), unanswered);
    await expect(sink.write([row('late')], { budgetMs: 500, signal: new AbortController().signal })).rejects.toMatchObject({ name: 'AuditNotWritten', reason: 'budget' });
    expect(unanswered.mock.calls).toEqual([['given_up', 1]]);
    await reached.done;
    const [fate] = await parts.db.store.read('t', (tx) => tx.query<{ request_id: string; fate: string }>(`SELECT request_id, fate FROM audit_write_fates`));
    expect(fate.fate).toBe('given_up');
    // A writer late past its sender (a stuck process, a redelivered request) stores nothing of it.
    await expect(new AuditWriter(parts.db.store, new SlotSet(1)).write([row('late')], { requestId: fate.request_id })).rejects.toMatchObject({ reason: 'budget' });
    expect(await stored()).toEqual([]);
  });

  it('without a store to ask, rows with no answer are counted as lost (the sender cannot tell)', async () => {
    const writing = await silentWriter(true);
    const request = parts.bus.request.bind(parts.bus);
    jest.spyOn(parts.bus, 'request').mockImplementation((...args) => request(...args).catch(async (err: unknown) => { await writing.done; throw err; }));
    const unanswered = jest.fn();
    const sink = new NatsAuditSink(parts.bus, 300, undefined, unanswered);
    await expect(sink.write([row('unknown')], { budgetMs: 500, signal: new AbortController().signal })).rejects.toThrow(/did not answer/);
    expect(unanswered.mock.calls).toEqual([['unknown', 1]]);
    await writing.done;
    expect(await stored()).toEqual(['unknown']);
  });
});

/**
 * A request no audit-writer answers (NATS no responders, e.g. while the audit-writer restarts)
 * reached no writer, so the sink sends it again with backoff within the rows' budget (DESIGN.md
 * "Audit"), on real NATS and PostgreSQL. A counting wrapper around the bus's `request` sees each
 * request and its outcome.
 */
describe('NatsAuditSink with no audit-writer subscribed [postgres]', () => {
  const codec = JSONCodec();
  const { namespace, parts, stored } = realParts();

  /** Counts the bus's requests and their failures; `onFailure` runs before the failure reaches the sink. */
  function countRequests(onFailure: (failures: number) => Promise<void> | void = () => undefined) {
    const seen = { requests: 0, failures: [] as string[] };
    const request = parts.bus.request.bind(parts.bus);
    jest.spyOn(parts.bus, 'request').mockImplementation(async (...args) => {
      seen.requests += 1;
      try {
        return await request(...args);
      } catch (err) {
        seen.failures.push(String((err as { code?: string }).code ?? err));
        await onFailure(seen.failures.length);
        throw err;
      }
    });
    return seen;
  }

  /**
   * An audit-writer on `responder` that answers as the service does (Nest's `{id, response}` or
   * `{id, err}`): it stores the rows within the budget the request carries, or, with `fail`,
   * replies with that error. Returns the budgets (ms) of the requests it got.
   */
  async function startWriter(fail?: { reason: string; message: string }): Promise<number[]> {
    const writer = new AuditWriter(parts.db.store, new SlotSet(1));
    const budgets: number[] = [];
    parts.responder.subscribe(namespace.subject(auditWriteSubject('p', 'e')), {
      callback: (err, msg) => {
        if (err) return;
        const { id, data } = msg.json<{ id: string; data: AuditWriteRequest }>();
        budgets.push(data.budgetMs);
        if (fail) return void msg.respond(codec.encode({ id, err: fail, isDisposed: true }));
        writer.write(data.rows, { budgetMs: data.budgetMs, requestId: data.requestId }).then(
          () => msg.respond(codec.encode({ id, response: { written: data.rows.length }, isDisposed: true })),
          (writeErr: { reason?: string; message?: string }) => msg.respond(codec.encode({ id, err: { reason: writeErr.reason ?? 'error', message: String(writeErr.message) }, isDisposed: true })),
        );
      },
    });
    await parts.responder.flush(); // the server knows the subscription before the sink's next request
    return budgets;
  }

  it('a writer that subscribes after the first no-responders gets the rows, stored once, with the budget left', async () => {
    let budgets: number[] = [];
    const seen = countRequests(async (failures) => {
      if (failures === 1) budgets = await startWriter();
    });
    const unanswered = jest.fn();
    const retried = jest.fn();
    const sink = new NatsAuditSink(parts.bus, 300, new StoreAuditFates(parts.db.store), unanswered, retried);
    await sink.write([row('late-writer')], { budgetMs: 30_000, signal: new AbortController().signal });
    expect(seen.failures).toEqual(['503']);
    expect(seen.requests).toBe(2);
    expect(retried).toHaveBeenCalledTimes(1);
    expect(unanswered).not.toHaveBeenCalled();
    expect(await stored()).toEqual(['late-writer']);
    // The retry carried what was left of the budget, not the whole budget again.
    expect(budgets).toHaveLength(1);
    expect(budgets[0]).toBeGreaterThan(0);
    expect(budgets[0]).toBeLessThan(30_000);
  });

  it('with no writer for the whole budget, the rows are not written (budget) after retrying', async () => {
    const seen = countRequests();
    const unanswered = jest.fn();
    const retried = jest.fn();
    const sink = new NatsAuditSink(parts.bus, 300, new StoreAuditFates(parts.db.store), unanswered, retried);
    await expect(sink.write([row('no-writer')], { budgetMs: 600, signal: new AbortController().signal })).rejects.toMatchObject({
      name: 'AuditNotWritten',
      reason: 'budget',
      message: expect.stringMatching(/no audit-writer answered within the budget/),
    });
    expect(seen.requests).toBeGreaterThan(1);
    expect(seen.failures).toEqual(Array(seen.requests).fill('503'));
    expect(retried).toHaveBeenCalledTimes(seen.requests - 1);
    expect(unanswered).not.toHaveBeenCalled(); // no request reached a writer: nothing to settle
    expect(await stored()).toEqual([]);
  });

  it('a stop while it waits to try again ends the write at once as stopped', async () => {
    const seen = countRequests();
    const stopping = new AbortController();
    const unanswered = jest.fn();
    const sink = new NatsAuditSink(parts.bus, 300, new StoreAuditFates(parts.db.store), unanswered);
    // A budget past the test's own timeout: only the stop can end this write in time.
    const writing = sink.write([row('stopped')], { budgetMs: 120_000, signal: stopping.signal });
    const settled = writing.catch((err: unknown) => err);
    await waitFor('a first request with no responders', () => seen.failures.length >= 1);
    stopping.abort();
    expect(await settled).toMatchObject({ name: 'AuditNotWritten', reason: 'stopped' });
    expect(unanswered).not.toHaveBeenCalled();
    expect(await stored()).toEqual([]);
  });

  it("the recorder's stop ends a write waiting for a writer: the row is counted as stopped and stop returns", async () => {
    const seen = countRequests();
    const drops: { eventType: string; reason: string }[] = [];
    // A budget past the test's own timeout: only the stop can end this write in time.
    const recorder = new AuditRecorder(new NatsAuditSink(parts.bus, 300, new StoreAuditFates(parts.db.store)), { slots: 1, budgetMs: 120_000, onDrop: (eventType, reason) => drops.push({ eventType, reason }) });
    const recorded = recorder.record(row('recorder-stopped'));
    await waitFor('a first request with no responders', () => seen.failures.length >= 1);
    await recorder.stop();
    expect(await recorded).toBe(false);
    expect(drops).toEqual([{ eventType: 'run.created', reason: 'stopped' }]);
    expect(await stored()).toEqual([]);
  });

  it('an error reply from a writer is not retried', async () => {
    await startWriter({ reason: 'error', message: 'insert refused' });
    const seen = countRequests();
    const retried = jest.fn();
    const sink = new NatsAuditSink(parts.bus, 300, new StoreAuditFates(parts.db.store), undefined, retried);
    await expect(sink.write([row('refused')], { budgetMs: 5000, signal: new AbortController().signal })).rejects.toMatchObject({
      name: 'AuditNotWritten',
      reason: 'error',
      message: expect.stringMatching(/insert refused/),
    });
    expect(seen.requests).toBe(1);
    expect(seen.failures).toEqual([]);
    expect(retried).not.toHaveBeenCalled();
  });
});

describe('NatsAuditSink and a stop while a request is answered', () => {
  it('rows a writer answered as the recorder stopped are written, not counted as stopped', async () => {
    const stopping = new AbortController();
    // The stop lands while the request is out; the answer still says the rows were stored.
    const bus = { request: jest.fn(async () => { stopping.abort(); return { response: { written: 1 } }; }) } as unknown as NatsBus;
    const sink = new NatsAuditSink(bus, 300);
    await expect(sink.write([row('r')], { budgetMs: 5000, signal: stopping.signal })).resolves.toBeUndefined();
    expect(bus.request).toHaveBeenCalledTimes(1);
  });
});
