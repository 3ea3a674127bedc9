import { CRON_EVENT_NAME, cronTriggersOf, dueTicks, latestTick, nextTick, parseCronTrigger, tickEventId } from './cron-schedule';
import { DEFAULT_RETRY, FunctionDefinition } from '@ironflow/contracts';

const at = (iso: string) => Date.parse(iso);
const definition = (triggers: FunctionDefinition['triggers']): FunctionDefinition => ({ id: 'f', name: 'f', mode: 'pull', triggers, retry: DEFAULT_RETRY, timeoutMs: 1000, cancelOn: [] });

describe('cron schedules (croner)', () => {
  it('reads 5 fields as minutes and 6 fields as seconds first, in UTC by default', () => {
    const minutes = [parseCronTrigger({ cron: '*/15 * * * *' })];
    expect(new Date(nextTick(minutes, at('2024-03-10T10:07:30Z'))!).toISOString()).toBe('2024-03-10T10:15:00.000Z');
    const seconds = [parseCronTrigger({ cron: '*/5 * * * * *' })];
    expect(new Date(nextTick(seconds, at('2024-03-10T10:07:31Z'))!).toISOString()).toBe('2024-03-10T10:07:35.000Z');
    expect(minutes[0].timezone).toBe('UTC');
  });

  it('reads the schedule in the zone of a CRON_TZ= or TZ= prefix', () => {
    const ny = [parseCronTrigger({ cron: 'CRON_TZ=America/New_York 0 9 * * *' })];
    // 9:00 in New York is 14:00 UTC in winter (EST) and 13:00 UTC in summer (EDT).
    expect(new Date(nextTick(ny, at('2024-01-15T00:00:00Z'))!).toISOString()).toBe('2024-01-15T14:00:00.000Z');
    expect(new Date(nextTick(ny, at('2024-07-15T00:00:00Z'))!).toISOString()).toBe('2024-07-15T13:00:00.000Z');
    expect(parseCronTrigger({ cron: 'TZ=Asia/Tokyo 0 9 * * *' }).timezone).toBe('Asia/Tokyo');
  });

  it.each([
    ['61 * * * *', /minute/],
    ['* * *', /five, six, or seven/],
    ['* * * * * * *', /5 or 6 parts/],
    ['CRON_TZ=Mars/Olympus 0 9 * * *', /unknown time zone "Mars\/Olympus"/],
    ['2030-01-01T00:00:00', /a date, not a schedule/],
    ['0 0 30 2 *', /never fires/],
  ])('refuses %s, saying why', (cron, why) => {
    expect(() => parseCronTrigger({ cron })).toThrow(why);
  });

  it('the latest tick at or before a time includes a tick exactly at it', () => {
    const t = [parseCronTrigger({ cron: '0 * * * *' })];
    expect(latestTick(t, at('2024-03-10T10:00:00Z'))).toBe(at('2024-03-10T10:00:00Z'));
    expect(latestTick(t, at('2024-03-10T10:59:59.999Z'))).toBe(at('2024-03-10T10:00:00Z'));
  });

  it('several triggers make one schedule: the earliest next tick of any of them', () => {
    const t = cronTriggersOf(definition([{ event: 'a' }, { cron: '0 12 * * *', event: 'noon' }, { cron: '0 6 * * *' }]));
    expect(t.map((x) => x.eventName)).toEqual(['noon', CRON_EVENT_NAME]);
    expect(nextTick(t, at('2024-03-10T07:00:00Z'))).toBe(at('2024-03-10T12:00:00Z'));
    expect(nextTick(t, at('2024-03-10T12:00:00Z'))).toBe(at('2024-03-11T06:00:00Z'));
  });

  describe('dueTicks', () => {
    const everySecond = [parseCronTrigger({ cron: '* * * * * *' })];
    const now = at('2024-03-10T10:00:05.300Z');

    it('fires every tick of a late pass within the catch-up window: no gap', () => {
      expect(dueTicks(everySecond, at('2024-03-10T10:00:01Z'), now, 10_000, 100)).toEqual(
        [1, 2, 3, 4, 5].map((s) => at(`2024-03-10T10:00:0${s}Z`)),
      );
    });

    it('collapses ticks missed past the window into one run, for the latest of them', () => {
      expect(dueTicks(everySecond, at('2024-03-10T09:00:00Z'), now, 10_000, 100)).toEqual([at('2024-03-10T10:00:05Z')]);
      const hourly = [parseCronTrigger({ cron: '0 * * * *' })];
      expect(dueTicks(hourly, at('2024-03-09T10:00:00Z'), now, 10_000, 100)).toEqual([at('2024-03-10T10:00:00Z')]);
    });

    it('fires nothing before the next tick, and at most maxTicks in one pass', () => {
      expect(dueTicks(everySecond, at('2024-03-10T10:00:06Z'), now, 10_000, 100)).toEqual([]);
      expect(dueTicks(everySecond, at('2024-03-10T10:00:01Z'), now, 10_000, 2)).toHaveLength(2);
    });
  });

  it('a tick event id is a UUID fixed by project, env, function and tick', () => {
    const id = tickEventId('p', 'e', 'f', 1000);
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(tickEventId('p', 'e', 'f', 1000)).toBe(id);
    expect(new Set([tickEventId('p', 'e', 'f', 2000), tickEventId('p', 'e', 'g', 1000), tickEventId('p', 'x', 'f', 1000), tickEventId('q', 'e', 'f', 1000)]).size).toBe(4);
    expect([tickEventId('p', 'e', 'f', 2000)]).not.toContain(id);
  });
});
