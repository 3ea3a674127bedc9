import { RUN_ERROR_CODES } from '@ironflow/contracts';
import { fromPushAnswer, fromPushRefusal } from './push-dispatcher';

describe('fromPushAnswer: a push endpoint\'s 200 body as a report', () => {
  const dispatchFailure = (message: string) => ({ kind: 'failed', error: { message, code: RUN_ERROR_CODES.PUSH_DISPATCH_FAILED, retryable: true } });

  it('a PushResponse becomes its report', () => {
    expect(fromPushAnswer('{"status":"completed","result":{"ok":1},"steps":[]}')).toEqual({ kind: 'completed', output: { ok: 1 }, steps: [] });
  });

  it('a body that is not JSON says so and shows its start, not a parser error as a failed call', () => {
    expect(fromPushAnswer('<html>oops</html>')).toEqual(dispatchFailure('push endpoint answered 200 with a body that is not JSON: <html>oops</html>'));
    expect(fromPushAnswer('')).toEqual(dispatchFailure('push endpoint answered 200 with a body that is not JSON: (empty)'));
  });

  it('JSON without a PushResponse status names the statuses it needs and shows the body', () => {
    expect(fromPushAnswer('{"hello":1}')).toEqual(dispatchFailure('push endpoint answered 200 without a PushResponse status ("completed", "yielded" or "failed"): {"hello":1}'));
    expect(fromPushAnswer('{"status":"yay"}')).toEqual(dispatchFailure('push endpoint answered 200 without a PushResponse status ("completed", "yielded" or "failed"): {"status":"yay"}'));
    expect(fromPushAnswer('[1]')).toEqual(dispatchFailure('push endpoint answered 200 without a PushResponse status ("completed", "yielded" or "failed"): [1]'));
  });
});

describe('fromPushRefusal: a push endpoint\'s answer other than 200', () => {
  const body401 = '{"error":{"message":"X-Ironflow-Signature header is required","code":"SIGNATURE_MISSING"}}';

  it('shows the status and the body\'s start, retryable', () => {
    expect(fromPushRefusal(503, 'busy', { nodeId: 'dispatcher-1', signs: false })).toEqual({
      kind: 'failed',
      error: { message: 'push endpoint answered 503: busy', code: RUN_ERROR_CODES.PUSH_DISPATCH_FAILED, retryable: true },
    });
  });

  it('a 401 from an unsigned node names the node and the signing key every pushing process needs, the api-gateway too', () => {
    expect(fromPushRefusal(401, body401, { nodeId: 'api-gateway-1', signs: false })).toEqual({
      kind: 'failed',
      error: {
        message:
          `push endpoint answered 401: ${body401} (node api-gateway-1 sent it unsigned (it has no IRONFLOW_SIGNING_KEY); every process that calls push endpoints ` +
          'needs the endpoint\'s signing key: the dispatchers, and the api-gateway unless IRONFLOW_GATEWAY_PUSH=false)',
        code: RUN_ERROR_CODES.PUSH_DISPATCH_FAILED,
        retryable: true,
      },
    });
  });

  it('a 401 to a signed request says it was signed with this node\'s key', () => {
    const report = fromPushRefusal(401, '{"error":{"code":"SIGNATURE_INVALID"}}', { nodeId: 'dispatcher-2', signs: true });
    expect(report).toMatchObject({ kind: 'failed', error: { retryable: true } });
    expect((report as { error: { message: string } }).error.message).toContain('(node dispatcher-2 sent it signed with its IRONFLOW_SIGNING_KEY; ');
  });
});
