/**
 * One raw HTTP/2 (h2c, prior knowledge) request, for the wire tests of the Connect binary, gRPC
 * and Connect-stream protocols: the bytes and headers go out as given, and the answer comes back
 * as status, headers, body bytes and trailers. Nothing from a Connect or gRPC library.
 */
import * as http2 from 'node:http2';

export interface H2Answer {
  status: number;
  headers: http2.IncomingHttpHeaders;
  body: Buffer;
  trailers: http2.IncomingHttpHeaders;
}

/** Sends `body` (then ends the request unless `keepOpen`) and collects the whole answer; at most `timeoutMs`. */
export function h2Request(port: number, path: string, headers: Record<string, string>, body: Buffer, timeoutMs = 10_000): Promise<H2Answer> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(`http://127.0.0.1:${port}`);
    session.on('error', reject);
    const timer = setTimeout(() => {
      session.destroy();
      reject(new Error(`no complete answer to ${path} within ${timeoutMs} ms`));
    }, timeoutMs);
    const req = session.request({ ':method': 'POST', ':path': path, ...headers });
    const chunks: Buffer[] = [];
    let responseHeaders: http2.IncomingHttpHeaders = {};
    let trailers: http2.IncomingHttpHeaders = {};
    req.on('response', (h) => (responseHeaders = h));
    req.on('trailers', (t) => (trailers = t));
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('error', (err) => {
      clearTimeout(timer);
      session.destroy();
      reject(err);
    });
    req.on('end', () => {
      clearTimeout(timer);
      session.close();
      resolve({ status: Number(responseHeaders[':status']), headers: responseHeaders, body: Buffer.concat(chunks), trailers });
    });
    req.end(body);
  });
}

/** A Connect / gRPC envelope: 1 flag byte, 4-byte big-endian length, the message. */
export function envelope(message: Uint8Array, flags = 0): Buffer {
  const head = Buffer.alloc(5);
  head.writeUInt8(flags, 0);
  head.writeUInt32BE(message.length, 1);
  return Buffer.concat([head, Buffer.from(message)]);
}

/** Splits a body into its envelopes. */
export function envelopes(body: Buffer): { flags: number; data: Buffer }[] {
  const out: { flags: number; data: Buffer }[] = [];
  for (let at = 0; at + 5 <= body.length; ) {
    const length = body.readUInt32BE(at + 1);
    out.push({ flags: body[at], data: body.subarray(at + 5, at + 5 + length) });
    at += 5 + length;
  }
  return out;
}
