import { CronScheduleRow, RunRecord, cronSql, eventsSql, functionsSql, runsSql } from '@ironflow/store';
import { DispatchHints } from './dispatch-hints';
import { cronTriggersOf, dueTicks, nextTick, tickEventId, triggerOfTick } from './cron-schedule';
import { newRunOf } from './new-run';
import { announceNewRuns } from './new-runs-announcer';
import { EngineResources } from './resources';

/**
 * The scheduler's cron pass (DESIGN.md `scheduler`): starts the runs of due cron ticks. Each
 * schedule is its own unit of work: it locks the schedule row (another scheduler skips it), logs
 * one event per tick under an id derived from the function and the tick, starts the tick's run
 * and moves the schedule to its next tick. The derived id is the store's guarantee of one run per
 * function and tick across any number of schedulers; the row lock only spares them the work.
 *
 * A tick's run sees the event `{id, name: the trigger's event or "ironflow/cron", data: {cron,
 * timezone, scheduledAt}}` (`scheduledAt` the tick as an ISO string). Ticks at most
 * `cronCatchUpMs` late all fire; a schedule further behind (no scheduler ran) fires once, for the
 * latest tick it missed.
 */
export class CronSystem {
  constructor(private readonly r: EngineResources, private readonly hints: DispatchHints) {}

  /** One pass over the due schedules (a page of `passPageSize`). Returns how many runs it started. */
  async pass(): Promise<number> {
    const due = await this.r.store.read('listDueCronSchedules', (tx) => cronSql.listDueSchedules(tx, this.r.config.passPageSize));
    let started = 0;
    for (const schedule of due) {
      try {
        started += await this.fire(schedule);
      } catch (err) {
        // Principle 5: a schedule that cannot fire costs only itself; the next pass retries it.
        this.r.logger.warn('cron schedule failed to fire; the next pass retries it', { function_id: schedule.functionId, error: String(err) });
      }
    }
    return started;
  }

  private async fire(due: CronScheduleRow): Promise<number> {
    const created = await this.r.store.unitOfWork('fireCronSchedule', async (tx) => {
      const schedule = await cronSql.lockDueSchedule(tx, due.project, due.env, due.functionId);
      if (!schedule) return [];
      const fn = await functionsSql.getFunction(tx, schedule.project, schedule.env, schedule.functionId);
      const triggers = fn ? cronTriggersOf(fn.definition) : [];
      if (!fn || triggers.length === 0) {
        await cronSql.advanceSchedule(tx, schedule, null);
        return [];
      }
      const ticks = dueTicks(triggers, schedule.nextAt, tx.now, this.r.config.cronCatchUpMs, this.r.config.passPageSize);
      const runs: RunRecord[] = [];
      for (const tick of ticks) {
        const trigger = triggerOfTick(triggers, tick);
        const event = await eventsSql.insertEventOnce(tx, {
          id: tickEventId(schedule.project, schedule.env, schedule.functionId, tick),
          project: schedule.project,
          env: schedule.env,
          name: trigger.eventName,
          data: { cron: trigger.expression, timezone: trigger.timezone, scheduledAt: new Date(tick).toISOString() },
        });
        if (!event) continue; // this tick already started its run
        runs.push(await runsSql.insertRun(tx, newRunOf(schedule, fn, event.id, event.data)));
      }
      const last = ticks.length > 0 ? ticks[ticks.length - 1] : schedule.nextAt;
      if (!(await cronSql.advanceSchedule(tx, schedule, nextTick(triggers, Math.max(last, schedule.nextAt))))) {
        throw new Error(`cron schedule of ${schedule.functionId} moved under its lock`);
      }
      return runs;
    });
    announceNewRuns(this.r, this.hints, created);
    return created.length;
  }
}
