import { FUNCTION_OPTIONS } from '@ironflow/engine';
import { FakeReply, FakeServer, RecordedRequest, startFakeServer } from '@ironflow/sdk/testing';
import { runCli } from './program';

const PREFIX = '/ironflow.v1.IronflowService/';

/** Runs the CLI against `server` and collects what it printed. */
async function cli(server: string, ...args: string[]): Promise<{ code: number; out: string[]; err: string[] }> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runCli(['node', 'ironflow', '--server', server, ...args], { out: (t) => out.push(t), err: (t) => err.push(t) });
  return { code, out, err };
}

const jsonParseError = (text: string): string => {
  try {
    JSON.parse(text);
  } catch (e) {
    return (e as Error).message;
  }
  throw new Error(`${text} parses`);
};

describe('ironflow CLI', () => {
  let server: FakeServer;
  let replies: Record<string, (req: RecordedRequest) => FakeReply>;

  beforeAll(async () => {
    server = await startFakeServer((req) => {
      const method = req.path.startsWith(PREFIX) ? req.path.slice(PREFIX.length) : '';
      return replies[method]?.(req) ?? { status: 404, body: { code: 'unimplemented', message: `no route ${req.path}` } };
    });
  });
  beforeEach(() => {
    replies = {};
    server.requests.length = 0;
  });
  afterAll(() => server.close());

  describe('emit --wait and invoke outcomes', () => {
    it('invoke: a completed run prints its outcome and exits 0', async () => {
      replies.InvokeFunctionSync = () => ({ status: 200, body: { runId: 'run-1', functionId: 'pay', status: 'completed', output: { ok: true }, durationMs: 12 } });
      const res = await cli(server.url, 'invoke', 'pay', '--data', '{"amount":5}', '--timeout', '500');
      expect(res).toEqual({ code: 0, out: ['run run-1 (pay) completed in 12 ms\noutput: {\n  "ok": true\n}'], err: [] });
      expect(server.requests[0].body).toEqual({ functionId: 'pay', input: { amount: 5 }, timeoutMs: 500 });
    });

    it('invoke: a run still running at the timeout prints "timed out" and exits 3', async () => {
      replies.InvokeFunctionSync = () => ({ status: 200, body: { runId: 'run-2', functionId: 'pay', status: 'running', durationMs: 500 } });
      expect(await cli(server.url, 'invoke', 'pay', '--timeout', '500')).toEqual({ code: 3, out: ['timed out after 500 ms: run run-2 (pay) is running'], err: [] });
      const json = await cli(server.url, 'invoke', 'pay', '--timeout', '500', '--json');
      expect(json.code).toBe(3);
      expect(JSON.parse(json.out[0])).toEqual({ runId: 'run-2', functionId: 'pay', status: 'running', durationMs: 500 });
    });

    it('emit --wait: a run waiting at the timeout prints "timed out" and exits 3', async () => {
      replies.TriggerSync = () => ({ status: 200, body: { eventId: 'evt-1', results: [{ runId: 'run-3', functionId: 'ship', status: 'waiting', durationMs: 250 }] } });
      expect(await cli(server.url, 'emit', 'order.placed', '--wait', '--timeout', '250')).toEqual({ code: 3, out: ['timed out after 250 ms: run run-3 (ship) is waiting'], err: [] });
      expect(server.requests[0].body).toEqual({ event: 'order.placed', data: {}, timeout_ms: 250 });
    });

    it('a failed run prints "run <id> (<function>) failed: [CODE] message" and exits 2; --json prints status, ids and error', async () => {
      replies.TriggerSync = () => ({ status: 200, body: { eventId: 'e', results: [{ runId: 'run-4', functionId: 'ship', status: 'failed', error: { message: 'carrier down', code: 'STEP_FAILED' } }] } });
      expect(await cli(server.url, 'emit', 'order.placed', '--wait')).toEqual({ code: 2, out: ['run run-4 (ship) failed: [STEP_FAILED] carrier down'], err: [] });
      const json = await cli(server.url, 'emit', 'order.placed', '--wait', '--json');
      expect(json.code).toBe(2);
      expect(JSON.parse(json.out[0])).toEqual({ status: 'failed', runId: 'run-4', functionId: 'ship', error: { message: 'carrier down', code: 'STEP_FAILED' } });
    });

    it('a cancelled run exits 2', async () => {
      replies.InvokeFunctionSync = () => ({ status: 200, body: { runId: 'run-5', functionId: 'pay', status: 'cancelled' } });
      expect(await cli(server.url, 'invoke', 'pay')).toEqual({ code: 2, out: ['run run-5 (pay) was cancelled'], err: [] });
      const json = await cli(server.url, 'invoke', 'pay', '--json');
      expect(JSON.parse(json.out[0])).toEqual({ status: 'cancelled', runId: 'run-5', functionId: 'pay' });
    });

    it('dev --help lists every function registration option with its semantics, refused ones as refused', async () => {
      const res = await cli(server.url, 'dev', '--help');
      expect(res.code).toBe(0);
      const help = res.out.join('\n');
      for (const option of FUNCTION_OPTIONS) {
        const line = help.split('\n').find((l) => l.trim().startsWith(`${option.name} `));
        expect(line).toBeDefined();
        expect(line).toContain(option.semantics.slice(0, 40));
        if (option.status === 'refused') expect(line).toContain('refused');
      }
    });

    it('documents the exit codes in the help of emit and invoke', async () => {
      for (const command of ['emit', 'invoke']) {
        const res = await cli(server.url, command, '--help');
        expect(res.code).toBe(0);
        const help = res.out.join('\n');
        expect(help).toContain('Exit codes:');
        expect(help).toContain('0  the run completed');
        expect(help).toContain('2  the run failed or was cancelled');
        expect(help).toContain('3  timed out');
        expect(help).toContain('1  error');
      }
    });
  });

  describe('errors', () => {
    it("prints the engine's code when the server sent one, else the Connect code; exit 1", async () => {
      replies.GetRun = () => ({ status: 404, body: { code: 'not_found', message: 'run run-x not found', ironflowCode: 'RUN_NOT_FOUND' } });
      replies.GetRunSteps = () => ({ status: 200, body: { steps: [] } });
      expect(await cli(server.url, 'run', 'get', 'run-x')).toEqual({ code: 1, out: [], err: ['error [RUN_NOT_FOUND]: GetRun: run run-x not found'] });

      replies.CancelRun = () => ({ status: 400, body: { code: 'invalid_argument', message: 'bad id' } });
      expect(await cli(server.url, 'run', 'cancel', 'x')).toEqual({ code: 1, out: [], err: ['error [invalid_argument]: CancelRun: bad id'] });
    });

    it('with --json prints the error as {"error":{"code","message"}} on stderr', async () => {
      replies.GetRun = () => ({ status: 404, body: { code: 'not_found', message: 'run run-x not found', ironflowCode: 'RUN_NOT_FOUND' } });
      replies.GetRunSteps = () => ({ status: 200, body: { steps: [] } });
      const res = await cli(server.url, 'run', 'get', 'run-x', '--json');
      expect(res.code).toBe(1);
      expect(res.out).toEqual([]);
      expect(res.err.map((line) => JSON.parse(line))).toEqual([{ error: { code: 'RUN_NOT_FOUND', message: 'GetRun: run run-x not found' } }]);
    });

    it('an unreachable server: UNREACHABLE with the URL and a hint', async () => {
      const gone = await startFakeServer(() => ({ status: 200 }));
      await gone.close();
      expect(await cli(gone.url, 'run', 'list')).toEqual({
        code: 1,
        out: [],
        err: [`error [UNREACHABLE]: cannot reach ${gone.url} (is ironflow dev running? set --server or IRONFLOW_SERVER_URL)`],
      });
      const json = await cli(gone.url, 'invoke', 'pay', '--json');
      expect(json.err.map((line) => JSON.parse(line))).toEqual([
        { error: { code: 'UNREACHABLE', message: `cannot reach ${gone.url} (is ironflow dev running? set --server or IRONFLOW_SERVER_URL)` } },
      ]);
    });

    it('--data that is not JSON: "--data: not JSON: <reason>", nothing sent', async () => {
      expect(await cli(server.url, 'emit', 'x', '--data', '{bad')).toEqual({ code: 1, out: [], err: [`error [INVALID_ARGUMENT]: --data: not JSON: ${jsonParseError('{bad')}`] });
      const json = await cli(server.url, 'invoke', 'pay', '--data', 'nope', '--json');
      expect(json.err.map((line) => JSON.parse(line))).toEqual([{ error: { code: 'INVALID_ARGUMENT', message: `--data: not JSON: ${jsonParseError('nope')}` } }]);
      expect(server.requests).toEqual([]);
    });

    it.each(['null', '42', '"text"', '[1,2]'])('--data %s (JSON, not an object) is refused: "--data: not a JSON object"', async (data) => {
      expect(await cli(server.url, 'invoke', 'pay', '--data', data)).toEqual({ code: 1, out: [], err: [`error [INVALID_ARGUMENT]: --data: not a JSON object: ${data}`] });
      expect(server.requests).toEqual([]);
    });

    it('a usage error from the argument parser is JSON too with --json', async () => {
      const res = await cli(server.url, 'invoke', 'pay', '--timeout', 'soon', '--json');
      expect(res.code).toBe(1);
      expect(res.err.map((line) => JSON.parse(line))).toEqual([{ error: { code: 'INVALID_ARGUMENT', message: "option '--timeout <ms>' argument 'soon' is invalid. a positive whole number" } }]);
      const text = await cli(server.url, 'invoke', 'pay', '--timeout', 'soon');
      expect(text.code).toBe(1);
      expect(text.err[0]).toBe("error: option '--timeout <ms>' argument 'soon' is invalid. a positive whole number");
    });
  });
});
