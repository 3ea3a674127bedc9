import { randomUUID } from 'node:crypto';
import { WireEvent } from '@ironflow/contracts';
import { FunctionRecord, RunRecord, Tx, leasesSql, runsSql } from '@ironflow/store';
import { EngineResources } from './resources';
import { Segment, loadSegment } from './segment-loader';

/**
 * A push dispatch that takes a segment claimed in the unit of work that created its run, so a
 * trigger whose lane has room costs one transaction before the outcome's (DESIGN.md "Performance
 * budgets"; issue 11). Only a node that runs push dispatch offers one (a dispatcher, a single node,
 * or an api-gateway with `IRONFLOW_GATEWAY_PUSH`, which has no claim loop): it holds the signing
 * key and the egress to the endpoints.
 */
export interface DispatchAtOnce {
  /** True while this node dispatches push (started and not stopping). */
  readonly dispatching: boolean;
  /** True when as many `reserveWithin` callers wait as may (8 per slot): another would get false at once. */
  readonly slotWaitersFull: boolean;
  /** Reserves a free slot; false when this node does not dispatch push now or has no free slot. */
  reserve(): boolean;
  /**
   * Reserves a slot, waiting up to `waitMs` for one to free when all are taken (a forwarded
   * trigger: its run would wait for that slot anyway). Freed slots go to waiters oldest first,
   * taking turns with the claim loop when it waits for room too. At most 8 callers per slot wait
   * (`SLOT_WAITERS_PER_SLOT`); more, a stop, or no slot in time resolve false.
   */
  reserveWithin(waitMs: number): Promise<boolean>;
  /** Gives back a reservation that claimed nothing. */
  release(): void;
  /** Fills the reserved slot with `segment`: calls its endpoint and applies the answer, as its own claim would. */
  take(segment: Segment): void;
}

/** The segment a unit of work claimed into the push slot its caller reserved (see {@link withReservedSlot}). */
export interface SlotClaim {
  segment: Segment | null;
}

/**
 * Runs `unit`, a unit of work that may claim one segment into the push slot the caller reserved
 * (`reserved`, from `atOnce.reserve()`), by setting `slot.segment` (a unit the store runs again
 * starts by clearing it). When `unit` resolves with a segment set, the segment is dispatched at
 * once (`atOnce.take`); when it set none, or threw (rolled back: nothing was claimed), the slot is
 * given back (`atOnce.release`). Resolves with what `unit` resolved and whether a segment was
 * dispatched; rejects as `unit` does. Shared by the trigger, an invoked child's admission and a
 * parent's wake (issue 11).
 */
export async function withReservedSlot<T>(atOnce: DispatchAtOnce | undefined, reserved: boolean, unit: (slot: SlotClaim) => Promise<T>): Promise<{ result: T; dispatched: boolean }> {
  const slot: SlotClaim = { segment: null };
  let result: T;
  try {
    result = await unit(slot);
  } catch (err) {
    slot.segment = null;
    throw err;
  } finally {
    if (reserved && !slot.segment) atOnce!.release();
  }
  if (slot.segment) atOnce!.take(slot.segment);
  return { result, dispatched: slot.segment !== null };
}

/**
 * Claims `run` (just inserted by `tx`) for this node when it is a push run of a function that
 * declares no secrets, not held, its lane has room and the instance is not frozen: bumps its
 * execution and inserts its lease (the function's timeout as deadline) as a dispatcher's claim
 * does. Returns its segment, or null when it stays queued for a dispatcher.
 */
export async function claimAtOnce(r: EngineResources, tx: Tx, fn: FunctionRecord, run: RunRecord, event: WireEvent): Promise<Segment | null> {
  if (!claimableAtOnce(run, fn)) return null;
  const claimed = await runsSql.claimInsertedRun(tx, run, () => randomUUID());
  if (!claimed) return null;
  await leaseAtOnce(r, tx, fn, claimed);
  return { run: claimed, definition: fn.definition, event, steps: [], nextSequence: 0 };
}

/**
 * Claims `run` for this node in the unit of work `tx` that ends its wait (issue 11): a parent its
 * wake resumes (`from` `waiting`) or an invoked child its admission releases (`held`), moved
 * straight to `running` instead of queued for a dispatcher's claim, under the same conditions as
 * {@link claimAtOnce}: a push run of a function (`fn`, as `tx` read it) that declares no secrets
 * and has an endpoint, its lane with room. The caller's unit has found the instance thawed.
 * Inserts its lease as a dispatcher's claim does, on PostgreSQL in the claiming statement, and
 * loads its segment (on PostgreSQL from that statement's rows). Null when nothing was written:
 * the caller queues the run as it would have.
 */
export async function claimWaitEndAtOnce(r: EngineResources, tx: Tx, fn: FunctionRecord, run: RunRecord, from: runsSql.ClaimAtOnceFrom): Promise<Segment | null> {
  if (!claimableAtOnce(run, fn)) return null;
  const claimed = await runsSql.claimRunAtOnce(tx, run, from, () => randomUUID(), leaseOfClaim(r, tx, fn, run));
  return claimed && loadSegment(tx, claimed);
}

function claimableAtOnce(run: RunRecord, fn: FunctionRecord): boolean {
  return run.mode === 'push' && (fn.definition.secrets?.length ?? 0) === 0 && !!fn.definition.endpointUrl;
}

/** The lease of an execution of `run` claimed at once: this node's, in the run's lane, the function's timeout as its deadline. */
function leaseOfClaim(r: EngineResources, tx: Tx, fn: FunctionRecord, run: RunRecord): runsSql.LeaseOfClaim {
  return { holder: r.config.nodeId, lane: runsSql.laneOf(run.functionId, run.concurrencyKey), expiresAt: tx.now + r.config.leaseMs, deadlineAt: tx.now + fn.definition.timeoutMs };
}

/** Inserts the lease of `claimed`, an execution claimed at once ({@link leaseOfClaim}). */
async function leaseAtOnce(r: EngineResources, tx: Tx, fn: FunctionRecord, claimed: RunRecord): Promise<void> {
  const { holder, lane, expiresAt, deadlineAt } = leaseOfClaim(r, tx, fn, claimed);
  await leasesSql.insertLease(tx, claimed.id, claimed.executionSeq, holder, lane, expiresAt, deadlineAt);
}
