import { RUN_ERROR_CODES } from '@ironflow/contracts';
import { fromPushAnswer } from './push-dispatcher';

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
