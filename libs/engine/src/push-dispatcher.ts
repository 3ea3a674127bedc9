import { runFields } from '@ironflow/observability';
import { EngineError, PushResponse, RUN_ERROR_CODES, SIGNATURE_HEADER, signPushBody } from '@ironflow/contracts';
import { ExecutionFence } from '@ironflow/fencing';
import { isLockTimeout, leasesSql } from '@ironflow/store';
import { DispatchHints } from './dispatch-hints';
import { DispatchSystem } from './dispatch-system';
import { ReportSystem, SegmentReport } from './report-system';
import type { ReleaseSystem } from './release-system';
import { PushEndpointPolicy, PushEndpointRefused } from './push-endpoint-policy';
import { EngineResources } from './resources';
import { Segment, toPushRequest } from './segment-loader';
import { DispatchAtOnce } from './dispatch-at-once';
import { parseSentAt } from './sleep-clock';
import { postPush } from './push-post';

/**
 * How many `reserveWithin` callers may wait per push slot (8: 128 with the default 16 slots). Each
 * is a forwarded sync trigger whose run would otherwise be queued for a separate claim: at 64
 * triggers in flight per dispatcher every one of them still waits for a slot and is claimed at
 * trigger (issue 11); past the bound the dispatcher queues the run at once.
 */
export const SLOT_WAITERS_PER_SLOT = 8;

/** How many times a push answer is applied when its run row stays locked past the lock limit (each waits up to `lockLimitMs`). */
export const PUSH_APPLY_ATTEMPTS = 5;

/**
 * The push dispatcher (WIRE-PROTOCOL.md section 2): claims push segments, POSTs each to its
 * function's endpoint (signed with `X-Ironflow-Signature` when `signingKey` is configured),
 * bounded by the function's timeout, and applies the answer as a fenced report. A transport
 * failure (refused, non-200, a redirect, a body that is not a PushResponse) counts as a retryable
 * failure of the attempt with code `PUSH_DISPATCH_FAILED`; no answer within the function's timeout
 * is `FUNCTION_TIMED_OUT`, retryable, as on the pull transports. A connection the push allow-list
 * refuses (the endpoint now resolves to a link-local, metadata or not-allowed address) fails the
 * attempt without retry, code `PUSH_ENDPOINT_REFUSED`, before a byte is sent. An answer the engine
 * cannot apply fails it with `REPORT_REJECTED` or `PAYLOAD_TOO_LARGE` (see `ReportSystem`).
 * While it runs, a sync trigger can fill one of its slots with a segment it claimed itself
 * ({@link DispatchAtOnce}); a trigger forwarded by an api-gateway may wait a little for one.
 */
export class PushDispatcher implements DispatchAtOnce {
  private inFlight = new Set<Promise<void>>();
  /** Slots reserved by triggers that claim at once (see `reserve`). */
  private reserved = 0;
  /** `reserveWithin` callers waiting for a slot, oldest first: each is called with true (a slot reserved for it) or false. */
  private readonly slotWaiters: ((reserved: boolean) => void)[] = [];
  /** The last freed slot went to a waiter: the next one wakes the claim loop first when it waits for room. */
  private lastSlotToWaiter = false;
  /** Executions whose push call is in flight: their leases are refreshed while they run. */
  private readonly leased = new Map<string, number>();
  private refresher?: NodeJS.Timeout;
  private running = false;
  private wakeUp?: () => void;
  /** A hint came since the last claim began: claim again before idling (a hint is never lost to a claim in flight). */
  private hinted = false;
  /** The latest hint's `at` (store clock): a claim that began before it may not have seen its segment. */
  private hintAt = 0;
  /** The loop idles because every slot is taken: an invocation that ends wakes it. */
  private waitingForRoom = false;
  private loop?: Promise<void>;
  private unsubscribe?: () => void;
  /** Endpoints whose 401 was logged: one warning per endpoint and process, the run's history has each. */
  private readonly signatureWarned = new Set<string>();
  /**
   * Without a claim loop (an api-gateway): an endpoint refused this node's signature, so its key
   * differs from the dispatchers' (or it has none); it reserves no slot from then on.
   */
  private signatureRefused = false;
  /** The claim loop was started on this node (a dispatcher, a single node): never reset. */
  private claims = false;

  constructor(
    private readonly r: EngineResources,
    private readonly dispatch: DispatchSystem,
    private readonly reports: ReportSystem,
    private readonly hints: DispatchHints,
    private readonly endpoints: PushEndpointPolicy,
    private readonly releases: ReleaseSystem,
  ) {}

  /**
   * Starts dispatching. `claims` (default true): with the claim loop, woken by the push hints. Without
   * it (`false`: the cluster's api-gateway, issue 11) this node calls only the segments it claimed
   * itself into a reserved slot ({@link DispatchAtOnce}: its sync triggers, and the admissions and
   * wakes their outcomes lead to); queued runs are left to the dispatchers. Either way the leases
   * of its calls in flight are refreshed. Calling it again with `claims` adds the loop.
   */
  start(claims = true): void {
    if (!this.running) {
      this.running = true;
      this.refresher = setInterval(() => void this.refreshLeases(), Math.max(50, Math.floor(this.r.config.leaseMs / 3)));
      this.refresher.unref();
    }
    if (!claims || this.loop) return;
    this.claims = true;
    this.unsubscribe = this.hints.onQueued('push', (at) => {
      this.hinted = true;
      if (at !== undefined && at > this.hintAt) this.hintAt = at;
      this.wakeUp?.();
    });
    this.loop = this.run();
  }

  /**
   * DESIGN.md "Leases and fencing": the dispatcher refreshes the leases of its push calls in
   * flight, in one statement on PostgreSQL (`leasesSql.refreshLeases`: it skips a lease an
   * outcome's commit holds, and never waits on one).
   */
  private async refreshLeases(): Promise<void> {
    if (this.leased.size === 0) return;
    const executions = [...this.leased].map(([runId, executionSeq]) => ({ runId, executionSeq }));
    try {
      await this.r.store.unitOfWork('refreshPushLeases', (tx) => leasesSql.refreshLeases(tx, executions, tx.now + this.r.config.leaseMs), { oneStatement: true });
    } catch (err) {
      this.r.logger.warn('push lease refresh failed; the next refresh tries again', { error: String(err) });
    }
  }

  get dispatching(): boolean {
    return this.running;
  }

  reserve(): boolean {
    if (!this.running || this.signatureRefused || this.inFlight.size + this.reserved >= this.r.config.pushConcurrency) return false;
    this.reserved += 1;
    return true;
  }

  get slotWaitersFull(): boolean {
    return this.slotWaiters.length >= SLOT_WAITERS_PER_SLOT * this.r.config.pushConcurrency;
  }

  /** `reserveWithin` callers waiting for a slot now (forwarded triggers). */
  get waitingForSlot(): number {
    return this.slotWaiters.length;
  }

  reserveWithin(waitMs: number): Promise<boolean> {
    if (this.reserve()) return Promise.resolve(true);
    if (!this.running || waitMs <= 0 || this.slotWaitersFull) return Promise.resolve(false);
    return new Promise((resolve) => {
      const waiter = (reserved: boolean) => {
        clearTimeout(timer);
        resolve(reserved);
      };
      const timer = setTimeout(() => {
        const at = this.slotWaiters.indexOf(waiter);
        if (at >= 0) this.slotWaiters.splice(at, 1);
        resolve(false);
      }, waitMs);
      this.slotWaiters.push(waiter);
    });
  }

  release(): void {
    this.reserved -= 1;
    this.slotFreed();
  }

  take(segment: Segment): void {
    this.reserved -= 1;
    this.r.metrics.segmentsDispatched.inc({ mode: 'push' });
    this.track(segment);
  }

  /** Invokes `segment` in a slot; the slot, once free, goes on ({@link slotFreed}). */
  private track(segment: Segment): void {
    const p: Promise<void> = this.invoke(segment).finally(() => {
      this.inFlight.delete(p);
      this.slotFreed();
    });
    this.inFlight.add(p);
  }

  /**
   * A slot freed: it goes to the longest-waiting `reserveWithin` caller, reserved for it, except
   * that when the claim loop waits for room too they take turns (the loop is woken instead when
   * the last freed slot went to a waiter), so queued runs are not starved by forwarded triggers.
   */
  private slotFreed(): void {
    if (this.running && this.slotWaiters.length > 0 && !(this.waitingForRoom && this.lastSlotToWaiter)) {
      this.lastSlotToWaiter = true;
      this.reserved += 1;
      this.slotWaiters.shift()!(true);
      return;
    }
    this.lastSlotToWaiter = false;
    if (this.waitingForRoom) this.wakeUp?.();
  }

  /**
   * The slots a claim left free go to the `reserveWithin` callers waiting, oldest first: a slot
   * freed while the loop waited for room woke the loop instead of a waiter, and a claim that found
   * less than its room would otherwise leave the waiters to their timeout.
   */
  private giveRoomToWaiters(): void {
    while (this.running && this.slotWaiters.length > 0 && this.inFlight.size + this.reserved < this.r.config.pushConcurrency) {
      this.lastSlotToWaiter = true;
      this.reserved += 1;
      this.slotWaiters.shift()!(true);
    }
  }

  /** How many push calls are in flight (after `stop`: those still open past its drain, left to lease recovery). */
  get callsInFlight(): number {
    return this.inFlight.size;
  }

  /** Stops claiming, then waits up to `drainMs` for invocations in flight. */
  async stop(drainMs: number): Promise<void> {
    this.running = false;
    for (const waiter of this.slotWaiters.splice(0)) waiter(false);
    clearInterval(this.refresher);
    this.unsubscribe?.();
    this.wakeUp?.();
    await this.loop;
    this.loop = undefined;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([Promise.allSettled([...this.inFlight]), new Promise((resolve) => { timer = setTimeout(resolve, drainMs); })]);
    clearTimeout(timer);
  }

  /**
   * The claim loop. It claims again at once only when the last claim filled every free slot or a
   * hint came during it; when a claim began (on this node's estimate of the store clock) before
   * the latest hint's `at`, it claims again once that time has come. Otherwise it idles until a
   * hint, a freed slot (only when every slot was taken) or the poll period: no empty claim follows
   * every invocation. After an empty claim, unless a hint came, it reads whether anything is queued
   * before it claims again (`DispatchSystem.anyClaimable`).
   */
  private async run(): Promise<void> {
    const max = this.r.config.pushConcurrency;
    let lastEmpty = false;
    while (this.running) {
      let claimed = 0;
      const room = max - this.inFlight.size - this.reserved;
      // After an empty claim, and with no hint since, a read looks first: an empty claim is a
      // transaction of three round trips, the read one (a freed slot wakes the loop at 64 in flight).
      const look: boolean = lastEmpty && !this.hinted;
      this.hinted = false;
      const claimedAt = this.r.clock.now();
      try {
        const filter = { mode: 'push' as const, limit: room };
        const segments: Segment[] = room <= 0 || (look && !(await this.dispatch.anyClaimable(filter))) ? [] : await this.dispatch.claim(filter, this.r.config.nodeId);
        lastEmpty = segments.length === 0;
        claimed = segments.length;
        for (const segment of segments) this.track(segment);
      } catch (err) {
        this.r.logger.warn('push claim failed; retrying after the poll period', { error: String(err) });
      }
      this.giveRoomToWaiters();
      const full = this.inFlight.size + this.reserved >= max;
      if (!full && (this.hinted || (claimed > 0 && claimed === room))) continue;
      const lag = full || claimed > 0 ? 0 : this.hintAt - claimedAt;
      this.waitingForRoom = full;
      await this.idle(lag > 0 ? Math.min(lag + 1, this.r.config.dispatchPollMs) : this.r.config.dispatchPollMs);
      this.waitingForRoom = false;
    }
  }

  private idle(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done() { clearTimeout(timer); resolve(); }
      this.wakeUp = done;
      if (!this.running) done();
    });
  }

  private async invoke(segment: Segment): Promise<void> {
    const { run } = segment;
    this.leased.set(run.id, run.executionSeq);
    try {
      await this.invokeLeased(segment);
    } finally {
      this.leased.delete(run.id);
    }
  }

  private async invokeLeased(segment: Segment): Promise<void> {
    const { run, definition } = segment;
    const fence: ExecutionFence = { executionSeq: run.executionSeq, leaseToken: run.leaseToken! };
    const report = definition?.endpointUrl
      ? await this.call(definition.endpointUrl, definition.timeoutMs, segment)
      : failure(`function ${run.functionId} has no endpoint URL`, false);
    if (report === SIGNATURE_REFUSED) return this.handBack(segment, fence);
    try {
      // An answer the engine cannot apply fails the attempt inside `apply` (REPORT_REJECTED or
      // PAYLOAD_TOO_LARGE), so the run never waits for its lease to expire.
      // The segment's steps are the run's (nothing else writes a running run's steps), so its new
      // steps start at `nextSequence`: the report needs no read of the steps' last sequence.
      await this.applyAnswer(segment, fence, { ...report, stepOffset: segment.nextSequence });
    } catch (err) {
      this.r.logger.warn('push report not applied', { ...runFields(run), error: String(err) });
    }
  }

  /**
   * Applies a push answer. A report refused because the run row stayed locked past `lockLimitMs`
   * (`LockTimeoutError`: nothing changed) is applied again, up to {@link PUSH_APPLY_ATTEMPTS} times
   * in all, while this dispatcher still refreshes the run's lease: the answer is ours, so its run
   * does not wait for lease recovery because another transaction held its row a while.
   */
  private async applyAnswer(segment: Segment, fence: ExecutionFence, report: SegmentReport): Promise<void> {
    for (let attempt = 1; ; attempt += 1) {
      try {
        await this.reports.apply(segment.run.id, fence, report, undefined, { owner: segment.run, groupCommit: true });
        return;
      } catch (err) {
        if (!isLockTimeout(err) || attempt >= PUSH_APPLY_ATTEMPTS || !this.running) throw err;
        this.r.logger.warn('push report met a locked run row; applying it again', { ...runFields(segment.run), attempt });
      }
    }
  }

  /**
   * One POST: the PushRequest as JSON, signed when the engine has a signing key
   * (`X-Ironflow-Signature` over the exact bytes sent), bounded by the function's timeout.
   */
  /**
   * An endpoint refused the signature of a node without a claim loop (an api-gateway calling its
   * sync triggers' push runs, `IRONFLOW_GATEWAY_PUSH`): its `IRONFLOW_SIGNING_KEY` is not the
   * endpoint's, which the dispatchers may well have (a key given to them only). The execution goes
   * back to the queue with its attempt unspent (`ReleaseSystem.release`, as a worker gives work
   * back), for a dispatcher to claim and sign, and this node reserves no slot again: its sync
   * triggers go to the dispatchers from now on. Logged once, as an error. A release that fails
   * leaves the run to lease recovery.
   */
  private async handBack(segment: Segment, fence: ExecutionFence): Promise<void> {
    const { run } = segment;
    if (!this.signatureRefused) {
      this.signatureRefused = true;
      this.r.logger.error(
        'a push endpoint refused this api-gateway\'s signature (401 SIGNATURE_MISSING or SIGNATURE_INVALID): its IRONFLOW_SIGNING_KEY is not the endpoint\'s; ' +
          'its TriggerSync calls go to the dispatchers from now on (give it their key, or set IRONFLOW_GATEWAY_PUSH=false)',
        { ...runFields(run), endpoint: segment.definition?.endpointUrl, signed: Boolean(this.r.config.signingKey) },
      );
    }
    try {
      await this.releases.release(run.id, run.executionSeq, this.r.config.nodeId, fence, 'the push endpoint refused the api-gateway\'s signature');
    } catch (err) {
      this.r.logger.warn('push execution not handed back after a refused signature; lease recovery takes it', { ...runFields(run), error: String(err) });
    }
  }

  private async call(url: string, timeoutMs: number, segment: Segment): Promise<SegmentReport | typeof SIGNATURE_REFUSED> {
    const stop = this.r.metrics.pushLatency.startTimer();
    try {
      const body = JSON.stringify(toPushRequest(segment));
      const { signingKey } = this.r.config;
      const headers = { 'content-type': 'application/json', ...(signingKey ? { [SIGNATURE_HEADER]: signPushBody(signingKey, body) } : {}) };
      // Every connection of the policy's keep-alive Agent is checked against the allow-list.
      const { statusCode, text } = await postPush(this.endpoints.dispatcher, url, headers, body, timeoutMs);
      // Without a claim loop, a refused signature is handed back (see `handBack`), not an attempt spent.
      if (statusCode === 401 && !this.claims && isSignatureRefusal(text)) return SIGNATURE_REFUSED;
      if (statusCode !== 200) {
        const refused = fromPushRefusal(statusCode, text, { nodeId: this.r.config.nodeId, signs: Boolean(signingKey) });
        if (statusCode === 401 && !this.signatureWarned.has(url)) {
          this.signatureWarned.add(url);
          this.r.logger.warn('push endpoint refused the request as unauthorized (401): check IRONFLOW_SIGNING_KEY on every process that calls push endpoints', { ...runFields(segment.run), endpoint: url, signed: Boolean(signingKey), answer: text.slice(0, 300) });
        }
        return refused;
      }
      return fromPushAnswer(text);
    } catch (err) {
      if ((err as Error)?.name === 'TimeoutError') {
        return { kind: 'failed', error: { message: `push endpoint did not answer within the function's timeout of ${timeoutMs} ms`, code: RUN_ERROR_CODES.FUNCTION_TIMED_OUT, retryable: true } };
      }
      const refused = err instanceof PushEndpointRefused ? err : (err as { cause?: unknown })?.cause;
      if (refused instanceof PushEndpointRefused) return failure(`push endpoint refused: ${refused.message}`, false, RUN_ERROR_CODES.PUSH_ENDPOINT_REFUSED);
      return failure(`push endpoint call failed: ${String(err)}`, true);
    } finally {
      stop();
    }
  }
}

/** `call`'s answer when the endpoint refused this node's signature and the execution goes back to the queue. */
const SIGNATURE_REFUSED = Symbol('signature refused');

/** A 401 body of the SDK's `serve()` refusing the signature: `{error: {code: 'SIGNATURE_MISSING' | 'SIGNATURE_INVALID'}}` (WIRE-PROTOCOL.md 2.1). */
function isSignatureRefusal(text: string): boolean {
  try {
    const code = (JSON.parse(text) as { error?: { code?: unknown } } | null)?.error?.code;
    return code === 'SIGNATURE_MISSING' || code === 'SIGNATURE_INVALID';
  } catch {
    return false;
  }
}

function failure(message: string, retryable: boolean, code: string = RUN_ERROR_CODES.PUSH_DISPATCH_FAILED): SegmentReport {
  return { kind: 'failed', error: { message, code, retryable } };
}

/**
 * Maps an endpoint's answer other than 200 (`statusCode`, body `text`) to a retryable
 * `PUSH_DISPATCH_FAILED` showing the status and the body's first 300 characters. A 401 (our SDK's
 * `serve()`: `SIGNATURE_MISSING` / `SIGNATURE_INVALID`) also says how this node (`nodeId`) sent it,
 * unsigned or signed (`signs`: it has an `IRONFLOW_SIGNING_KEY`), and that every process that calls
 * push endpoints needs the endpoint's key: the dispatchers, and the api-gateway unless
 * `IRONFLOW_GATEWAY_PUSH=false` (it calls the push runs of its TriggerSync calls itself), so a key
 * set on the dispatchers only shows in the run's history as what it is.
 */
export function fromPushRefusal(statusCode: number, text: string, node: { nodeId: string; signs: boolean }): SegmentReport {
  const answered = `push endpoint answered ${statusCode}: ${text.slice(0, 300)}`;
  if (statusCode !== 401) return failure(answered, true);
  const how = node.signs ? `signed with its IRONFLOW_SIGNING_KEY` : `unsigned (it has no IRONFLOW_SIGNING_KEY)`;
  return failure(
    `${answered} (node ${node.nodeId} sent it ${how}; every process that calls push endpoints needs the endpoint's signing key: ` +
      `the dispatchers, and the api-gateway unless IRONFLOW_GATEWAY_PUSH=false)`,
    true,
  );
}

/**
 * Maps the text of an endpoint's 200 answer to a report: a PushResponse (2.3) to its outcome; a
 * body that is not JSON, or JSON without a PushResponse status, to a retryable
 * `PUSH_DISPATCH_FAILED` that says which and shows the body's first 300 characters.
 */
export function fromPushAnswer(text: string): SegmentReport {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return failure(`push endpoint answered 200 with a body that is not JSON: ${text === '' ? '(empty)' : text.slice(0, 300)}`, true);
  }
  return fromPushResponse(body as PushResponse, text);
}

function fromPushResponse(body: PushResponse, text: string): SegmentReport {
  const steps = Array.isArray(body?.steps) ? body.steps : [];
  const sentAt = parseSentAt(body?.sent_at);
  const base = { steps, ...(sentAt !== undefined ? { sentAt } : {}) };
  switch (body?.status) {
    case 'completed':
      return { ...base, kind: 'completed', output: body.result };
    case 'failed':
      return { ...base, kind: 'failed', error: body.error ?? { message: 'failed without an error', retryable: false } };
    case 'yielded':
      return { ...base, kind: 'yielded', yield: body.yield };
    default:
      return failure(`push endpoint answered 200 without a PushResponse status ("completed", "yielded" or "failed"): ${text.slice(0, 300)}`, true);
  }
}
