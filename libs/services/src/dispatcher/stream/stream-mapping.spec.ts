import { create } from '@bufbuild/protobuf';
import { v1 } from '@ironflow/rpc';
import { fromHeartbeat, fromJobCompleted, fromJobFailed, fromJobYielded, fromRegister, toEngineMessage } from './stream-mapping';

describe('worker stream mapping', () => {
  it('sends non-object step outputs and event data wrapped as {value} in the Struct and exact in the *_json twins; a valueless step as output_json "null"; event version and metadata', () => {
    const msg = create(v1.EngineMessageSchema, toEngineMessage({
      kind: 'job',
      leaseExpiresAt: Date.parse('2025-01-02T03:04:05.000Z'),
      job: {
        job_id: 'run-1-2',
        run_id: 'run-1',
        function_id: 'f',
        attempt: 1,
        event: { id: 'e1', name: 'ironflow/function.invoked', data: 5, timestamp: '2025-01-01T00:00:00.000Z', version: 3, metadata: { src: 'x' } },
        completed_steps: [
          { step_id: 'run-1:a:0', name: 'a', output: 21 },
          { step_id: 'run-1:b:0', name: 'b', output: { x: 1 } },
          { step_id: 'run-1:c:0', name: 'c', output: null },
          { step_id: 'run-1:nap:0', name: 'nap', output: null },
        ],
        execution_seq: 2,
        lease_token: 'tok',
      },
    }));
    expect(msg.payload.case).toBe('job');
    const job = msg.payload.value as v1.JobAssignment;
    expect(job.event?.data).toEqual({ value: 5 });
    expect(job.eventDataJson).toBe('5');
    expect(job.event?.version).toBe(3);
    expect(job.event?.metadata).toEqual({ src: 'x' });
    expect(job.completedSteps.map((s) => [s.output, s.outputJson])).toEqual([
      [{ value: 21 }, '21'],
      [{ x: 1 }, '{"x":1}'],
      [undefined, 'null'],
      [undefined, 'null'],
    ]);
    expect(job.executionSeq).toBe(2n);
    expect(job.leaseToken).toBe('tok');
    expect(Number(job.leaseExpiresAt?.seconds)).toBe(Date.parse('2025-01-02T03:04:05.000Z') / 1000);
  });

  it('reads v0.29 messages: register defaults, job-id-only heartbeats, completions without steps', () => {
    expect(fromRegister(create(v1.WorkerRegisterSchema, { workerId: 'w', functionIds: ['f'], maxConcurrentJobs: 0 }))).toEqual({ worker_id: 'w', hostname: '', function_ids: ['f'], labels: {} });
    expect(fromHeartbeat(create(v1.WorkerHeartbeatSchema, { jobs: [{ jobId: 'r-1' }, { jobId: 'r-2', executionSeq: 2n, leaseToken: 't' }] }))).toEqual([
      { jobId: 'r-1' },
      { jobId: 'r-2', executionSeq: 2, leaseToken: 't' },
    ]);
    expect(fromJobCompleted(create(v1.JobCompletedSchema, { jobId: 'r-1', output: { a: 1 } }))).toEqual({ kind: 'completed', output: { a: 1 }, steps: [] });
    expect(fromJobCompleted(create(v1.JobCompletedSchema, { jobId: 'r-1' }))).toEqual({ kind: 'completed', output: undefined, steps: [] });
    expect(fromJobFailed(create(v1.JobFailedSchema, { jobId: 'r-1', error: { message: 'boom', code: 'STEP_FAILED', retryable: false } }))).toEqual({
      kind: 'failed',
      error: { message: 'boom', code: 'STEP_FAILED', retryable: false },
      steps: [],
    });
  });

  it('reads our variants: exact outputs win over the Struct, yields come as JSON with their steps', () => {
    const step = { id: 'r:a:0', name: 'a', type: 'invoke', status: 'completed', output: { value: 3 }, outputJson: '3', durationMs: 4 };
    expect(fromJobCompleted(create(v1.JobCompletedSchema, { jobId: 'r-1', output: { value: [1] }, outputJson: '[1]', steps: [step] }))).toEqual({
      kind: 'completed',
      output: [1],
      steps: [{ id: 'r:a:0', name: 'a', type: 'invoke', status: 'completed', output: 3, duration_ms: 4 }],
    });
    const y = { type: 'sleep', step_id: 'r:nap:0', until: '2025-01-02T03:04:05.000Z' };
    expect(fromJobYielded(create(v1.JobYieldedSchema, { jobId: 'r-1', yieldJson: JSON.stringify(y), steps: [step] }))).toEqual({
      kind: 'yielded',
      yield: y,
      steps: [{ id: 'r:a:0', name: 'a', type: 'invoke', status: 'completed', output: 3, duration_ms: 4 }],
    });
    expect(fromJobYielded(create(v1.JobYieldedSchema, { jobId: 'r-1', yieldJson: 'not json' }))).toEqual({ kind: 'yielded', yield: {}, steps: [] });
    // Our `sent_at` leaves the yield and becomes the report's send time.
    expect(fromJobYielded(create(v1.JobYieldedSchema, { jobId: 'r-1', yieldJson: JSON.stringify({ ...y, sent_at: '2025-01-02T03:04:03.000Z' }) }))).toEqual({
      kind: 'yielded',
      yield: y,
      steps: [],
      sentAt: Date.parse('2025-01-02T03:04:03.000Z'),
    });
  });
});
