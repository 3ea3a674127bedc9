import { randomBytes } from 'node:crypto';
import { NatsConnection, connect } from 'nats';
import { BusNamespace, NatsBus } from '@ironflow/bus';
import { TestStore, dropNamespaceStreams, openTestStore } from '@ironflow/testing';
import { ScopedAuditRow } from './audit-recorder';
import { AuditWriter } from './audit-writer';
import { AuditWriteRequest, NatsAuditSink, auditWriteSubject } from './nats-audit-sink';
import { SlotSet } from './slot-set';
import { StoreAuditFates } from './store-audit-fates';

/**
 * The sender's side of an audit write that gets no answer (issue 10: "lost rows are counted
 * exactly"), on real NATS and PostgreSQL. A stand-in audit-writer answers nothing: it stores the
 * rows and dies before replying, or it never gets to them.
 */
describe('NatsAuditSink with no answer [postgres]', () => {
  const namespace = new BusNamespace(`t${randomBytes(4).toString('hex')}`);
  let db: TestStore;
  let bus: NatsBus;
  let responder: NatsConnection;
  const row = (runId: string): ScopedAuditRow => ({ project: 'p', env: 'e', runId, functionId: 'f', eventType: 'run.created' });
  const stored = () => db.store.read('t', (tx) => tx.query<{ run_id: string }>(`SELECT run_id FROM audit_events ORDER BY id`)).then((rows) => rows.map((r) => r.run_id));

  beforeEach(async () => {
    db = await openTestStore('postgres');
    bus = await NatsBus.connect({ url: process.env.IRONFLOW_TEST_NATS_URL!, namespace });
    responder = await connect({ servers: process.env.IRONFLOW_TEST_NATS_URL! });
  });
  afterEach(async () => {
    await responder.close();
    await bus.close();
    await db.dispose();
  });
  afterAll(() => dropNamespaceStreams(namespace, process.env.IRONFLOW_TEST_NATS_URL!));

  /** Answers nothing; with `store`, first writes the request's rows as the audit-writer would (a writer killed after its commit). */
  async function silentWriter(store: boolean): Promise<{ done: Promise<void> }> {
    const writer = new AuditWriter(db.store, new SlotSet(1));
    const sub = responder.subscribe(namespace.subject(auditWriteSubject('p', 'e')), { max: 1 });
    await responder.flush(); // the server knows the subscription before the sink's request
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
    const request = bus.request.bind(bus);
    jest.spyOn(bus, 'request').mockImplementation((...args) => request(...args).catch(async (err: unknown) => { await writing.done; throw err; }));
    const unanswered = jest.fn();
    const sink = new NatsAuditSink(bus, 300, new StoreAuditFates(db.store), unanswered);
    await sink.write([row('stored')], { budgetMs: 500, signal: new AbortController().signal });
    await writing.done;
    expect(await stored()).toEqual(['stored']);
    expect(unanswered.mock.calls).toEqual([['written', 1]]);
  });

  it('rows no writer got to are given up and counted as lost; a writer that gets to them later does not store them', async () => {
    const reached = await silentWriter(false);
    const unanswered = jest.fn();
    const sink = new NatsAuditSink(bus, 300, new StoreAuditFates(db.store), unanswered);
    await expect(sink.write([row('late')], { budgetMs: 500, signal: new AbortController().signal })).rejects.toMatchObject({ name: 'AuditNotWritten', reason: 'budget' });
    expect(unanswered.mock.calls).toEqual([['given_up', 1]]);
    await reached.done;
    const [fate] = await db.store.read('t', (tx) => tx.query<{ request_id: string; fate: string }>(`SELECT request_id, fate FROM audit_write_fates`));
    expect(fate.fate).toBe('given_up');
    // A writer late past its sender (a stuck process, a redelivered request) stores nothing of it.
    await expect(new AuditWriter(db.store, new SlotSet(1)).write([row('late')], { requestId: fate.request_id })).rejects.toMatchObject({ reason: 'budget' });
    expect(await stored()).toEqual([]);
  });

  it('without a store to ask, rows with no answer are counted as lost (the sender cannot tell)', async () => {
    const writing = await silentWriter(true);
    const request = bus.request.bind(bus);
    jest.spyOn(bus, 'request').mockImplementation((...args) => request(...args).catch(async (err: unknown) => { await writing.done; throw err; }));
    const unanswered = jest.fn();
    const sink = new NatsAuditSink(bus, 300, undefined, unanswered);
    await expect(sink.write([row('unknown')], { budgetMs: 500, signal: new AbortController().signal })).rejects.toThrow(/did not answer/);
    expect(unanswered.mock.calls).toEqual([['unknown', 1]]);
    await writing.done;
    expect(await stored()).toEqual(['unknown']);
  });
});
