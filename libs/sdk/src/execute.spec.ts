import type { StepResult, WireEvent } from '@ironflow/contracts';
import { InvokeError, IronflowError, NonRetryableError, RetryableError, StepError, StepTimeoutError } from './errors';
import { InvocationInput, InvocationOutcome, Transport, executeInvocation } from './execute';
import { Handler, HandlerContext, createFunction } from './function';
import { MemoizedStep, ResumeInfo } from './step-tools';

const NOW = Date.parse('2025-01-02T03:04:05.000Z');
const EVENT: WireEvent = { id: 'evt-1', name: 'order.created', data: { orderId: 'o-1' }, timestamp: '2025-01-02T03:00:00.000Z' };

/** Runs `handler` as function `fn-1` of run `run-1`, with a clock that advances 5 ms per read. */
function runOnce(handler: Handler<any, any>, input: Partial<Omit<InvocationInput, 'fn'>> & { stepTimeoutMs?: number } = {}): Promise<InvocationOutcome> {
  let clock = NOW;
  const { stepTimeoutMs, ...rest } = input;
  return executeInvocation({
    fn: createFunction({ id: 'fn-1', stepTimeoutMs }, handler),
    runId: 'run-1',
    attempt: 1,
    event: EVENT,
    memo: [],
    transport: 'push',
    now: () => (clock += 5) - 5,
    ...rest,
  });
}

const done = (id: string, output?: unknown, name = 'x'): MemoizedStep => ({ id, name, status: 'completed', output });

function expectFailed(outcome: InvocationOutcome) {
  if (outcome.status !== 'failed') throw new Error(`expected failed, got ${JSON.stringify(outcome)}`);
  return outcome;
}
function expectYielded(outcome: InvocationOutcome) {
  if (outcome.status !== 'yielded') throw new Error(`expected yielded, got ${JSON.stringify(outcome)}`);
  return outcome;
}
function expectCompleted(outcome: InvocationOutcome) {
  if (outcome.status !== 'completed') throw new Error(`expected completed, got ${JSON.stringify(outcome)}`);
  return outcome;
}

describe('handler context', () => {
  it('passes the event with a Date timestamp and version 1, the run and the attempt', async () => {
    let seen: HandlerContext | undefined;
    const outcome = await runOnce(
      (ctx) => {
        seen = ctx;
        return 'ok';
      },
      { attempt: 3, secrets: { API: 's3cret' } },
    );
    expect(expectCompleted(outcome).result).toBe('ok');
    expect(seen!.event).toEqual({ id: 'evt-1', name: 'order.created', data: { orderId: 'o-1' }, timestamp: new Date('2025-01-02T03:00:00.000Z'), version: 1 });
    expect(seen!.run).toEqual({ id: 'run-1', attempt: 3, functionId: 'fn-1' });
    expect(seen!.attempt).toBe(3);
    expect(seen!.secrets.get('API')).toBe('s3cret');
    expect(seen!.secrets.get('toString')).toBeUndefined();
  });

  it('completes without a result key when the handler returns undefined', async () => {
    const outcome = await runOnce(async () => undefined);
    expect(outcome).toEqual({ status: 'completed', steps: [] });
    expect('result' in outcome).toBe(false);
  });
});

describe('step.run', () => {
  it('gives each use of a name its own id and reports executed steps as StepResults', async () => {
    const outcome = await runOnce(async ({ step }) => {
      const a = await step.run('a', () => 1);
      const b = await step.run('a', async () => ({ n: 2 }));
      await step.run('charge:card', () => undefined);
      return [a, b];
    });
    const completed = expectCompleted(outcome);
    expect(completed.result).toEqual([1, { n: 2 }]);
    expect(completed.steps).toEqual<StepResult[]>([
      { id: 'run-1:a:0', name: 'a', type: 'invoke', status: 'completed', started_at: '2025-01-02T03:04:05.000Z', ended_at: '2025-01-02T03:04:05.005Z', duration_ms: 5, output: 1 },
      { id: 'run-1:a:1', name: 'a', type: 'invoke', status: 'completed', started_at: '2025-01-02T03:04:05.010Z', ended_at: '2025-01-02T03:04:05.015Z', duration_ms: 5, output: { n: 2 } },
      { id: 'run-1:charge\\:card:0', name: 'charge:card', type: 'invoke', status: 'completed', started_at: '2025-01-02T03:04:05.020Z', ended_at: '2025-01-02T03:04:05.025Z', duration_ms: 5 },
    ]);
    expect('output' in completed.steps[2]).toBe(false);
  });

  it('returns memoized outputs without running the body and reports only new steps', async () => {
    const calls: string[] = [];
    const outcome = await runOnce(
      async ({ step }) => {
        const a = await step.run('a', () => (calls.push('a'), 'fresh-a'));
        const b = await step.run('b', () => (calls.push('b'), 'fresh-b'));
        return { a, b };
      },
      { memo: [done('run-1:a:0', 'stored-a', 'a')] },
    );
    expect(calls).toEqual(['b']);
    const completed = expectCompleted(outcome);
    expect(completed.result).toEqual({ a: 'stored-a', b: 'fresh-b' });
    expect(completed.steps.map((s) => s.id)).toEqual(['run-1:b:0']);
  });

  it('memoizes a legacy unescaped id when only that one is stored', async () => {
    let ran = false;
    const outcome = await runOnce(async ({ step }) => step.run('charge:card', () => ((ran = true), 'new')), {
      memo: [done('run-1:charge:card:0', 'legacy', 'charge:card')],
    });
    expect(ran).toBe(false);
    expect(expectCompleted(outcome).result).toBe('legacy');
  });

  it('runs the body again when the stored row is failed', async () => {
    const outcome = await runOnce(async ({ step }) => step.run('a', () => 'second try'), {
      memo: [{ id: 'run-1:a:0', name: 'a', status: 'failed', error: 'boom' }],
    });
    const completed = expectCompleted(outcome);
    expect(completed.result).toBe('second try');
    expect(completed.steps).toHaveLength(1);
  });

  it('returns the JSON form of the output, the same as a replay would', async () => {
    const outcome = await runOnce(async ({ step }) => {
      const d = await step.run('when', () => new Date('2025-05-05T00:00:00.000Z'));
      return typeof d;
    });
    const completed = expectCompleted(outcome);
    expect(completed.result).toBe('string');
    expect(completed.steps[0].output).toBe('2025-05-05T00:00:00.000Z');
  });

  it('calls onStep as each step finishes', async () => {
    const seen: string[] = [];
    await runOnce(
      async ({ step }) => {
        await step.run('a', () => 1);
        seen.push('between');
        await step.run('b', () => 2);
      },
      { onStep: (s) => seen.push(s.id) },
    );
    expect(seen).toEqual(['run-1:a:0', 'between', 'run-1:b:0']);
  });

  it('wraps a failing body in StepError with the step id, and records the failed step', async () => {
    let caught: unknown;
    const outcome = await runOnce(async ({ step }) => {
      try {
        await step.run('charge', () => {
          throw new Error('card declined');
        });
      } catch (err) {
        caught = err;
        throw err;
      }
    });
    expect(caught).toBeInstanceOf(StepError);
    expect((caught as StepError).cause).toEqual(new Error('card declined'));
    const failed = expectFailed(outcome);
    expect(failed.error).toMatchObject({ message: 'step "charge" failed: card declined', code: 'STEP_FAILED', retryable: false, step_id: 'run-1:charge:0' });
    expect(failed.steps).toHaveLength(1);
    expect(failed.steps[0]).toMatchObject({ id: 'run-1:charge:0', name: 'charge', type: 'invoke', status: 'failed', error: { message: 'card declined', retryable: false } });
    expect(failed.steps[0].error?.stack).toContain('card declined');
    expect('output' in failed.steps[0]).toBe(false);
  });

  it('lets the handler catch a step failure and go on', async () => {
    const outcome = await runOnce(async ({ step }) => {
      const value = await step
        .run('flaky', () => {
          throw new Error('nope');
        })
        .catch(() => 'fallback');
      await step.run('after', () => value);
      return value;
    });
    const completed = expectCompleted(outcome);
    expect(completed.result).toBe('fallback');
    expect(completed.steps.map((s) => [s.id, s.status])).toEqual([
      ['run-1:flaky:0', 'failed'],
      ['run-1:after:0', 'completed'],
    ]);
  });

  it('throws StepTimeoutError unwrapped when the body exceeds its timeout', async () => {
    let caught: unknown;
    const outcome = await runOnce(async ({ step }) => {
      try {
        await step.run('slow', () => new Promise(() => undefined), { timeout: 20 });
      } catch (err) {
        caught = err;
        throw err;
      }
    });
    expect(caught).toBeInstanceOf(StepTimeoutError);
    expect(expectFailed(outcome).error).toMatchObject({ code: 'STEP_TIMEOUT', retryable: true, message: 'step "slow" timed out after 20ms' });
    expect(outcome.steps[0]).toMatchObject({ status: 'failed', error: { retryable: true } });
  });

  it("applies the function's stepTimeoutMs when the step gives none", async () => {
    const outcome = await runOnce(async ({ step }) => step.run('slow', () => new Promise(() => undefined)), { stepTimeoutMs: 15 });
    expect(expectFailed(outcome).error).toMatchObject({ code: 'STEP_TIMEOUT', message: 'step "slow" timed out after 15ms' });
  });

  it('rejects an empty name as a non-retryable INVALID_STEP', async () => {
    const outcome = await runOnce(async ({ step }) => step.run('', () => 1));
    expect(expectFailed(outcome).error).toMatchObject({ code: 'INVALID_STEP', retryable: false });
  });
});

describe('waits', () => {
  it('sleep yields until now + duration (string or ms) and is never reported as a step', async () => {
    const outcome = await runOnce(async ({ step }) => {
      await step.run('before', () => 'x');
      await step.sleep('nap', '2s');
      return 'unreachable';
    });
    const yielded = expectYielded(outcome);
    expect(yielded.yield).toEqual({ type: 'sleep', step_id: 'run-1:nap:0', until: '2025-01-02T03:04:07.010Z' });
    expect(yielded.steps.map((s) => s.id)).toEqual(['run-1:before:0']);

    const numeric = expectYielded(await runOnce(async ({ step }) => step.sleep('nap', 1500)));
    expect(numeric.yield).toEqual({ type: 'sleep', step_id: 'run-1:nap:0', until: '2025-01-02T03:04:06.500Z' });
  });

  it('sleep passes once its row is completed or a sleep resume names it', async () => {
    const handler: Handler = async ({ step }) => {
      await step.sleep('nap', '1h');
      return 'woke';
    };
    expect(expectCompleted(await runOnce(handler, { memo: [done('run-1:nap:0')] })).result).toBe('woke');
    expect(expectCompleted(await runOnce(handler, { resume: { step_id: 'run-1:nap:0', type: 'sleep' } })).result).toBe('woke');
    expect(expectYielded(await runOnce(handler, { resume: { step_id: 'run-1:other:0', type: 'sleep' } })).yield.step_id).toBe('run-1:nap:0');
    expect(expectYielded(await runOnce(handler, { resume: { step_id: 'run-1:nap:0', type: 'wait_for_event', data: {} } })).yield.type).toBe('sleep');
  });

  it('consults a resume once, for the step it names', async () => {
    const outcome = await runOnce(
      async ({ step }) => {
        await step.sleep('nap', '1m');
        await step.sleep('nap', '1m');
      },
      { resume: { step_id: 'run-1:nap:0', type: 'sleep' } },
    );
    expect(expectYielded(outcome).yield.step_id).toBe('run-1:nap:1');
  });

  it('sleep rejects a duration <= 0 or unparsable', async () => {
    for (const duration of [0, -5, 'soon']) {
      const outcome = await runOnce(async ({ step }) => step.sleep('nap', duration));
      expect(expectFailed(outcome).error).toMatchObject({ code: 'INVALID_STEP', retryable: false });
    }
    // Validation applies only before yielding: a finished sleep replays whatever its duration.
    const replayed = await runOnce(async ({ step }) => (await step.sleep('nap', 0), 'past it'), { memo: [done('run-1:nap:0')] });
    expect(expectCompleted(replayed).result).toBe('past it');
  });

  it('sleepUntil yields the given time and rejects a past time unless memoized', async () => {
    const future = new Date(NOW + 60_000);
    const yielded = expectYielded(await runOnce(async ({ step }) => step.sleepUntil('until', future)));
    expect(yielded.yield).toEqual({ type: 'sleep', step_id: 'run-1:until:0', until: future.toISOString() });

    const past = '2020-01-01T00:00:00.000Z';
    expect(expectFailed(await runOnce(async ({ step }) => step.sleepUntil('until', past))).error.code).toBe('INVALID_STEP');
    expect(expectCompleted(await runOnce(async ({ step }) => (await step.sleepUntil('until', past), 'on'), { memo: [done('run-1:until:0')] })).result).toBe('on');
  });

  it('waitForEvent yields the filter with the default 7d timeout, trimmed event and match', async () => {
    const outcome = await runOnce(async ({ step }) => step.waitForEvent('approval', { event: '  order.approved ', match: 'data.orderId' }));
    expect(expectYielded(outcome).yield).toEqual({
      type: 'wait_for_event',
      step_id: 'run-1:approval:0',
      event_filter: { event: 'order.approved', match: 'data.orderId', timeout: '7d' },
    });
  });

  it('waitForEvent formats a numeric timeout in the largest whole unit and passes strings through', async () => {
    const numeric = expectYielded(await runOnce(async ({ step }) => step.waitForEvent('w', { event: 'e', timeout: 90_000 })));
    expect(numeric.yield).toMatchObject({ event_filter: { event: 'e', timeout: '1m' } });
    expect('match' in (numeric.yield as { event_filter: object }).event_filter).toBe(false);
    const text = expectYielded(await runOnce(async ({ step }) => step.waitForEvent('w', { event: 'e', timeout: '36h' })));
    expect(text.yield).toMatchObject({ event_filter: { timeout: '36h' } });
    for (const timeout of [0, Number.POSITIVE_INFINITY]) {
      expect(expectFailed(await runOnce(async ({ step }) => step.waitForEvent('w', { event: 'e', timeout }))).error.code).toBe('INVALID_STEP');
    }
    expect(expectFailed(await runOnce(async ({ step }) => step.waitForEvent('w', { event: 'e', timeout: 'forever' }))).error).toMatchObject({
      code: 'INVALID_STEP',
      retryable: false,
      message: 'step.waitForEvent("w") timeout: invalid duration "forever"',
    });
    expect(expectFailed(await runOnce(async ({ step }) => step.waitForEvent('w', { event: 'e', timeout: '0s' }))).error).toMatchObject({
      code: 'INVALID_STEP',
      message: 'step.waitForEvent("w") timeout must be > 0 ms, got "0s"',
    });
    expect(expectFailed(await runOnce(async ({ step }) => step.waitForEvent('w', { event: '   ' }))).error.code).toBe('INVALID_STEP');
  });

  it('a step option the SDK does not have fails the run as INVALID_STEP naming it (a misspelt match would take any event)', async () => {
    const failed = expectFailed(await runOnce(async ({ step }) => step.waitForEvent('w', { event: 'e', mach: 'data.id' } as never)));
    expect(failed.error).toMatchObject({ code: 'INVALID_STEP', retryable: false, message: 'step.waitForEvent("w"): unknown option(s), not options of this SDK: mach' });
    const run = expectFailed(await runOnce(async ({ step }) => step.run('s', () => 1, { timeot: 5 } as never)));
    expect(run.error).toMatchObject({ code: 'INVALID_STEP', message: 'step.run("s"): unknown option(s), not options of this SDK: timeot' });
    const invoke = expectFailed(await runOnce(async ({ step }) => step.invoke('child', {}, { wait: true } as never)));
    expect(invoke.error).toMatchObject({ code: 'INVALID_STEP', message: 'step.invoke("child"): unknown option(s), not options of this SDK: wait' });
    expect(expectYielded(await runOnce(async ({ step }) => step.waitForEvent('w', { event: 'e', match: 'data.id', timeout: '1h' }))).yield).toMatchObject({ event_filter: { match: 'data.id' } });
  });

  it('waitForEvent returns the resume data or a truthy stored output, raw', async () => {
    const received = { id: 'evt-9', name: 'order.approved', data: { by: 'ana' }, timestamp: '2025-01-02T04:00:00.000Z' };
    const handler: Handler = async ({ step }) => step.waitForEvent('approval', { event: 'order.approved' });
    expect(expectCompleted(await runOnce(handler, { resume: { step_id: 'run-1:approval:0', type: 'wait_for_event', data: received } })).result).toEqual(received);
    expect(expectCompleted(await runOnce(handler, { memo: [done('run-1:approval:0', received)] })).result).toEqual(received);
  });

  it('waitForEvent yields again when the stored output or resume data is empty', async () => {
    const handler: Handler = async ({ step }) => step.waitForEvent('approval', { event: 'order.approved' });
    expect(expectYielded(await runOnce(handler, { memo: [done('run-1:approval:0', null)] })).yield.type).toBe('wait_for_event');
    expect(expectYielded(await runOnce(handler, { resume: { step_id: 'run-1:approval:0', type: 'wait_for_event' } })).yield.type).toBe('wait_for_event');
  });

  it('invoke yields invoke_function named by the function id with input and a 30000 ms default timeout', async () => {
    const outcome = await runOnce(async ({ step }) => step.invoke('charge-card', { amount: 5 }));
    expect(expectYielded(outcome).yield).toEqual({
      type: 'invoke_function',
      step_id: 'run-1:charge-card:0',
      function_id: 'charge-card',
      input: { amount: 5 },
      invoke_timeout_ms: 30_000,
    });
    const custom = expectYielded(await runOnce(async ({ step }) => step.invoke('child', undefined, { timeout: '2m' })));
    expect(custom.yield).toEqual({ type: 'invoke_function', step_id: 'run-1:child:0', function_id: 'child', invoke_timeout_ms: 120_000 });
  });

  it('invoke returns the output of a completed row', async () => {
    const outcome = await runOnce(async ({ step }) => step.invoke('child', { a: 1 }), { memo: [done('run-1:child:0', { total: 42 })] });
    expect(expectCompleted(outcome).result).toEqual({ total: 42 });
  });

  it('invoke throws InvokeError parsed from a failed row and the run fails non-retryable', async () => {
    let caught: InvokeError | undefined;
    const error = JSON.stringify({ function_id: 'child', child_run_id: 'run-child-7', cause: 'card declined' });
    const outcome = await runOnce(
      async ({ step }) => {
        try {
          return await step.invoke('child');
        } catch (err) {
          caught = err as InvokeError;
          throw err;
        }
      },
      { memo: [{ id: 'run-1:child:0', name: 'child', status: 'failed', error }] },
    );
    expect(caught).toBeInstanceOf(InvokeError);
    expect(caught).toMatchObject({ functionId: 'child', childRunId: 'run-child-7', causeMessage: 'card declined', code: 'INVOKE_FAILED', retryable: false });
    expect(caught!.message).toBe('invoked function "child" failed: card declined');
    expect(expectFailed(outcome).error).toMatchObject({ code: 'INVOKE_FAILED', retryable: false, message: 'invoked function "child" failed: card declined' });
    expect(outcome.steps).toEqual([]);
  });

  it.each<[string, string | undefined, Partial<InvokeError>]>([
    ['a message instead of a cause', JSON.stringify({ child_run_id: 'c-1', message: 'boom' }), { functionId: 'child', childRunId: 'c-1', causeMessage: 'boom' }],
    ['an error object as cause', JSON.stringify({ cause: { message: 'nested' } }), { causeMessage: 'nested' }],
    ['a non-JSON string', 'plain text failure', { causeMessage: 'plain text failure', childRunId: undefined }],
    ['no error at all', undefined, { causeMessage: 'unknown error' }],
    ['an empty object', '{}', { causeMessage: 'unknown error' }],
  ])('invoke failure parsing: %s', async (_label, error, expected) => {
    let caught: InvokeError | undefined;
    await runOnce(
      async ({ step }) => {
        await step.invoke('child').catch((err) => (caught = err));
      },
      { memo: [{ id: 'run-1:child:0', name: 'child', status: 'failed', error }] },
    );
    expect(caught).toBeInstanceOf(InvokeError);
    expect(caught).toMatchObject(expected);
  });

  it('invoke throws InvokeError("invoke timed out") for a timed_out row', async () => {
    let caught: InvokeError | undefined;
    await runOnce(
      async ({ step }) => {
        await step.invoke('child').catch((err) => (caught = err));
      },
      { memo: [{ id: 'run-1:child:0', name: 'child', status: 'timed_out' }] },
    );
    expect(caught).toBeInstanceOf(InvokeError);
    expect(caught!.message).toBe('invoke timed out');
    expect(caught!.functionId).toBe('child');
  });

  it('invokeAsync yields invoke_function_async and returns { runId } from the stored run_id', async () => {
    const yielded = expectYielded(await runOnce(async ({ step }) => step.invokeAsync('mailer', { to: 'a@b.c' })));
    expect(yielded.yield).toEqual({ type: 'invoke_function_async', step_id: 'run-1:mailer:0', function_id: 'mailer', input: { to: 'a@b.c' } });
    const done1 = expectCompleted(await runOnce(async ({ step }) => step.invokeAsync('mailer'), { memo: [done('run-1:mailer:0', { run_id: 'run-child-1' })] }));
    expect(done1.result).toEqual({ runId: 'run-child-1' });
    const broken = expectFailed(await runOnce(async ({ step }) => step.invokeAsync('mailer'), { memo: [done('run-1:mailer:0')] }));
    expect(broken.error.code).toBe('INVOKE_FAILED');
  });

  it('ends at the first wait: later primitives are not run even if started concurrently', async () => {
    const ran: string[] = [];
    const outcome = await runOnce(async ({ step }) => {
      await Promise.all([step.sleep('first', '1m'), step.run('concurrent', () => ran.push('concurrent')), step.invoke('child')]);
    });
    const yielded = expectYielded(outcome);
    expect(yielded.yield).toMatchObject({ type: 'sleep', step_id: 'run-1:first:0' });
    expect(ran).toEqual([]);
    expect(yielded.steps).toEqual([]);
  });

  it('still yields when the handler swallows the yield signal and returns or throws', async () => {
    const swallowed = await runOnce(async ({ step }) => {
      try {
        await step.sleep('nap', '1m');
      } catch {
        /* a user catch-all */
      }
      return 'pretend done';
    });
    expect(expectYielded(swallowed).yield.step_id).toBe('run-1:nap:0');

    const rethrown = await runOnce(async ({ step }) => {
      try {
        await step.waitForEvent('w', { event: 'e' });
      } catch (err) {
        throw new Error(`wrapped: ${String(err)}`);
      }
    });
    expect(expectYielded(rethrown).yield.type).toBe('wait_for_event');
  });

  it('a step.run body that waits yields rather than failing the step', async () => {
    const outcome = await runOnce(async ({ step }) => step.run('outer', () => step.sleep('inner', '1m')));
    const yielded = expectYielded(outcome);
    expect(yielded.yield.step_id).toBe('run-1:inner:0');
    expect(yielded.steps).toEqual([]);
  });
});

describe('retryable flag (WIRE-PROTOCOL.md 1.8)', () => {
  type Case = [label: string, handler: Handler, push: boolean, pull: boolean, code: string, hasStepId: boolean];
  const inStep = (err: unknown): Handler => async ({ step }) => step.run('s', () => Promise.reject(err));
  const outside = (err: unknown): Handler => async () => {
    throw err;
  };
  const cases: Case[] = [
    ['NonRetryableError', outside(new NonRetryableError('bad input')), false, false, 'NON_RETRYABLE', false],
    ['NonRetryableError with a custom code', outside(new NonRetryableError('bad', { code: 'BAD_ORDER' })), false, false, 'BAD_ORDER', false],
    ['RetryableError', outside(new RetryableError('try later')), true, true, 'RETRYABLE', false],
    ['IronflowError with its own flag', outside(new IronflowError('x', { code: 'MINE', retryable: true })), true, true, 'MINE', false],
    ['IronflowError default', outside(new IronflowError('x')), false, false, 'ERROR', false],
    ['InvokeError', outside(new InvokeError('child failed', 'c', undefined, 'x')), false, false, 'INVOKE_FAILED', false],
    ['plain Error in step.run', inStep(new Error('boom')), false, false, 'STEP_FAILED', true],
    ['retryable IronflowError in step.run', inStep(new RetryableError('flaky')), true, true, 'STEP_FAILED', true],
    ['non-retryable IronflowError in step.run', inStep(new NonRetryableError('no')), false, false, 'STEP_FAILED', true],
    ['fetch TypeError in step.run', inStep(new TypeError('fetch failed')), true, true, 'STEP_FAILED', true],
    ['other TypeError in step.run', inStep(new TypeError('x is not a function')), false, false, 'STEP_FAILED', true],
    ['plain Error outside steps', outside(new Error('boom')), false, true, 'ERROR', false],
    ['a thrown string outside steps', outside('just a string'), false, true, 'ERROR', false],
    ['fetch TypeError outside steps', outside(new TypeError('fetch failed')), true, true, 'ERROR', false],
  ];

  it.each(cases)('%s', async (_label, handler, push, pull, code, hasStepId) => {
    for (const [transport, retryable] of [
      ['push', push],
      ['pull', pull],
    ] as [Transport, boolean][]) {
      const failed = expectFailed(await runOnce(handler, { transport }));
      expect({ transport, retryable: failed.error.retryable, code: failed.error.code }).toEqual({ transport, retryable, code });
      expect(failed.error.step_id).toBe(hasStepId ? 'run-1:s:0' : undefined);
    }
  });

  it('a step timeout is retryable on both transports', async () => {
    for (const transport of ['push', 'pull'] as Transport[]) {
      const failed = expectFailed(await runOnce(async ({ step }) => step.run('s', () => new Promise(() => undefined), { timeout: 5 }), { transport }));
      expect(failed.error).toMatchObject({ code: 'STEP_TIMEOUT', retryable: true });
    }
  });

  it('a result that is not JSON-serializable fails non-retryable', async () => {
    const failed = expectFailed(await runOnce(async () => ({ big: BigInt(1) })));
    expect(failed.error).toMatchObject({ code: 'SERIALIZATION_ERROR', retryable: false });
  });
});

describe('resume shapes', () => {
  it('ignores invoke resumes: invokes resolve only through step rows', async () => {
    const resume: ResumeInfo = { step_id: 'run-1:child:0', type: 'invoke_function', data: { total: 1 } };
    const outcome = await runOnce(async ({ step }) => step.invoke('child'), { resume });
    expect(expectYielded(outcome).yield.type).toBe('invoke_function');
  });
});

describe('abort signal', () => {
  it('once the invocation is aborted (run cancelled, lease lost) no new step starts: every primitive throws StepsAbortedError (ABORTED)', async () => {
    const abort = new AbortController();
    const started: string[] = [];
    const caught: unknown[] = [];
    const outcome = await runOnce(
      async ({ step }) => {
        await step.run('a', () => {
          started.push('a');
          abort.abort(new Error('run cancelled'));
          return 1;
        });
        for (const next of [() => step.run('b', () => started.push('b')), () => step.sleep('nap', '1s'), () => step.invoke('child', { function: 'other' })]) {
          await next().catch((err: unknown) => caught.push(err));
        }
        return step.run('c', () => started.push('c'));
      },
      { signal: abort.signal },
    );
    expect(started).toEqual(['a']);
    expect(caught).toHaveLength(3);
    for (const err of caught) expect(err).toMatchObject({ name: 'StepsAbortedError', code: 'ABORTED', retryable: false, message: 'invocation aborted; no new step starts: run cancelled' });
    expect(expectFailed(outcome).error).toMatchObject({ code: 'ABORTED', retryable: false });
    expect(outcome.steps.map((s) => s.name)).toEqual(['a']);
  });
});
