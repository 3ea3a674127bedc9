import { randomUUID } from 'node:crypto';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { CallScope, EngineError, TriggerInput, TriggerOutput } from '@ironflow/contracts';
import { EventRecord, FunctionRecord, RunRecord, Tx, correlationsSql, eventsSql, functionsSql, runsSql, stepsSql, toJson, triggerSql, unitWithLockLimit, unlessLocked } from '@ironflow/store';
import { eventSatisfiesWait } from './wait-match';
import { insertNewRun, newRunOf } from './new-run';
import { checkName, checkPayload } from './payload-limits';
import { afterNewRun } from './new-runs-announcer';
import { EngineResources } from './resources';
import { DispatchHints } from './dispatch-hints';
import { DebounceSystem } from './debounce-system';
import { TriggerExpressions } from './trigger-expressions';
import { eventFieldsOf } from './event-fields';
import { toWireEvent } from './segment-loader';
import { CancelOnSystem } from './cancel-on-system';
import { InvokeAdmission } from './invoke-admission';
import { DispatchAtOnce, claimAtOnce, withReservedSlot } from './dispatch-at-once';
import { Segment } from './segment-loader';
import { ForwardedTrigger, ForwardedTriggerReply, TriggerForwarder, errorReply } from './trigger-forwarding';
import { EventFunctionsCache } from './event-functions-cache';

/** What a trigger's unit of work wrote, for its follow-ups and its answer. */
interface TriggerWrites {
  event: EventRecord;
  duplicate: boolean;
  runIds: string[];
  debounced: string[];
  /** The modes of the runs queued (hinted after the commit). */
  modes: string[];
  created: RunRecord[];
}

/**
 * Starts runs from an event (WIRE-PROTOCOL.md 5.2 `Trigger`): one unit of work inserts the event
 * (with its `version` and `metadata`, which reach the handler) and a run for each function whose
 * trigger names it (and whose trigger expression, if any, accepts it); a debounced function's run
 * waits for its window instead (`DebounceSystem`). A repeated idempotency key starts nothing and
 * answers with the first event's runs. Throws `VALIDATION_ERROR` or `PAYLOAD_TOO_LARGE`; with
 * `sync` (TriggerSync), `FUNCTION_DEBOUNCED` when the event would start a debounced function,
 * committing nothing. After the commit, off the caller's path, the event's `cancel_on` match
 * runs, and a run of a function that declares `cancelOn` (created held) is admitted once its
 * replay finds no cancel. A sync trigger on a node whose push dispatch has a free slot claims its
 * first push run in the same unit of work and dispatches it at once ({@link DispatchAtOnce}: a
 * dispatcher, a single node, the cluster's api-gateway with `IRONFLOW_GATEWAY_PUSH`); on a node
 * without a free slot (or without push) that has a {@link TriggerForwarder} (the cluster's
 * api-gateway), a dispatcher runs the sync trigger ({@link triggerForwarded}), else this node does.
 */
export class TriggerSystem {
  private atOnce?: DispatchAtOnce;
  /** PostgreSQL: the functions each event name started, for the one-statement trigger ({@link triggerInOneStatement}). */
  private readonly functionsByEvent = new EventFunctionsCache();

  constructor(
    private readonly r: EngineResources,
    private readonly hints: DispatchHints,
    private readonly expressions: TriggerExpressions,
    private readonly debounces: DebounceSystem,
    private readonly cancelOn: CancelOnSystem,
    private readonly admissions: InvokeAdmission,
  ) {}

  private forwarder?: TriggerForwarder;

  /** Wired by the engine once its push dispatcher exists. */
  setDispatchAtOnce(atOnce: DispatchAtOnce): void {
    this.atOnce = atOnce;
  }

  /** Wired by a process that serves the client API without dispatching push (the cluster's api-gateway). */
  setForwarder(forwarder: TriggerForwarder): void {
    this.forwarder = forwarder;
  }

  async trigger(scope: CallScope, input: TriggerInput, options: { sync?: boolean } = {}): Promise<TriggerOutput> {
    const fields = this.checkInput(input);
    const sync = options.sync === true;
    const reserved = sync && this.atOnce?.reserve() === true;
    let eventId: string | undefined;
    if (sync && !reserved && this.forwarder) {
      // Drawn before the hop: a trigger a dispatcher committed but whose answer was lost is found by it.
      eventId = randomUUID();
      const { event, data, idempotencyKey, version, metadata } = input;
      const forwarded = await this.forwarder.forward({ scope: { project: scope.project, env: scope.env }, input: { event, data, idempotencyKey, version, metadata }, eventId });
      if (forwarded) return forwarded;
    }
    return this.start(scope, input, fields, { sync, reserved, eventId });
  }

  /**
   * A dispatcher's side of a forwarded sync trigger ({@link TriggerForwarder}): this node runs it as
   * its own sync trigger, with the gateway's event id. With a push slot, free or freed within
   * `forwardedTriggerWaitMs` (default 1000), the first push run is claimed in the trigger's unit of
   * work and dispatched at once. When as many triggers wait for a slot as may
   * (`SLOT_WAITERS_PER_SLOT`), it runs the trigger at once with the run queued for a claim, as the
   * gateway's own trigger would queue it (issue 11: the gateway runs no trigger transaction because
   * a dispatcher is full). `busy` (nothing done: the gateway triggers itself) when this node does
   * not dispatch push, or no slot freed in time: that wait spent half the gateway's answer budget
   * (`triggerForwardTimeoutMs`), and a trigger begun after it could outlast it and race the
   * gateway's own insert of the event. An `EngineError` is the reply (nothing was committed); any
   * other failure rejects (no reply: the gateway triggers itself).
   */
  async triggerForwarded(request: ForwardedTrigger): Promise<ForwardedTriggerReply> {
    const { scope, input, eventId } = request ?? {};
    if (typeof scope?.project !== 'string' || typeof scope.env !== 'string' || typeof eventId !== 'string' || !input) throw new Error('a forwarded trigger needs scope, input and eventId');
    try {
      const fields = this.checkInput(input);
      const atOnce = this.atOnce;
      if (!atOnce?.dispatching) return { busy: true };
      let reserved = atOnce.reserve();
      if (!reserved && !atOnce.slotWaitersFull) {
        if (!(await atOnce.reserveWithin(this.r.config.forwardedTriggerWaitMs))) return { busy: true };
        reserved = true;
      }
      return { output: await this.start({ project: scope.project, env: scope.env }, input, fields, { sync: true, reserved, eventId }) };
    } catch (err) {
      return errorReply(err);
    }
  }

  /** The checks before anything is written: `VALIDATION_ERROR`, `PAYLOAD_TOO_LARGE`. */
  private checkInput(input: TriggerInput): { version: number; metadata: Record<string, unknown> | null } {
    checkName('event', input.event, 256);
    const fields = eventFieldsOf(input, this.r.config.maxPayloadBytes);
    // An empty key was taken for none: refused (leave it out); Connect's proto3 "" reaches here as absent.
    if (input.idempotencyKey !== undefined) checkName('idempotencyKey', input.idempotencyKey, 512);
    checkPayload('event data', input.data, this.r.config.maxPayloadBytes);
    return fields;
  }

  /**
   * The trigger's unit of work and its follow-ups, the input checked. `reserved`: a push slot this
   * call holds (claimed into or given back here); `eventId`: the event's id, else a new one.
   */
  private async start(scope: CallScope, input: TriggerInput, { version, metadata }: { version: number; metadata: Record<string, unknown> | null }, options: { sync: boolean; reserved: boolean; eventId?: string }): Promise<TriggerOutput> {
    const { reserved } = options;
    // Bounded: a waiting step's row or any other lock held past the lock limit fails the trigger with
    // UNAVAILABLE (retry), storing nothing; a locked correlation row alone does not (see satisfyWaits).
    const eventId = options.eventId ?? randomUUID();
    const { result, dispatched } = await withReservedSlot(this.atOnce, reserved, async (slot): Promise<TriggerWrites> => {
      // The common case first: one statement, atomic on its own, one round trip (issue 11). When it
      // wrote nothing (not that case, or it found the case changed), the general trigger runs in a
      // unit of its own.
      const expected = this.oneStatementCase(scope, input.event.trim());
      const simple = expected && await unitWithLockLimit(this.r.store, 'trigger', this.r.config.lockLimitMs, (tx) => this.triggerInOneStatement(tx, expected.fn, scope, input, { version, metadata }, eventId, reserved), { oneStatement: true });
      if (simple) {
        slot.segment = simple.claimed;
        return simple.writes;
      }
      return unitWithLockLimit(this.r.store, 'trigger', this.r.config.lockLimitMs, async (tx): Promise<TriggerWrites> => {
        slot.segment = null;
        const { event, duplicate } = await eventsSql.insertEvent(tx, {
          id: eventId,
          project: scope.project,
          env: scope.env,
          name: input.event.trim(),
          data: input.data ?? {},
          idempotencyKey: input.idempotencyKey || undefined,
          version,
          metadata,
        });
        if (duplicate) {
          const rows = await tx.query<{ id: string }>(`SELECT id FROM runs WHERE event_id = $1 ORDER BY id`, [event.id]);
          return { event, duplicate, runIds: rows.map((row) => row.id), debounced: [] as string[], modes: [] as string[], created: [] as RunRecord[] };
        }
        const resumed = await this.satisfyWaits(tx, scope, event);
        const wireEvent = toWireEvent(event);
        const listed = await functionsSql.listFunctionsForEvent(tx, scope.project, scope.env, event.name);
        if (tx.dialect === 'postgres') this.functionsByEvent.set(scope.project, scope.env, event.name, listed);
        const functions = listed.filter((fn) => this.expressions.accepts(fn, wireEvent));
        const runIds: string[] = [];
        const debounced: string[] = [];
        const modes: string[] = [...resumed];
        const created: RunRecord[] = [];
        for (const fn of functions) {
          if (fn.definition.debounce) {
            await this.debounces.defer(tx, fn, event, options.sync);
            debounced.push(fn.definition.id);
            continue;
          }
          const run = await insertNewRun(tx, fn, newRunOf(scope, fn, event.id, event.data));
          runIds.push(run.id);
          created.push(run);
          this.r.metrics.runsCreated.inc({ function_id: fn.definition.id });
          if (reserved && !slot.segment && (slot.segment = await claimAtOnce(this.r, tx, fn, run, wireEvent))) continue;
          if (!run.held) modes.push(run.mode);
        }
        return { event, duplicate, runIds, debounced, modes, created };
      });
    });
    for (const mode of new Set(result.modes)) this.hints.queued(scope.project, scope.env, mode);
    for (const run of result.created) afterNewRun(this.r, this.hints, this.admissions, run, true);
    if (!result.duplicate) {
      const { event } = result;
      const match = () => this.cancelOn.matchEvent(event).then(() => undefined);
      // After a push dispatched at once, the match starts on the next turn of the event loop, so the
      // push is written first (undici writes on a reused keep-alive socket from the check phase), not
      // after this read's statement: it is on the caller's path, the match is not.
      this.r.followUps.track('cancel-on-match', dispatched ? () => nextTurn().then(match) : match);
    }
    return { eventId: result.event.id, runIds: result.runIds, debouncedFunctionIds: result.debounced, duplicate: result.duplicate };
  }

  /**
   * PostgreSQL, whether a trigger of event `name` is the common case {@link triggerInOneStatement}
   * writes: an earlier trigger of this process read the event's functions and they are at most
   * one, neither debounced nor declaring `cancelOn` (a held run). Its function (none when no
   * function's trigger names the event), or undefined when the case is not that one.
   */
  private oneStatementCase(scope: CallScope, name: string): { fn: FunctionRecord | undefined } | undefined {
    if (this.r.store.dialect !== 'postgres') return undefined;
    const functions = this.functionsByEvent.get(scope.project, scope.env, name);
    if (!functions || functions.length > 1) return undefined;
    const fn = functions.at(0);
    if (fn && (fn.definition.debounce || (fn.definition.cancelOn?.length ?? 0) > 0)) return undefined;
    return { fn };
  }

  /**
   * PostgreSQL, the common case in one statement (issue 11: a trigger that dispatches at once was
   * eight round trips, now one), for a trigger {@link oneStatementCase} found to be that case with
   * function `fn`, when a run it claims has no concurrency limit (its lane count needs its lock):
   * `triggerSql.insertTriggerAtOnce` writes the event, the run (when the function's trigger
   * expression accepts the event) and, with `reserved` and a claimable push function (as
   * {@link claimAtOnce} decides), the run's claim and lease. It runs as a unit of its own, one
   * statement without BEGIN and COMMIT (one round trip) when the lock limit is the store
   * connections' own (`StoreOptions.lockTimeoutMs`, as by default). Null when a claim would need a
   * concurrency limit (no statement sent), or the statement found the case changed (functions, an
   * open `waitForEvent`, a duplicate event) and wrote nothing: the general trigger then runs in a
   * unit of its own, safely since this one wrote nothing.
   */
  private async triggerInOneStatement(
    tx: Tx,
    fn: FunctionRecord | undefined,
    scope: CallScope,
    input: TriggerInput,
    { version, metadata }: { version: number; metadata: Record<string, unknown> | null },
    eventId: string,
    reserved: boolean,
  ): Promise<{ writes: TriggerWrites; claimed: Segment | null } | null> {
    const name = input.event.trim();
    // The event as the store will hold it (its JSON read back), for the trigger expression.
    const stored = (value: unknown) => JSON.parse(toJson(value)!) as unknown;
    const data = stored(input.data ?? {});
    const idempotencyKey = input.idempotencyKey || undefined;
    const asStored: EventRecord = { id: eventId, project: scope.project, env: scope.env, name, data, idempotencyKey: idempotencyKey ?? null, version, metadata: metadata ? (stored(metadata) as Record<string, unknown>) : null, ts: tx.now };
    const accepted = fn && this.expressions.accepts(fn, toWireEvent(asStored)) ? fn : undefined;
    const run = accepted ? newRunOf(scope, accepted, eventId, data) : null;
    const definition = accepted?.definition;
    const claimable = reserved && run !== null && run.mode === 'push' && (definition?.secrets?.length ?? 0) === 0 && !!definition?.endpointUrl;
    if (claimable && run.concurrencyLimit != null) return null;
    const written = await triggerSql.insertTriggerAtOnce(tx, {
      event: { id: eventId, project: scope.project, env: scope.env, name, data: input.data ?? {}, idempotencyKey, version, metadata },
      expected: fn ? [{ id: fn.definition.id, version: fn.version }] : [],
      run: run && { id: run.id, functionId: run.functionId, functionVersion: run.functionVersion, mode: run.mode, maxAttempts: run.maxAttempts, concurrencyKey: run.concurrencyKey ?? null, concurrencyLimit: run.concurrencyLimit ?? null },
      claim: claimable && definition
        ? { leaseToken: randomUUID(), holder: this.r.config.nodeId, lane: runsSql.laneOf(run.functionId, run.concurrencyKey ?? null), expiresAt: tx.now + this.r.config.leaseMs, deadlineAt: tx.now + definition.timeoutMs }
        : null,
    });
    if (!written) return null;
    const created = written.run;
    if (created) this.r.metrics.runsCreated.inc({ function_id: created.functionId });
    const claimed = created && definition && created.status === 'running'
      ? { run: created, definition, event: toWireEvent(written.event), steps: [], nextSequence: 0 }
      : null;
    return {
      writes: { event: written.event, duplicate: false, runIds: created ? [created.id] : [], debounced: [], modes: created && !claimed ? [created.mode] : [], created: created ? [created] : [] },
      claimed,
    };
  }

  /**
   * Starts one run of a function directly (InvokeFunctionSync): no event row, the input is the
   * run's event data. Throws `FUNCTION_NOT_FOUND`, `PAYLOAD_TOO_LARGE`.
   */
  async invoke(scope: CallScope, functionId: string, input: unknown): Promise<RunRecord> {
    checkPayload('input', input, this.r.config.maxPayloadBytes);
    const run = await this.r.store.unitOfWork('invokeFunction', async (tx) => {
      const fn = await functionsSql.getFunction(tx, scope.project, scope.env, functionId);
      if (!fn) throw new EngineError('FUNCTION_NOT_FOUND', `function ${functionId} is not registered`);
      return insertNewRun(tx, fn, newRunOf(scope, fn, null, input));
    });
    this.r.metrics.runsCreated.inc({ function_id: run.functionId });
    afterNewRun(this.r, this.hints, this.admissions, run);
    return run;
  }

  /**
   * Resumes runs waiting in `waitForEvent` for this event: the step completes with the event
   * object (WIRE-PROTOCOL.md 1.3) when the `match` path's value equals the run's own event's,
   * structurally (see `wait-match.ts`). The open correlations are read without locks; the step's
   * write, guarded on `waiting`, is what delivers an event once (a concurrent trigger waits on the
   * step row, within the lock limit). The correlation is closed after it under a savepoint: a
   * correlation row locked past the limit stays open, harmless since its step has finished.
   * Returns the modes of the runs queued again.
   */
  private async satisfyWaits(tx: Tx, scope: CallScope, event: EventRecord): Promise<string[]> {
    const open = await correlationsSql.listOpenCorrelations(tx, scope.project, scope.env, event.name);
    const modes: string[] = [];
    const wireEvent = toWireEvent(event);
    for (const c of open) {
      if (!eventSatisfiesWait(wireEvent, c.matchPath, c.matchValue)) continue;
      // The step's guarded write delivers the event once; the correlation is closed after it, and a
      // correlation row locked past the limit stays open (its step has finished, so a later event
      // does nothing) rather than hold the event from its run.
      if (!(await stepsSql.completeWaitStep(tx, c.runId, c.stepId, wireEvent))) continue;
      if (!(await unlessLocked(tx, () => correlationsSql.closeCorrelation(tx, c.runId, c.stepId)))) {
        this.r.logger.warn('trigger: a satisfied wait\'s correlation row stayed locked; it is left open', { run_id: c.runId, step_id: c.stepId, event_id: event.id });
      }
      if (await runsSql.queueContinuation(tx, c.runId)) {
        const run = await runsSql.getRun(tx, c.runId);
        if (run) modes.push(run.mode);
      }
    }
    return modes;
  }
}
