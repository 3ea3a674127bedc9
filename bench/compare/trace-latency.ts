/**
 * Where one sequential TriggerSync's time goes, part by part, on `single` or `cluster` of
 * `bench/compare` (the same services, push worker and SDK client). Every process of the system
 * and this one load `trace-preload` (timestamps of pg statements, HTTP, undici and NATS hops);
 * after a warm-up, `--calls` sequential one-step calls are traced and each is cut at fixed
 * milestones (the trigger's BEGIN, its COMMIT, the push call, the report's COMMIT, the answer…).
 * Prints p50 / mean / p90 of each part, ms. A part's figure is less noisy than the total under
 * load: compare parts before and after a change. See bench/README.md "compare".
 *
 *   node dist/bench/compare/trace-latency.js [--only single|cluster] [--calls 300]
 */
import { mkdtempSync, readFileSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { intArg, runBenchmark, stringArg, table } from '../lib/common';

/** A milestone: the first event after the previous one, in a process whose start line matches `role`. */
type Milestone = [part: string, role: RegExp, event: RegExp, at: 'start' | 'end'];

const SERVER = /apps\/ironflow\/src\/main\.js dev/;
const GATEWAY = /apps\/api-gateway\//;
const DISPATCHER = /apps\/dispatcher\//;
const WORKER = /bench\/compare\/worker\.js/;

const PUSH_AND_REPORT = (engine: RegExp): Milestone[] => [
  ['→ push call sent', engine, /^und-sent POST \/$/, 'end'],
  ['→ worker has the request', WORKER, /^srv-req/, 'end'],
  ['worker handling (serve)', WORKER, /^srv-fin/, 'end'],
  ['→ push answer', engine, /^und-headers \/$/, 'end'],
  // The report: the group commit's one statement (`WITH input AS`), or a transaction (BEGIN … COMMIT).
  ['→ report sent', engine, /^pg \S+ (START TRANSACTION|WITH input AS)/, 'start'],
  ['report (its statement or transaction)', engine, /^pg \S+ (COMMIT$|WITH input AS)/, 'end'],
];

const MILESTONES: Record<string, Milestone[]> = {
  single: [
    ['client → server has the request', SERVER, /^srv-req .*TriggerSync/, 'end'],
    // The common-case trigger with its claim: one statement without BEGIN and COMMIT (`WITH simple AS`).
    ['→ trigger sent', SERVER, /^pg \S+ WITH simple AS/, 'start'],
    ['trigger (one statement, with its claim)', SERVER, /^pg \S+ WITH simple AS/, 'end'],
    ...PUSH_AND_REPORT(SERVER),
    ['→ answer sent (in-process frame)', SERVER, /^srv-fin .*TriggerSync/, 'end'],
  ],
  cluster: [
    // The gateway forwards the TriggerSync to a dispatcher, whose common-case trigger (event, run,
    // claim and lease) is one statement without BEGIN and COMMIT (`WITH simple AS`).
    ['client → gateway has the request', GATEWAY, /^srv-req .*TriggerSync/, 'end'],
    ['→ dispatcher sends the trigger', DISPATCHER, /^pg \S+ WITH simple AS/, 'start'],
    ['trigger (one statement)', DISPATCHER, /^pg \S+ WITH simple AS/, 'end'],
    ...PUSH_AND_REPORT(DISPATCHER),
    ['→ RESULTS frame published', DISPATCHER, /^nats-pub results\./, 'end'],
    ['→ gateway has the frame', GATEWAY, /^nats-recv results\./, 'end'],
    ['→ answer sent', GATEWAY, /^srv-fin .*TriggerSync/, 'end'],
  ],
};

interface Line {
  end: number;
  start: number;
  pid: string;
  event: string;
}

function readTrace(dir: string): { lines: Line[]; roles: Map<string, string> } {
  const lines: Line[] = [];
  const roles = new Map<string, string>();
  for (const name of readdirSync(dir)) {
    for (const text of readFileSync(join(dir, name), 'utf8').split('\n')) {
      const m = /^(\S+) (\d+) (.*)$/.exec(text);
      if (!m) continue;
      const end = Number(m[1]);
      const pg = /^pg(?:-error)? ([\d.]+) /.exec(m[3]);
      if (m[3].startsWith('start ')) roles.set(m[2], m[3].slice(6));
      lines.push({ end, start: pg ? end - Number(pg[1]) : end, pid: m[2], event: m[3] });
    }
  }
  lines.sort((a, b) => a.end - b.end);
  return { lines, roles };
}

/** Each traced call's parts (ms), cut at `milestones`; a call missing a milestone skips that part. */
function breakdown(lines: Line[], roles: Map<string, string>, milestones: Milestone[], latencies: number[]): Map<string, number[]> {
  const client = String(process.pid);
  const parts = new Map<string, number[]>([
    ...milestones.map(([part]) => [part, []] as [string, number[]]),
    ['→ client has the answer', []],
    ['HTTP exchange (client sent → answer read)', []],
    ['client before and after it (SDK, emitSync)', []],
    ['call (as bench/compare times it)', []],
  ]);
  const begin = lines.findIndex((l) => l.event === 'MARK begin');
  const end = lines.findIndex((l) => l.event === 'MARK end');
  let call: Line[] | undefined;
  for (const line of lines.slice(begin, end)) {
    if (line.pid === client && /^und-create .*TriggerSync/.test(line.event)) call = [];
    if (!call) continue;
    call.push(line);
    if (line.pid !== client || !/^und-done .*TriggerSync/.test(line.event)) continue;
    const t0 = call[0].end;
    const t1 = line.end;
    let previous = t0;
    for (const [part, role, event, at] of milestones) {
      const hits = call
        .filter((l) => role.test(roles.get(l.pid) ?? '') && event.test(l.event))
        .map((l) => (at === 'start' ? l.start : l.end))
        .filter((t) => t >= previous)
        .sort((a, b) => a - b);
      if (hits.length === 0) continue;
      parts.get(part)!.push(hits[0] - previous);
      previous = hits[0];
    }
    parts.get('→ client has the answer')!.push(t1 - previous);
    parts.get('HTTP exchange (client sent → answer read)')!.push(t1 - t0);
    // The calls are sequential: the n-th traced exchange is the n-th call timed by the phase.
    const latency = latencies[parts.get('call (as bench/compare times it)')!.length];
    if (latency !== undefined) {
      parts.get('client before and after it (SDK, emitSync)')!.push(latency - (t1 - t0));
      parts.get('call (as bench/compare times it)')!.push(latency);
    }
    call = undefined;
  }
  return parts;
}

async function main(): Promise<void> {
  const system = stringArg('only') ?? 'single';
  const milestones = MILESTONES[system];
  if (!milestones) throw new Error(`--only: ${JSON.stringify(system)} is not traced (single, cluster)`);
  const calls = intArg('calls', 300);
  const dir = mkdtempSync(join(tmpdir(), 'ironflow-trace-'));
  process.env.IRONFLOW_TRACE_DIR = dir;
  process.env.NODE_OPTIONS = `${process.env.NODE_OPTIONS ?? ''} --require ${join(__dirname, 'trace-preload.js')}`.trim();
  // Loaded after the variables are set: this process (the client) is traced too.
  const { trace } = await import('./trace-preload');
  const { START } = await import('./systems');
  const sut = await START[system as 'single' | 'cluster']();
  let latencies: number[] = [];
  try {
    await sut.phase({ kind: 'closed', workload: 'one-step', inflight: 8, durationMs: 1000 });
    await sut.phase({ kind: 'sequential', workload: 'one-step', n: 50 });
    trace('MARK begin');
    const result = await sut.phase({ kind: 'sequential', workload: 'one-step', n: calls });
    trace('MARK end');
    if (result.failed > 0) throw new Error(`${result.failed} call(s) failed, first: ${result.firstError}`);
    latencies = result.latenciesMs;
  } finally {
    await sut.stop();
  }
  await new Promise((resolve) => setTimeout(resolve, 1500)); // every process's last lines flushed
  const { lines, roles } = readTrace(dir);
  const parts = breakdown(lines, roles, milestones, latencies);
  const q = (values: number[], p: number) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor(values.length * p))];
  const f = (v: number | undefined) => (v === undefined ? '—' : v.toFixed(2));
  const rows: (string | number)[][] = [[`${system}, ${calls} sequential calls (ms)`, 'p50', 'mean', 'p90', 'calls']];
  for (const [part, values] of parts) rows.push([part, f(q(values, 0.5)), f(values.reduce((a, b) => a + b, 0) / values.length), f(q(values, 0.9)), values.length]);
  console.log(table(rows));
  console.log(`trace: ${dir}`);
}

runBenchmark(main);
