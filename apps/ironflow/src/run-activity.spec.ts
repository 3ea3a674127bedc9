import { InProcessBus, subjects } from '@ironflow/bus';
import { CallScope, EngineError, RunView } from '@ironflow/contracts';
import { waitFor } from '@ironflow/testing';
import { printRunOutcomes } from './run-activity';

const run = (over: Partial<RunView>): RunView => ({
  id: 'r1',
  functionId: 'order.process',
  functionVersion: 1,
  eventId: 'e1',
  executionMode: 'push',
  status: 'completed',
  attempt: 1,
  maxAttempts: 3,
  input: {},
  createdAt: '2026-01-01T00:00:00.000Z',
  updatedAt: '2026-01-01T00:00:01.000Z',
  startedAt: '2026-01-01T00:00:00.100Z',
  endedAt: '2026-01-01T00:00:00.350Z',
  ...over,
});

describe('ironflow dev activity lines', () => {
  it('prints one line per run outcome (completed with its duration, failed with its code, cancelled with its code and reason) and nothing for other run events', async () => {
    const bus = new InProcessBus();
    const runs: Record<string, RunView> = {
      r1: run({}),
      r2: run({ id: 'r2', status: 'failed', error: { message: 'carrier\ndown', code: 'PUSH_DISPATCH_FAILED' } }),
      r3: run({ id: 'r3', functionId: 'payment.charge', status: 'cancelled' }),
      r5: run({ id: 'r5', status: 'cancelled', error: { message: 'customer called', code: 'CANCELLED' } }),
    };
    const scopes: CallScope[] = [];
    const out: string[] = [];
    const sub = printRunOutcomes(bus, { getRun: async (scope, id) => (scopes.push(scope), runs[id]) }, (line) => out.push(line));
    for (const r of Object.values(runs)) await bus.publish(subjects.runEvent('staging', r.id, r.status), { runId: r.id, functionId: r.functionId, status: r.status, attempt: 1 });
    await bus.publish(subjects.runEvent('staging', 'r4', 'running'), { runId: 'r4', functionId: 'x', status: 'running', attempt: 1 });
    await waitFor('four lines', () => out.length === 4);
    expect(out.sort()).toEqual([
      'run r1 order.process completed in 250 ms',
      'run r2 order.process failed PUSH_DISPATCH_FAILED: carrier down',
      'run r3 payment.charge cancelled',
      'run r5 order.process cancelled CANCELLED: customer called',
    ]);
    expect(scopes).toContainEqual({ project: 'default', env: 'staging' });
    sub.unsubscribe();
    await bus.close();
  });

  it('prints the line from the event alone when the run cannot be read', async () => {
    const bus = new InProcessBus();
    const out: string[] = [];
    printRunOutcomes(bus, { getRun: async () => { throw new EngineError('RUN_NOT_FOUND', 'gone'); } }, (line) => out.push(line));
    await bus.publish(subjects.runEvent('default', 'r9', 'failed'), { runId: 'r9', functionId: 'f', status: 'failed', attempt: 1 });
    await waitFor('a line', () => out.length === 1);
    expect(out).toEqual(['run r9 f failed']);
    await bus.close();
  });
});
