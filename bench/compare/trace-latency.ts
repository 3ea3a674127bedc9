/**
 * Where one sequential TriggerSync's time goes, part by part, on `single` or `cluster` of
 * `bench/compare` (the same services, push worker and SDK client). Every process of the system
 * and this one load `trace-preload` (timestamps of pg statements, HTTP, undici and NATS hops);
 * after a warm-up, `--calls` sequential one-step calls are traced and each is cut at fixed
 * milestones (the trigger's statement, the push call, the report's statement, the answer…; on the
 * cluster with `IRONFLOW_GATEWAY_PUSH=false` in the environment, which its services inherit, the
 * forwarded trigger's and the RESULTS frame's NATS hops too).
 * Prints p50 / mean / p90 of each part, ms. A part's figure is less noisy than the total under
 * load: compare parts before and after a change. See bench/README.md "compare".
 *
 * With `--workload parent`, the calls are parent+child runs (`bench.parent` invokes `bench.child`):
 * no fixed milestones fit them, so it prints the median call's timeline instead (every traced
 * event of every process, ms from the call's start) and the pg statements per call by process.
 *
 *   node dist/bench/compare/trace-latency.js [--only single|cluster] [--calls 300] [--workload one-step|parent]
 */
import { mkdtempSync, readFileSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { intArg, runBenchmark, stringArg, table } from '../lib/common';

/**
 * A milestone: the first event after the previous one, in a process whose start line matches
 * `role`. An `optional` milestone counts only when it comes before the next milestone's event (a
 * COMMIT that a one-statement unit of work does not send must not be matched to a later one).
 */
type Milestone = [part: string, role: RegExp, event: RegExp, at: 'start' | 'end', optional?: 'optional'];

const SERVER = /apps\/ironflow\/src\/main\.js dev/;
const GATEWAY = /apps\/api-gateway\//;
const DISPATCHER = /apps\/dispatcher\//;
const WORKER = /bench\/compare\/worker\.js/;

/** The trigger's unit of work (event, run, claim and lease): its BEGIN when it has one, the common case's statement (`WITH simple`), its COMMIT when it has one. */
const TRIGGER = (engine: RegExp): Milestone[] => [
  ['→ trigger BEGIN or statement sent', engine, /^pg \S+ (START TRANSACTION|WITH simple)/, 'start'],
  ['trigger statement (event, run, claim, lease)', engine, /^pg \S+ WITH simple/, 'end'],
  ['trigger COMMIT', engine, /^pg \S+ COMMIT$/, 'end', 'optional'],
];

const PUSH_AND_REPORT = (engine: RegExp): Milestone[] => [
  ['→ push call sent', engine, /^und-sent POST \/$/, 'end'],
  ['→ worker has the request', WORKER, /^srv-req/, 'end'],
  ['worker handling (serve)', WORKER, /^srv-fin/, 'end'],
  ['→ push answer', engine, /^und-headers \/$/, 'end'],
  ['→ report statement sent (group commit)', engine, /^pg \S+ WITH input/, 'start'],
  ['report: outcome, steps, lease (one statement)', engine, /^pg \S+ WITH input/, 'end'],
];

const MILESTONES: Record<string, Milestone[]> = {
  single: [
    ['client → server has the request', SERVER, /^srv-req .*TriggerSync/, 'end'],
    ...TRIGGER(SERVER),
    ...PUSH_AND_REPORT(SERVER),
    ['→ answer sent (in-process frame)', SERVER, /^srv-fin .*TriggerSync/, 'end'],
  ],
  // The gateway calls the push run itself (IRONFLOW_GATEWAY_PUSH, default true).
  cluster: [
    ['client → gateway has the request', GATEWAY, /^srv-req .*TriggerSync/, 'end'],
    ...TRIGGER(GATEWAY),
    ...PUSH_AND_REPORT(GATEWAY),
    ['→ answer sent (in-process frame)', GATEWAY, /^srv-fin .*TriggerSync/, 'end'],
  ],
  // IRONFLOW_GATEWAY_PUSH=false in the environment: the gateway hands the trigger to a dispatcher.
  'cluster-forward': [
    ['client → gateway has the request', GATEWAY, /^srv-req .*TriggerSync/, 'end'],
    ['→ trigger forwarded (NATS request sent)', GATEWAY, /^nats-pub .*trigger\.sync$/, 'end'],
    ['→ dispatcher has it', DISPATCHER, /^nats-recv .*trigger\.sync$/, 'end'],
    ...TRIGGER(DISPATCHER),
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
  const parts = new Map<string, number[]>([
    ...milestones.map(([part]) => [part, []] as [string, number[]]),
    ['→ client has the answer', []],
    ['HTTP exchange (client sent → answer read)', []],
    ['client before and after it (SDK, emitSync)', []],
    ['call (as bench/compare times it)', []],
  ]);
  for (const call of calls(lines)) {
    const t0 = call[0].end;
    const t1 = call[call.length - 1].end;
    let previous = t0;
    const firstHit = ([, role, event, at]: Milestone, after: number) =>
      call!
        .filter((l) => role.test(roles.get(l.pid) ?? '') && event.test(l.event))
        .map((l) => (at === 'start' ? l.start : l.end))
        .filter((t) => t >= after)
        .sort((a, b) => a - b)[0];
    milestones.forEach((milestone, i) => {
      const hit = firstHit(milestone, previous);
      if (hit === undefined) return;
      const next = milestones[i + 1] && firstHit(milestones[i + 1], previous);
      if (milestone[4] === 'optional' && next !== undefined && next < hit) return;
      parts.get(milestone[0])!.push(hit - previous);
      previous = hit;
    });
    parts.get('→ client has the answer')!.push(t1 - previous);
    parts.get('HTTP exchange (client sent → answer read)')!.push(t1 - t0);
    // The calls are sequential: the n-th traced exchange is the n-th call timed by the phase.
    const latency = latencies[parts.get('call (as bench/compare times it)')!.length];
    if (latency !== undefined) {
      parts.get('client before and after it (SDK, emitSync)')!.push(latency - (t1 - t0));
      parts.get('call (as bench/compare times it)')!.push(latency);
    }
  }
  return parts;
}

/** Each traced call's lines (all processes), from its `und-create` to its `und-done` in the client. */
function calls(lines: Line[]): Line[][] {
  const client = String(process.pid);
  const out: Line[][] = [];
  const begin = lines.findIndex((l) => l.event === 'MARK begin');
  const end = lines.findIndex((l) => l.event === 'MARK end');
  let call: Line[] | undefined;
  for (const line of lines.slice(begin, end)) {
    if (line.pid === client && /^und-create .*TriggerSync/.test(line.event)) call = [];
    if (!call) continue;
    call.push(line);
    if (line.pid === client && /^und-done .*TriggerSync/.test(line.event)) {
      out.push(call);
      call = undefined;
    }
  }
  return out;
}

/** The median call's timeline and the pg statements per call by process role. */
function timeline(lines: Line[], roles: Map<string, string>): string {
  const traced = calls(lines);
  if (traced.length === 0) return 'no traced call';
  const span = (c: Line[]) => c[c.length - 1].end - c[0].end;
  const median = [...traced].sort((a, b) => span(a) - span(b))[Math.floor(traced.length / 2)];
  const role = (pid: string) => (roles.get(pid) ?? 'client').replace(/^.*dist\//, '').slice(0, 28);
  const t0 = median[0].end;
  const out = [`median call: ${span(median).toFixed(1)} ms (of ${traced.length}; ms from its start, a pg line at its statement's start)`];
  for (const l of [...median].sort((a, b) => a.start - b.start)) out.push(`${(l.start - t0).toFixed(2).padStart(9)} ${(l.end - l.start).toFixed(2).padStart(7)}  ${role(l.pid).padEnd(28)} ${l.event}`);
  const perRole = new Map<string, number>();
  for (const c of traced) for (const l of c) if (/^pg/.test(l.event)) perRole.set(role(l.pid), (perRole.get(role(l.pid)) ?? 0) + 1);
  out.push('pg statements per call (inside the call\'s window): ' + [...perRole].map(([r, n]) => `${r} ${(n / traced.length).toFixed(2)}`).join(', '));
  return out.join('\n');
}

async function main(): Promise<void> {
  const system = stringArg('only') ?? 'single';
  const workload = stringArg('workload') ?? 'one-step';
  if (workload !== 'one-step' && workload !== 'parent') throw new Error(`--workload: ${JSON.stringify(workload)} is not one-step or parent`);
  // The services inherit the environment: IRONFLOW_GATEWAY_PUSH=false traces the forwarded path.
  const milestones = MILESTONES[system === 'cluster' && /^(false|0)$/.test(process.env.IRONFLOW_GATEWAY_PUSH ?? '') ? 'cluster-forward' : system];
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
    if (workload === 'parent') await sut.phase({ kind: 'sequential', workload: 'parent-child', n: 20 });
    trace('MARK begin');
    const result = await sut.phase({ kind: 'sequential', workload: workload === 'parent' ? 'parent-child' : 'one-step', n: calls });
    trace('MARK end');
    if (result.failed > 0) throw new Error(`${result.failed} call(s) failed, first: ${result.firstError}`);
    latencies = result.latenciesMs;
  } finally {
    await sut.stop();
  }
  await new Promise((resolve) => setTimeout(resolve, 1500)); // every process's last lines flushed
  const { lines, roles } = readTrace(dir);
  if (workload === 'parent') {
    const sorted = [...latencies].sort((a, b) => a - b);
    console.log(timeline(lines, roles));
    console.log(`call latency ms: p50 ${sorted[Math.floor(sorted.length / 2)]?.toFixed(1)}, p90 ${sorted[Math.floor(sorted.length * 0.9)]?.toFixed(1)}`);
    console.log(`trace: ${dir}`);
    return;
  }
  const parts = breakdown(lines, roles, milestones, latencies);
  const q = (values: number[], p: number) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor(values.length * p))];
  const f = (v: number | undefined) => (v === undefined ? '—' : v.toFixed(2));
  const rows: (string | number)[][] = [[`${system}, ${calls} sequential calls (ms)`, 'p50', 'mean', 'p90', 'calls']];
  for (const [part, values] of parts) rows.push([part, f(q(values, 0.5)), f(values.reduce((a, b) => a + b, 0) / values.length), f(q(values, 0.9)), values.length]);
  console.log(table(rows));
  console.log(`trace: ${dir}`);
}

runBenchmark(main);
