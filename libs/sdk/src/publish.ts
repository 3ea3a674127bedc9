import { baseHeaders, connectUnary } from './http';
import { resolveApiKey, resolveEnvironment, resolveServerUrl } from './settings';

/** Where `step.publish` sends its messages; each field defaults like the client's (env vars, then defaults). */
export interface PublishTarget {
  serverUrl?: string;
  apiKey?: string;
  environment?: string;
}

/** `Publish`'s answer: the message id, its stream sequence, whether an idempotency key repeated an earlier one. */
export interface PublishResult {
  eventId: string;
  sequence: number;
  duplicate: boolean;
}

/** Publishes one message (`runId` attributes it, sent as `X-Ironflow-Run-ID`). */
export type Publisher = (topic: string, data: unknown, options?: { idempotencyKey?: string }) => Promise<PublishResult>;

export const PUBLISH_PROCEDURE = 'ironflow.v1.PubSubService/Publish';

/**
 * A publisher for `target` (WIRE-PROTOCOL.md 5.4): `POST <serverUrl>/ironflow.v1.PubSubService/Publish`
 * with `{topic, data, idempotencyKey?}`, the run id in `X-Ironflow-Run-ID` when given; `data`
 * `undefined`/`null` is sent as `{}`. Throws `IronflowClientError` on a non-2xx answer.
 */
export function createPublisher(target: PublishTarget, runId?: string, timeoutMs = 30_000): Publisher {
  const serverUrl = resolveServerUrl(target.serverUrl);
  const headers = baseHeaders(resolveApiKey(target.apiKey), target.environment ? resolveEnvironment(target.environment) : process.env.IRONFLOW_ENV || undefined);
  if (runId) headers['X-Ironflow-Run-ID'] = runId;
  return async (topic, data, options = {}) => {
    const body: Record<string, unknown> = { topic, data: data ?? {} };
    if (options.idempotencyKey) body.idempotencyKey = options.idempotencyKey;
    const res = await connectUnary(serverUrl, PUBLISH_PROCEDURE, body, { headers, timeoutMs });
    return { eventId: String(res.eventId ?? ''), sequence: Number.parseInt(String(res.sequence ?? '0'), 10) || 0, duplicate: res.duplicate === true };
  };
}
