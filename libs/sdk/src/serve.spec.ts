import type { PushRequest } from '@ironflow/contracts';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { NonRetryableError } from './errors';
import { createFunction } from './function';
import { SERVE_KEEP_ALIVE_MS, listen, serve } from './serve';
import { signPushBody } from './signature';

const KEY = 'whsec_test_key';

const greet = createFunction({ id: 'greet' }, async ({ event, step, run }) => {
  const name = await step.run('load-name', () => (event.data as { name: string }).name.toUpperCase());
  return { hello: name, attempt: run.attempt };
});

const napper = createFunction({ id: 'napper' }, async ({ step }) => {
  await step.run('before', () => 1);
  await step.sleep('nap', '1h');
  const approval = await step.waitForEvent('approval', { event: 'order.approved', match: 'data.orderId' });
  return { approval };
});

const failing = createFunction({ id: 'failing' }, async ({ step }) => {
  await step.run('charge', () => {
    throw new Error('card declined');
  });
});

const strict = createFunction({ id: 'strict' }, async () => {
  throw new NonRetryableError('order is invalid', { code: 'BAD_ORDER' });
});

const parent = createFunction({ id: 'parent' }, async ({ step }) => step.invoke('child', { x: 1 }));

function request(overrides: Partial<PushRequest> & Record<string, unknown> = {}): Record<string, unknown> {
  return {
    run_id: 'run-9',
    function_id: 'greet',
    attempt: 2,
    event: { id: 'evt-1', name: 'user.created', data: { name: 'ana' }, timestamp: '2025-01-01T00:00:00.000Z' },
    steps: [],
    ...overrides,
  };
}

async function startServer(options: Parameters<typeof serve>[0]): Promise<{ server: Server; url: string }> {
  const server = await listen(0, serve(options));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/ironflow` };
}

async function post(url: string, body: string, headers: Record<string, string> = {}) {
  const res = await fetch(url, { method: 'POST', headers: { 'Content-Type': 'application/json', ...headers }, body });
  return { status: res.status, headers: res.headers, body: (await res.json()) as any };
}

describe('serve() over a real HTTP server', () => {
  let server: Server;
  let url: string;

  beforeAll(async () => {
    ({ server, url } = await startServer({ functions: [greet, napper, failing, strict, parent], signingKey: '', env: 'staging' }));
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });

  it('answers 400 INVALID_JSON for a body that is not JSON', async () => {
    const res = await post(url, '{"run_id": ');
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ error: { code: 'INVALID_JSON', message: 'request body is not valid JSON' } });
    expect(res.headers.get('x-ironflow-environment')).toBe('staging');
    expect(res.headers.get('content-type')).toBe('application/json');
  });

  it('answers 400 VALIDATION_ERROR listing the offending paths', async () => {
    const res = await post(url, JSON.stringify(request({ run_id: undefined, attempt: '2' as never, resume: null as never, event: { id: 'e', name: 'n', data: {}, timestamp: 't', version: 0 } as never })));
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('VALIDATION_ERROR');
    for (const path of ['run_id', 'attempt', 'event.version', 'resume']) expect(res.body.error.message).toContain(path);
  });

  it('rejects null for optional fields but accepts steps: null', async () => {
    const nullSource = await post(url, JSON.stringify(request({ event: { id: 'e', name: 'n', data: { name: 'x' }, timestamp: 't', source: null } as never })));
    expect(nullSource.status).toBe(400);
    expect(nullSource.body.error.message).toContain('event.source');
    const nullSteps = await post(url, JSON.stringify(request({ steps: null as never })));
    expect(nullSteps.status).toBe(200);
  });

  it('answers 404 FUNCTION_NOT_FOUND for a function it does not serve', async () => {
    const res = await post(url, JSON.stringify(request({ function_id: 'nope' })));
    expect(res.status).toBe(404);
    expect(res.body.error.code).toBe('FUNCTION_NOT_FOUND');
  });

  it('runs a completed invocation and answers result and steps', async () => {
    const res = await post(url, JSON.stringify(request()));
    expect(res.status).toBe(200);
    expect(res.headers.get('x-ironflow-environment')).toBe('staging');
    expect(res.body.status).toBe('completed');
    expect(res.body.result).toEqual({ hello: 'ANA', attempt: 2 });
    expect(res.body.steps).toHaveLength(1);
    expect(res.body.steps[0]).toMatchObject({ id: 'run-9:load-name:0', name: 'load-name', type: 'invoke', status: 'completed', output: 'ANA' });
    expect(typeof res.body.steps[0].duration_ms).toBe('number');
    expect(Date.parse(res.body.steps[0].started_at)).not.toBeNaN();
  });

  it('answers yielded with the wait and only the new steps, then resumes through resume and rows', async () => {
    const first = await post(url, JSON.stringify(request({ function_id: 'napper' })));
    expect(first.status).toBe(200);
    expect(first.body.status).toBe('yielded');
    expect(first.body.yield).toMatchObject({ type: 'sleep', step_id: 'run-9:nap:0' });
    expect(first.body.steps.map((s: { id: string }) => s.id)).toEqual(['run-9:before:0']);
    expect('result' in first.body).toBe(false);

    const memo = [{ id: 'run-9:before:0', name: 'before', status: 'completed', output: 1 }];
    const second = await post(url, JSON.stringify(request({ function_id: 'napper', steps: memo as never, resume: { step_id: 'run-9:nap:0', type: 'sleep' } })));
    expect(second.body).toEqual({
      status: 'yielded',
      steps: [],
      yield: { type: 'wait_for_event', step_id: 'run-9:approval:0', event_filter: { event: 'order.approved', match: 'data.orderId', timeout: '7d' } },
      sent_at: expect.any(String),
    });

    const event = { id: 'evt-2', name: 'order.approved', data: { orderId: 'o-1' }, timestamp: '2025-01-01T01:00:00.000Z' };
    const third = await post(
      url,
      JSON.stringify(
        request({
          function_id: 'napper',
          steps: [...memo, { id: 'run-9:nap:0', name: 'nap', status: 'completed' }] as never,
          resume: { step_id: 'run-9:approval:0', type: 'wait_for_event', data: event },
        }),
      ),
    );
    expect(third.body).toEqual({ status: 'completed', result: { approval: event }, steps: [] });
  });

  it('answers failed with the step id of a failing step and the step report', async () => {
    const res = await post(url, JSON.stringify(request({ function_id: 'failing' })));
    expect(res.status).toBe(200);
    expect(res.body.status).toBe('failed');
    expect(res.body.error).toMatchObject({ message: 'step "charge" failed: card declined', code: 'STEP_FAILED', retryable: false, step_id: 'run-9:charge:0' });
    expect(res.body.steps).toHaveLength(1);
    expect(res.body.steps[0]).toMatchObject({ status: 'failed', error: { message: 'card declined', retryable: false } });
  });

  it('answers failed with a custom non-retryable code', async () => {
    const res = await post(url, JSON.stringify(request({ function_id: 'strict' })));
    expect(res.body.error).toMatchObject({ message: 'order is invalid', code: 'BAD_ORDER', retryable: false });
    expect(res.body.error.step_id).toBeUndefined();
  });

  it('keeps an idle keep-alive connection open longer than a push client does (65 s, not Node\'s 5 s)', () => {
    expect(SERVE_KEEP_ALIVE_MS).toBe(65_000);
    expect(server.keepAliveTimeout).toBe(65_000);
    expect(server.headersTimeout).toBe(66_000);
  });

  it('turns a failed invoke row into an INVOKE_FAILED failure', async () => {
    const rows = [{ id: 'run-9:child:0', name: 'child', status: 'failed', error: JSON.stringify({ function_id: 'child', child_run_id: 'run-c', cause: 'exploded' }) }];
    const res = await post(url, JSON.stringify(request({ function_id: 'parent', steps: rows as never })));
    expect(res.body.error).toMatchObject({ code: 'INVOKE_FAILED', retryable: false, message: 'invoked function "child" failed: exploded' });
  });
});

describe('serve() signature checks', () => {
  let server: Server;
  let url: string;

  beforeAll(async () => {
    ({ server, url } = await startServer({ functions: [greet], signingKey: KEY }));
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });

  const body = JSON.stringify(request());

  it('answers 401 SIGNATURE_MISSING without the header', async () => {
    const res = await post(url, body);
    expect(res.status).toBe(401);
    expect(res.body.error.code).toBe('SIGNATURE_MISSING');
    expect(res.headers.get('x-ironflow-environment')).toBe(process.env.IRONFLOW_ENV || 'default');
  });

  it('answers 401 SIGNATURE_INVALID for a wrong prefix, a short digest or a mismatch', async () => {
    const good = signPushBody(KEY, body);
    for (const header of [good.replace('sha256=', 'sha1='), 'sha256=abcd', signPushBody('other-key', body), good.slice(0, -1) + (good.endsWith('0') ? '1' : '0')]) {
      const res = await post(url, body, { 'X-Ironflow-Signature': header });
      expect({ header, status: res.status, code: res.body.error?.code }).toEqual({ header, status: 401, code: 'SIGNATURE_INVALID' });
    }
  });

  it('checks the signature before parsing the body', async () => {
    const res = await post(url, 'not json', { 'X-Ironflow-Signature': signPushBody('other-key', 'not json') });
    expect(res.body.error.code).toBe('SIGNATURE_INVALID');
  });

  it('accepts a correct signature in either hex case over the exact bytes', async () => {
    const spaced = JSON.stringify(request(), null, 2);
    const header = 'sha256=' + signPushBody(KEY, spaced).slice('sha256='.length).toUpperCase();
    const res = await post(url, spaced, { 'x-ironflow-signature': header });
    expect(res.status).toBe(200);
    expect(res.body.status).toBe('completed');
  });
});

describe('serve() options', () => {
  it('refuses two functions with the same id', () => {
    expect(() => serve({ functions: [greet, greet] })).toThrow('listed twice');
  });
});
