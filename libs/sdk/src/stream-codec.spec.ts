import { create } from '@bufbuild/protobuf';
import { JobAssignmentSchema } from '@ironflow/contracts/proto';
import { eventOf, memoOf, toExecutedStep, toWireError } from './stream-codec';

describe('stream codec', () => {
  it('reads memoized outputs and event data from the *_json twins, else the Struct (v0.29 engines)', () => {
    const job = create(JobAssignmentSchema, {
      jobId: 'r-1',
      runId: 'r',
      event: { id: 'e', name: 'n', data: { value: 5 }, version: 0 },
      eventDataJson: '5',
      completedSteps: [
        { stepId: 'r:a:0', name: 'a', output: { value: 21 }, outputJson: '21' },
        { stepId: 'r:b:0', name: 'b', output: { x: 1 } },
        { stepId: 'r:nap:0', name: 'nap' },
      ],
    });
    expect(eventOf(job, () => Date.parse('2025-01-01T00:00:00.000Z'))).toEqual({ id: 'e', name: 'n', data: 5, timestamp: '2025-01-01T00:00:00.000Z', version: 1 });
    expect(memoOf(job)).toEqual([
      { id: 'r:a:0', name: 'a', status: 'completed', output: 21 },
      { id: 'r:b:0', name: 'b', status: 'completed', output: { x: 1 } },
      { id: 'r:nap:0', name: 'nap', status: 'completed' },
    ]);
  });

  it('reports steps and errors with exact outputs (JSON text only, no Struct) and the step id in details', () => {
    const step = toExecutedStep({ id: 'r:a:0', name: 'a', type: 'invoke', status: 'completed', output: 'text', duration_ms: 2.6 });
    expect(step).toMatchObject({ outputJson: '"text"', durationMs: 3, compensationFor: '' });
    expect(step.output).toBeUndefined();
    expect(toExecutedStep({ id: 'r:b:0', name: 'b', type: 'invoke', status: 'completed', output: { x: 1 } })).not.toHaveProperty('output');
    expect(toWireError({ message: 'boom', code: 'STEP_FAILED', retryable: false, step_id: 'r:a:0' })).toEqual({
      message: 'boom',
      code: 'STEP_FAILED',
      retryable: false,
      stack: '',
      details: { step_id: 'r:a:0' },
    });
  });
});
