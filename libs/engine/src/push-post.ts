import { Dispatcher } from 'undici';

/** What a push endpoint answered: its HTTP status and its body as UTF-8 text. */
export interface PushAnswer {
  statusCode: number;
  text: string;
}

/**
 * POSTs `body` to `url` through `dispatcher` (the push allow-list's keep-alive Agent) with undici's
 * handler API, `Dispatcher.dispatch`: the answer's body is gathered as bytes, with none of the
 * per-call objects of `request()` (a body stream, an abort-signal listener, an async resource),
 * which cost a push dispatch about as much as the rest of its HTTP work (issue 11). Follows no
 * redirect: a 3xx is an answer like any other.
 *
 * Resolves with the status and the body, whatever the status. Rejects with undici's error for a
 * failed connection or exchange (a connection the allow-list refused carries its
 * `PushEndpointRefused`, itself or as `cause`), or, once `timeoutMs` has passed without the whole
 * answer, with a `DOMException` named `TimeoutError` (the exchange is aborted then; a request still
 * waiting for its connection is aborted when it gets one, as `request()` with a signal does).
 */
export function postPush(dispatcher: Dispatcher, url: string, headers: Record<string, string>, body: string, timeoutMs: number): Promise<PushAnswer> {
  return new Promise<PushAnswer>((resolve, reject) => {
    const { origin, pathname, search } = new URL(url);
    const chunks: Buffer[] = [];
    let statusCode = 0;
    let abort: ((reason: Error) => void) | undefined;
    let timedOut: Error | undefined;
    let settled = false;
    const settle = (fn: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      fn();
    };
    const timer = setTimeout(() => {
      timedOut = new DOMException(`push call timed out after ${timeoutMs} ms`, 'TimeoutError');
      abort?.(timedOut);
    }, timeoutMs);
    timer.unref();
    try {
      dispatcher.dispatch({ origin, path: pathname + search, method: 'POST', headers, body }, {
        onConnect(abortRequest) {
          if (timedOut) abortRequest(timedOut);
          else abort = abortRequest;
        },
        onHeaders(status) {
          // An informational answer (1xx) is not the answer.
          if (status >= 200) statusCode = status;
          return true;
        },
        onData(chunk) {
          chunks.push(chunk);
          return true;
        },
        onComplete() {
          settle(() => resolve({ statusCode, text: Buffer.concat(chunks).toString('utf8') }));
        },
        onError(err) {
          settle(() => reject(timedOut ?? err));
        },
      });
    } catch (err) {
      settle(() => reject(err));
    }
  });
}
