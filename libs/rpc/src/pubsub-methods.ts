/**
 * `ironflow.v1.PubSubService` (WIRE-PROTOCOL.md 5.2, 5.4) as transport-free bindings, served by
 * the JSON layer ({@link handlePubSubUnaryJson}) and ConnectRPC ({@link createPubSubServiceImpl}).
 * Only Emit, Publish and ListTopics are implemented; the schema's streaming and consumer-group
 * RPCs answer `unimplemented` (subscriptions are the `<base>/ws` WebSocket).
 */
import type { JsonObject } from '@bufbuild/protobuf';
import { ConnectError, type HandlerContext, type ServiceImpl } from '@connectrpc/connect';
import { callScope } from './call-auth';
import { type CallScope, type ClientApi, EngineError, type PubSubApi, isEngineError } from '@ironflow/contracts';
import { PubSubService } from '@ironflow/contracts/proto';
import { toTimestamp, triggerInputFromProto } from './client-mapping';
import { toConnectError } from './errors';
import { type JsonBinding, serveUnaryJson, type UnaryJsonOptions, type UnaryJsonResult } from './unary-json';

/** What the PubSubService bindings use: the pub/sub engine and, for Emit, the client API. */
export interface PubSubDeps {
  pubsub: PubSubApi;
  api: ClientApi;
}

/** Header naming the run a publish comes from (`step.publish`, WIRE-PROTOCOL.md 5.4). */
export const RUN_ID_HEADER = 'x-ironflow-run-id';

type Req = Record<string, unknown> & { topic?: string; data?: JsonObject; idempotencyKey?: string; namespace?: string };

/** A PubSubService binding: like {@link JsonBinding}, and `call` also gets the publishing run's id. */
interface PubSubBinding {
  rawFields?: readonly string[];
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  call(deps: PubSubDeps, scope: CallScope, req: any, raw?: JsonObject, runId?: string): Promise<any>;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  toMessage(result: any): any;
}

const PUBSUB_METHODS: Record<string, PubSubBinding> = {
  emit: {
    call: (d, scope, req: Req) => {
      if (req.namespace && req.namespace !== 'default') throw new EngineError('VALIDATION_ERROR', 'namespace: not supported by this engine (events live in the caller\'s environment)');
      return d.api.trigger(scope, triggerInputFromProto(req as never));
    },
    toMessage: (r: { runIds: string[]; eventId: string }) => ({ runIds: r.runIds, eventId: r.eventId }),
  },
  publish: {
    rawFields: ['data'],
    call: (d, scope, req: Req, raw?: JsonObject, runId?: string) =>
      d.pubsub.publish(scope, {
        topic: String(req.topic ?? ''),
        // JSON layer: any JSON value as sent; binary: the Struct.
        data: raw ? (raw.data === undefined ? {} : raw.data) : (req.data ?? {}),
        ...(req.idempotencyKey ? { idempotencyKey: req.idempotencyKey } : {}),
        ...(runId ? { runId } : {}),
      }),
    toMessage: (r: { eventId: string; sequence: number; duplicate: boolean }) => ({ eventId: r.eventId, sequence: BigInt(r.sequence), duplicate: r.duplicate }),
  },
  listTopics: {
    call: (d, scope) => d.pubsub.listTopics(scope),
    toMessage: (topics: { name: string; messageCount: number; consumerCount: number; firstMessageAt?: string; lastMessageAt?: string }[]) => ({
      topics: topics.map((t) => ({ name: t.name, messageCount: BigInt(t.messageCount), consumerCount: t.consumerCount, firstMessageAt: toTimestamp(t.firstMessageAt), lastMessageAt: toTimestamp(t.lastMessageAt) })),
    }),
  },
};

/**
 * One PubSubService RPC from a JSON body (HTTP/1.1 `POST /ironflow.v1.PubSubService/<Method>`),
 * with the parsing, rendering and error answers of `handleUnaryJson`. `runId` is the
 * `X-Ironflow-Run-ID` header. Publish `data` may be any JSON value; `sequence` renders as a string.
 */
export function handlePubSubUnaryJson(deps: PubSubDeps, scope: CallScope, method: string, rawBody: Buffer, runId: string | undefined, options: UnaryJsonOptions = {}): Promise<UnaryJsonResult> {
  const bindings: Record<string, JsonBinding<PubSubDeps>> = {};
  for (const [name, b] of Object.entries(PUBSUB_METHODS)) {
    bindings[name] = { ...b, call: (d, s, req, raw) => b.call(d, s, req, raw, runId) } as JsonBinding<PubSubDeps>;
  }
  return serveUnaryJson(PubSubService, bindings, deps, scope, method, rawBody, options);
}

/** The ConnectRPC implementation (Connect binary/JSON, gRPC) of the implemented PubSubService RPCs; the scope is the one `authInterceptor` checked (`callScope`). */
export function createPubSubServiceImpl(deps: PubSubDeps, onError?: (err: unknown, method: string) => void): Partial<ServiceImpl<typeof PubSubService>> {
  const impl: Record<string, unknown> = {};
  for (const [name, binding] of Object.entries(PUBSUB_METHODS)) {
    impl[name] = async (req: never, ctx: HandlerContext) => {
      try {
        return binding.toMessage(await binding.call(deps, callScope(ctx), req, undefined, ctx.requestHeader.get(RUN_ID_HEADER) ?? undefined));
      } catch (err) {
        if (!isEngineError(err) && !(err instanceof ConnectError)) onError?.(err, name);
        throw toConnectError(err);
      }
    };
  }
  return impl as Partial<ServiceImpl<typeof PubSubService>>;
}
