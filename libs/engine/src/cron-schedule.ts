import { createHash } from 'node:crypto';
import { Cron } from 'croner';
import { FunctionDefinition, FunctionTrigger } from '@ironflow/contracts';

/** The name of a cron run's event when its trigger names none. */
export const CRON_EVENT_NAME = 'ironflow/cron';

const ZONE_PREFIX = /^(?:CRON_TZ|TZ)=(\S+)\s+/;

/** One cron trigger, parsed: its schedule in its time zone. Times are ms since the epoch. */
export interface CronTrigger {
  /** The trigger's `cron` as registered (with its `CRON_TZ=` prefix, if any). */
  expression: string;
  /** The IANA zone the schedule is read in (default `UTC`). */
  timezone: string;
  /** The event name the runs of this trigger see. */
  eventName: string;
  cron: Cron;
}

/**
 * Parses a trigger's `cron` (WIRE-PROTOCOL.md 5.3): 5 fields (minute resolution) or 6 (seconds
 * first), `@hourly`-style nicknames, optionally prefixed with `CRON_TZ=<zone> ` or `TZ=<zone> `
 * (an IANA zone; default UTC). Throws an `Error` whose message says what is wrong: an unknown
 * zone, a pattern croner refuses, a one-off date instead of a pattern, a schedule that never fires.
 */
export function parseCronTrigger(trigger: FunctionTrigger): CronTrigger {
  const expression = trigger.cron ?? '';
  const zone = ZONE_PREFIX.exec(expression);
  const timezone = zone ? zone[1] : 'UTC';
  const pattern = zone ? expression.slice(zone[0].length).trim() : expression.trim();
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: timezone });
  } catch {
    throw new Error(`unknown time zone "${timezone}" (an IANA name such as Europe/Berlin)`);
  }
  if (pattern.includes(':')) throw new Error(`"${pattern}" is a date, not a schedule`);
  let cron: Cron;
  try {
    cron = new Cron(pattern, { timezone, mode: '5-or-6-parts' });
  } catch (err) {
    throw new Error(String((err as Error).message ?? err).replace(/^CronPattern: /, ''));
  }
  if (cron.nextRun(new Date()) === null) throw new Error(`"${pattern}" never fires`);
  return { expression, timezone, eventName: trigger.event || CRON_EVENT_NAME, cron };
}

/** The parsed cron triggers of a definition (none when it has no cron trigger). */
export function cronTriggersOf(definition: FunctionDefinition): CronTrigger[] {
  return definition.triggers.filter((t) => t.cron).map(parseCronTrigger);
}

/** What a schedule row stores as `spec`: the cron expressions, so a changed schedule is told apart. */
export function cronSpecOf(triggers: CronTrigger[]): string {
  return JSON.stringify(triggers.map((t) => t.expression));
}

/** The first tick of any trigger strictly after `afterMs`; `null` when none fires again. */
export function nextTick(triggers: CronTrigger[], afterMs: number): number | null {
  let next: number | null = null;
  for (const t of triggers) {
    const at = t.cron.nextRun(new Date(afterMs))?.getTime() ?? null;
    if (at !== null && (next === null || at < next)) next = at;
  }
  return next;
}

/** The last tick of any trigger at or before `atMs`; `null` when none has fired. */
export function latestTick(triggers: CronTrigger[], atMs: number): number | null {
  let latest: number | null = null;
  for (const t of triggers) {
    const at = t.cron.previousRuns(1, new Date(atMs + 1))[0]?.getTime() ?? null;
    if (at !== null && at <= atMs && (latest === null || at > latest)) latest = at;
  }
  return latest;
}

/**
 * The ticks a scheduler pass at `nowMs` fires for a schedule at `nextAt` (DESIGN.md `scheduler`:
 * cron). A schedule no more than `catchUpMs` behind is late, not missed: every tick from `nextAt`
 * to `nowMs` fires, so a slow pass leaves no gap (at most `maxTicks`, the rest on the next pass).
 * A schedule further behind missed its ticks while no scheduler ran: they collapse into one run,
 * for the latest of them (catch up at most one).
 */
export function dueTicks(triggers: CronTrigger[], nextAt: number, nowMs: number, catchUpMs: number, maxTicks: number): number[] {
  if (nextAt > nowMs) return [];
  if (nextAt < nowMs - catchUpMs) {
    const latest = latestTick(triggers, nowMs);
    return latest === null ? [] : [latest];
  }
  const ticks: number[] = [];
  for (let t: number | null = nextAt; t !== null && t <= nowMs && ticks.length < maxTicks; t = nextTick(triggers, t)) ticks.push(t);
  return ticks;
}

/** The trigger a tick belongs to (the first whose schedule matches it). */
export function triggerOfTick(triggers: CronTrigger[], tickMs: number): CronTrigger {
  return triggers.find((t) => t.cron.match(new Date(tickMs))) ?? triggers[0];
}

/**
 * The event id of a function's tick: a UUID derived from (project, env, function, tick), so the
 * tick's event, and with it the tick's run (unique per function and event), is written once
 * however many schedulers fire it.
 */
export function tickEventId(project: string, env: string, functionId: string, tickMs: number): string {
  const h = createHash('sha256').update(`cron\0${project}\0${env}\0${functionId}\0${tickMs}`).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-5${h.slice(13, 16)}-${((parseInt(h[16], 16) & 0x3) | 0x8).toString(16)}${h.slice(17, 20)}-${h.slice(20, 32)}`;
}
