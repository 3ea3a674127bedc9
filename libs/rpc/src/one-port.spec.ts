/**
 * `listenOnePort`: HTTP/1.1 and h2c (prior knowledge) told apart by the first bytes, however they
 * are split across TCP segments, and a `close()` that ends every connection.
 */
import * as http from 'node:http';
import * as http2 from 'node:http2';
import * as net from 'node:net';
import { listenOnePort, type OnePortServer } from './one-port';

const PREFACE = 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n';

function http1Listener(): http.RequestListener {
  return (req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => res.end(`h1 ${req.method} ${req.url} ${body}`));
  };
}

function http2Handler(req: http2.Http2ServerRequest, res: http2.Http2ServerResponse): void {
  res.end(`h2 ${req.method} ${req.url} ${req.httpVersion}`);
}

async function h2Get(port: number, path: string): Promise<{ text: string; session: http2.ClientHttp2Session }> {
  const session = http2.connect(`http://127.0.0.1:${port}`);
  session.on('error', () => undefined);
  const text = await new Promise<string>((resolve, reject) => {
    const req = session.request({ ':path': path });
    let data = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => (data += c));
    req.on('end', () => resolve(data));
    req.on('error', reject);
    req.end();
  });
  return { text, session };
}

/** Writes `chunks` to a raw TCP connection with a pause between them; resolves with all it read. */
function rawExchange(port: number, chunks: (string | Buffer)[], gapMs = 30): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    const received: Buffer[] = [];
    socket.on('data', (d) => received.push(d));
    socket.on('error', reject);
    socket.on('close', () => resolve(Buffer.concat(received)));
    socket.on('connect', async () => {
      for (const chunk of chunks) {
        socket.write(chunk);
        await new Promise((r) => setTimeout(r, gapMs));
      }
    });
  });
}

describe('listenOnePort', () => {
  let server: OnePortServer | undefined;

  afterEach(async () => {
    await server?.close();
    server = undefined;
  });

  it('serves HTTP/1.1 and h2c on the same port chosen by the OS', async () => {
    server = await listenOnePort({ port: 0, host: '127.0.0.1', http1: http1Listener(), http2Handler });
    expect(server.port).toBeGreaterThan(0);

    const res = await fetch(`http://127.0.0.1:${server.port}/a?b=1`, { method: 'POST', body: 'hi' });
    expect(await res.text()).toBe('h1 POST /a?b=1 hi');

    const { text, session } = await h2Get(server.port, '/ironflow.v1.IronflowService/Health');
    expect(text).toBe('h2 GET /ironflow.v1.IronflowService/Health 2.0');
    session.close();
  });

  it('accepts an existing http.Server for the HTTP/1 side', async () => {
    const existing = http.createServer(http1Listener());
    server = await listenOnePort({ port: 0, host: '127.0.0.1', http1: existing, http2Handler });
    const res = await fetch(`http://127.0.0.1:${server.port}/x`);
    expect(await res.text()).toBe('h1 GET /x ');
    expect(existing.listening).toBe(false);
  });

  it('routes an HTTP/1 request that arrives one byte at a time', async () => {
    server = await listenOnePort({ port: 0, host: '127.0.0.1', http1: http1Listener(), http2Handler });
    const request = 'POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok';
    const bytes = [...request.slice(0, 6)].concat(request.slice(6));
    const answer = (await rawExchange(server.port, bytes, 20)).toString('latin1');
    expect(answer).toMatch(/^HTTP\/1\.1 200 OK/);
    expect(answer).toContain('h1 POST /slow ok');
  });

  it('routes an HTTP/2 connection whose preface is split across segments', async () => {
    server = await listenOnePort({ port: 0, host: '127.0.0.1', http1: http1Listener(), http2Handler });
    // The preface in three writes, then an empty SETTINGS frame and a GOAWAY so the server closes.
    const settings = Buffer.from([0, 0, 0, 4, 0, 0, 0, 0, 0]);
    const goaway = Buffer.from([0, 0, 8, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    const answer = await rawExchange(server.port, [PREFACE.slice(0, 3), PREFACE.slice(3, 10), PREFACE.slice(10), settings, goaway]);
    // The server's first frame is its SETTINGS frame (type 0x4) — an HTTP/2 server answered.
    expect(answer.length).toBeGreaterThanOrEqual(9);
    expect(answer[3]).toBe(0x4);
  });

  it('close() ends idle keep-alive, open h2 sessions and silent connections promptly', async () => {
    // A grace far longer than the test's deadline: a close that waited it out fails the deadline.
    server = await listenOnePort({ port: 0, host: '127.0.0.1', http1: http1Listener(), http2Handler, closeGraceMs: 120_000 });
    const port = server.port;
    await (await fetch(`http://127.0.0.1:${port}/keepalive`)).text();
    const { session } = await h2Get(port, '/');
    const silent = net.connect(port, '127.0.0.1');
    silent.on('error', () => undefined);
    await new Promise((r) => silent.once('connect', r));
    const silentClosed = new Promise((r) => silent.once('close', r));
    const sessionClosed = new Promise((r) => session.once('close', r));

    const closing = server.close();
    server = undefined;
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error('close() and its connections not done after 30 s: it waited for the grace')), 30_000)));
    await Promise.race([Promise.all([closing, silentClosed, sessionClosed]), deadline]).finally(() => clearTimeout(timer));
    await expect(fetch(`http://127.0.0.1:${port}/`)).rejects.toThrow();
  });

  it('close() lets an HTTP/1 request in flight finish, then ends its connection', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let arrived!: () => void;
    const inFlight = new Promise<void>((r) => (arrived = r));
    server = await listenOnePort({
      port: 0,
      host: '127.0.0.1',
      http1: (_req, res) => {
        arrived();
        void gate.then(() => res.end('late'));
      },
      http2Handler,
    });
    const pending = fetch(`http://127.0.0.1:${server.port}/`).then((r) => r.text());
    // Close only once the request is in the handler (a fixed sleep raced with a loaded machine).
    await inFlight;
    const closed = server.close();
    server = undefined;
    release();
    expect(await pending).toBe('late');
    await closed;
  });

  it('rejects when the port is taken', async () => {
    server = await listenOnePort({ port: 0, host: '127.0.0.1', http1: http1Listener(), http2Handler });
    await expect(
      listenOnePort({ port: server.port, host: '127.0.0.1', http1: http1Listener(), http2Handler }),
    ).rejects.toMatchObject({ code: 'EADDRINUSE' });
  });
});
