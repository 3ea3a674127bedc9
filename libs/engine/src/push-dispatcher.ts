import { fetch } from 'undici';
import { EngineError, PushResponse, RUN_ERROR_CODES } from '@ironflow/contracts';
import { ExecutionFence } from '@ironflow/fencing';
import { leasesSql } from '@ironflow/store';
import { DispatchHints } from './dispatch-hints';
import { DispatchSystem } from './dispatch-system';
import { ReportSystem, SegmentReport } from './report-system';
import { PushEndpointPolicy, PushEndpointRefused } from './push-endpoint-policy';
import { EngineResources } from './resources';
import { Segment, toPushRequest } from './segment-loader';

/**
 * The push dispatcher (WIRE-PROTOCOL.md section 2): claims push segments, POSTs each to its
 * function's endpoint, bounded by the function's timeout, and applies the answer as a fenced
 * report. A transport failure (refused, non-200, a redirect, a body that is not a PushResponse)
 * counts as a retryable failure of the attempt with code `PUSH_DISPATCH_FAILED`. A connection the
 * push allow-list refuses (the endpoint now resolves to a link-local, metadata or not-allowed
 * address) fails the attempt without retry, code `PUSH_ENDPOINT_REFUSED`, before a byte is sent.
 */
export class PushDispatcher {
  private inFlight = new Set<Promise<void>>();
  /** Executions whose push call is in flight: their leases are refreshed while they run. */
  private readonly leased = new Map<string, number>();
  private refresher?: NodeJS.Timeout;
  private running = false;
  private wakeUp?: () => void;
  private loop?: Promise<void>;
  private unsubscribe?: () => void;

  constructor(
    private readonly r: EngineResources,
    private readonly dispatch: DispatchSystem,
    private readonly reports: ReportSystem,
    private readonly hints: DispatchHints,
    private readonly endpoints: PushEndpointPolicy,
  ) {}

  start(): void {
    if (this.running) return;
    this.running = true;
    this.unsubscribe = this.hints.onQueued('push', () => this.wakeUp?.());
    this.loop = this.run();
    this.refresher = setInterval(() => void this.refreshLeases(), Math.max(50, Math.floor(this.r.config.leaseMs / 3)));
    this.refresher.unref();
  }

  /** DESIGN.md "Leases and fencing": the dispatcher refreshes the lease of a push call in flight. */
  private async refreshLeases(): Promise<void> {
    if (this.leased.size === 0) return;
    const entries = [...this.leased];
    try {
      await this.r.store.unitOfWork('refreshPushLeases', async (tx) => {
        for (const [runId, seq] of entries) await leasesSql.refreshLease(tx, runId, seq, tx.now + this.r.config.leaseMs);
      });
    } catch (err) {
      this.r.logger.warn('push lease refresh failed; the next refresh tries again', { error: String(err) });
    }
  }

  /** Stops claiming, then waits up to `drainMs` for invocations in flight. */
  async stop(drainMs: number): Promise<void> {
    this.running = false;
    clearInterval(this.refresher);
    this.unsubscribe?.();
    this.wakeUp?.();
    await this.loop;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([Promise.allSettled([...this.inFlight]), new Promise((resolve) => { timer = setTimeout(resolve, drainMs); })]);
    clearTimeout(timer);
  }

  private async run(): Promise<void> {
    while (this.running) {
      let claimed = 0;
      try {
        const room = this.r.config.pushConcurrency - this.inFlight.size;
        const segments = await this.dispatch.claim({ mode: 'push', limit: room }, this.r.config.nodeId);
        claimed = segments.length;
        for (const segment of segments) {
          const p: Promise<void> = this.invoke(segment).finally(() => { this.inFlight.delete(p); this.wakeUp?.(); });
          this.inFlight.add(p);
        }
      } catch (err) {
        this.r.logger.warn('push claim failed; retrying after the poll period', { error: String(err) });
      }
      if (claimed === 0 || this.inFlight.size >= this.r.config.pushConcurrency) await this.idle();
    }
  }

  private idle(): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, this.r.config.dispatchPollMs);
      function done() { clearTimeout(timer); resolve(); }
      this.wakeUp = done;
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
    try {
      await this.reports.apply(run.id, fence, report);
    } catch (err) {
      if (!(err instanceof EngineError) || (err.code !== 'VALIDATION_ERROR' && err.code !== 'PAYLOAD_TOO_LARGE')) {
        this.r.logger.warn('push report not applied', { runId: run.id, error: String(err) });
        return;
      }
      // The endpoint answered something the engine cannot apply: the attempt fails (retryable),
      // rather than leaving the run running until its lease expires.
      // Too large is deterministic (the same output again): not retryable. A malformed answer may be fixed by a redeploy.
      await this.reports.apply(run.id, fence, failure(`push endpoint answer rejected: ${err.message}`, err.code !== 'PAYLOAD_TOO_LARGE')).catch((again: unknown) =>
        this.r.logger.warn('push failure report not applied', { runId: run.id, error: String(again) }),
      );
    }
  }

  private async call(url: string, timeoutMs: number, segment: Segment): Promise<SegmentReport> {
    const stop = this.r.metrics.pushLatency.startTimer();
    try {
      const response = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(toPushRequest(segment)),
        signal: AbortSignal.timeout(timeoutMs),
        // Every connection is checked against the allow-list; a redirect is an answer, not followed.
        dispatcher: this.endpoints.dispatcher,
        redirect: 'manual',
      });
      const text = await response.text();
      if (response.status !== 200) return failure(`push endpoint answered ${response.status}: ${text.slice(0, 300)}`, true);
      return fromPushResponse(JSON.parse(text) as PushResponse);
    } catch (err) {
      const cause = (err as { cause?: unknown }).cause;
      if (cause instanceof PushEndpointRefused) return failure(`push endpoint refused: ${cause.message}`, false, RUN_ERROR_CODES.PUSH_ENDPOINT_REFUSED);
      return failure(`push endpoint call failed: ${String(err)}`, true);
    } finally {
      stop();
    }
  }
}

function failure(message: string, retryable: boolean, code: string = RUN_ERROR_CODES.PUSH_DISPATCH_FAILED): SegmentReport {
  return { kind: 'failed', error: { message, code, retryable } };
}

/** Maps the endpoint's answer (2.3) to a report; anything else is a dispatch failure. */
export function fromPushResponse(body: PushResponse): SegmentReport {
  const steps = Array.isArray(body?.steps) ? body.steps : [];
  switch (body?.status) {
    case 'completed':
      return { kind: 'completed', output: body.result, steps };
    case 'failed':
      return { kind: 'failed', error: body.error ?? { message: 'failed without an error', retryable: false }, steps };
    case 'yielded':
      return { kind: 'yielded', yield: body.yield, steps };
    default:
      return failure(`push endpoint answered an unknown status ${JSON.stringify((body as { status?: unknown })?.status)}`, true);
  }
}
