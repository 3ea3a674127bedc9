/**
 * The JSON compatibility layer for Connect unary calls over HTTP/1.1 (WIRE-PROTOCOL.md 5.1, 5.2,
 * 5.5 and decisions 7.1-7.3): what the Ironflow SDK's `createClient` and REST worker send to
 * `POST /ironflow.v1.IronflowService/<Method>` with `Content-Type: application/json`.
 */
import {
  create,
  type DescEnum,
  type DescService,
  type DescField,
  type DescMessage,
  fromJson,
  type JsonObject,
  type JsonValue,
  toBinary,
  toJson,
} from '@bufbuild/protobuf';
import { ConnectError } from '@connectrpc/connect';
import {
  type CallScope,
  type ClientApi,
  DEFAULT_MAX_PAYLOAD_BYTES,
  EngineError,
  isEngineError,
} from '@ironflow/contracts';
import { CLIENT_METHODS, type ClientMethodBinding, type ClientMethodName, defaultHealth } from './client-methods';
import type { ClientServiceOptions } from './client-service';
import { toStruct } from './client-mapping';
import {
  connectCodeOf,
  connectCodeString,
  httpStatusOfConnectCode,
  IRONFLOW_ERROR_CODE_HEADER,
} from './errors';
import { EngineErrorInfoSchema, IronflowService } from '@ironflow/contracts/proto';

/** What the HTTP/1.1 controller sends back: `status` and a JSON `body` (`application/json`). */
export interface UnaryJsonResult {
  status: number;
  body: unknown;
}

/**
 * Error body. `code` and `message` are the Connect protocol's error JSON (the SDK reads
 * `message`, else `code`, 5.1); `ironflowCode` is ours — the engine code (`RUN_NOT_FOUND`,
 * `INVALID_JSON`…) whenever the error has one; `details` holds Connect error details
 * (`ironflow.v1.EngineErrorInfo`, base64 `value` plus readable `debug`).
 */
export interface UnaryJsonErrorBody {
  code: string;
  message: string;
  ironflowCode?: string;
  details?: { type: string; value: string; debug?: JsonValue }[];
}

export interface UnaryJsonOptions extends ClientServiceOptions {
  /** Largest accepted body in bytes; default `DEFAULT_MAX_PAYLOAD_BYTES` (4 MiB). Over → 429 `resource_exhausted` / `PAYLOAD_TOO_LARGE`. */
  maxBodyBytes?: number;
}

/** The IronflowService RPC names (`GetRun`…) served by {@link handleUnaryJson}. */
export const UNARY_JSON_METHODS: readonly string[] = IronflowService.methods.map((m) => m.name);

/**
 * Runs one IronflowService RPC from a JSON body and answers the JSON the Ironflow SDK reads.
 *
 * `method` is the RPC name as in the URL (`GetRun`); `rawBody` the request body (empty = `{}`).
 *
 * Requests: protojson parsing that accepts camelCase and snake_case keys (camelCase wins when a
 * field is given both ways), ignores unknown fields except in RegisterFunction (refused by name,
 * as on REST: the engine never stores and ignores an option), and accepts
 * enum aliases: the full name (`EXECUTION_MODE_PULL`), the name without its prefix in any case
 * (`"push"`, `"running"`) and the number (`1`). An enum value that matches none is a 400.
 *
 * Responses (200): protojson camelCase with default-valued fields emitted (`attempt: 0`,
 * `runIds: []`, `results: []`), except that run statuses (`Run.status`, `RunResult.status`)
 * are the lowercase contracts strings (`failed`), and user values in Struct fields (run
 * input/output, step output) are the stored JSON as is (numbers, arrays… too). Missing optional
 * fields are absent, never `null`. int64 fields are strings (protojson).
 *
 * Errors (never thrown; returned as `{status, body: UnaryJsonErrorBody}`):
 * - `EngineError`: `code` per `connectCodeOf`, with the HTTP status the Connect protocol maps that
 *   code to (`httpStatusOfConnectCode`: `failed_precondition` 400, `resource_exhausted` 429…),
 *   `ironflowCode` = its code.
 * - body not JSON → 400 `invalid_argument` / `INVALID_JSON`; JSON that does not fit the request
 *   message (not an object, wrong types, unknown enum value) → 400 `invalid_argument` /
 *   `VALIDATION_ERROR`; body over `maxBodyBytes` → 429 `resource_exhausted` / `PAYLOAD_TOO_LARGE`.
 * - unknown method → 404 `unimplemented` (no `ironflowCode`).
 * - `ConnectError` → its code, HTTP status per the Connect protocol.
 * - anything else → 500 `internal` / `INTERNAL_ERROR`, message "internal error" (the error goes
 *   to `options.onError`).
 */
export async function handleUnaryJson(
  api: ClientApi,
  scope: CallScope,
  method: string,
  rawBody: Buffer,
  options: UnaryJsonOptions = {},
): Promise<UnaryJsonResult> {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  const bindings = CLIENT_METHODS as unknown as Record<string, JsonBinding<any>>;
  return serveUnaryJson(IronflowService, bindings, { api, health: options.health ?? defaultHealth }, scope, method, rawBody, options);
}

/** A binding as {@link serveUnaryJson} runs it: `raw` is the request body's JSON object as sent. */
export interface JsonBinding<D> {
  call(deps: D, scope: CallScope, req: never, raw: JsonObject): Promise<unknown>;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  toMessage(result: never): any;
  patchJson?(result: never, json: JsonObject): void;
  /** Fields the binding reads from `raw` as any JSON value (e.g. Publish `data`); left out of protojson parsing. */
  rawFields?: readonly string[];
  /**
   * Refuse a key the request message does not have, at any depth, instead of dropping it:
   * `VALIDATION_ERROR` `unknown field(s), not options of this engine: retries, retry.maxAttemps`
   * (RegisterFunction, whose options the engine refuses by name on every route).
   */
  strictFields?: boolean;
}

/**
 * {@link handleUnaryJson} for any service: `bindings` by the method's local name, each given
 * `deps`. Same parsing, rendering and error answers.
 */
export async function serveUnaryJson<D>(
  service: DescService,
  bindings: Record<string, JsonBinding<D>>,
  deps: D,
  scope: CallScope,
  method: string,
  rawBody: Buffer,
  options: UnaryJsonOptions = {},
): Promise<UnaryJsonResult> {
  const desc = service.methods.find((m) => m.name === method);
  const binding = desc ? bindings[desc.localName] : undefined;
  if (!desc || !binding) {
    return errorResult(404, {
      code: 'unimplemented',
      message: `method ${service.typeName}/${method} is not implemented`,
    });
  }
  try {
    const { request, raw } = parseRequest(desc.input, rawBody, options.maxBodyBytes ?? DEFAULT_MAX_PAYLOAD_BYTES, binding.rawFields ?? [], binding.strictFields === true);
    const result = await binding.call(deps, scope, request as never, raw);
    const message = create(desc.output, binding.toMessage(result as never));
    const json = toJson(desc.output, message, { alwaysEmitImplicit: true }) as JsonObject;
    binding.patchJson?.(result as never, json);
    return { status: 200, body: json };
  } catch (err) {
    if (!isEngineError(err) && !(err instanceof ConnectError)) options.onError?.(err, method);
    return unaryJsonError(err);
  }
}

/**
 * Any thrown value as the JSON error answer of {@link handleUnaryJson} (for controllers that
 * fail before reaching it, e.g. on auth).
 */
export function unaryJsonError(err: unknown): UnaryJsonResult {
  if (isEngineError(err)) {
    const details = toStruct(err.details);
    const info = create(EngineErrorInfoSchema, { code: err.code, ...(details ? { details } : {}) });
    const code = connectCodeOf(err.code);
    return errorResult(httpStatusOfConnectCode(code), {
      code: connectCodeString(code),
      message: err.message,
      ironflowCode: err.code,
      details: [
        {
          type: EngineErrorInfoSchema.typeName,
          value: Buffer.from(toBinary(EngineErrorInfoSchema, info)).toString('base64').replace(/=+$/, ''),
          debug: toJson(EngineErrorInfoSchema, info),
        },
      ],
    });
  }
  if (err instanceof ConnectError) {
    const ironflowCode = err.metadata.get(IRONFLOW_ERROR_CODE_HEADER) ?? undefined;
    return errorResult(httpStatusOfConnectCode(err.code), {
      code: connectCodeString(err.code),
      message: err.rawMessage,
      ...(ironflowCode ? { ironflowCode } : {}),
    });
  }
  return errorResult(500, { code: 'internal', message: 'internal error', ironflowCode: 'INTERNAL_ERROR' });
}

function errorResult(status: number, body: UnaryJsonErrorBody): UnaryJsonResult {
  return { status, body };
}

// ---------------------------------------------------------------------------------------------
// Request parsing

function parseRequest(desc: DescMessage, rawBody: Buffer, maxBodyBytes: number, rawFields: readonly string[], strictFields: boolean): { request: unknown; raw: JsonObject } {
  if (rawBody.length > maxBodyBytes) {
    throw new EngineError('PAYLOAD_TOO_LARGE', `request body exceeds ${maxBodyBytes} bytes`);
  }
  const text = rawBody.toString('utf8').replace(/^\uFEFF/, '');
  let json: unknown;
  try {
    json = text.trim() === '' ? {} : JSON.parse(text);
  } catch (err) {
    throw new EngineError('INVALID_JSON', `request body is not valid JSON: ${(err as Error).message}`);
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json)) {
    throw new EngineError('VALIDATION_ERROR', `request body must be a JSON object for ${desc.typeName}`);
  }
  const parsed = { ...(json as JsonObject) };
  for (const field of rawFields) delete parsed[field];
  const unknown: string[] | undefined = strictFields ? [] : undefined;
  const normalized = normalizeMessageJson(desc, parsed, '', unknown);
  if (unknown && unknown.length > 0) throw new EngineError('VALIDATION_ERROR', `unknown field(s), not options of this engine: ${unknown.join(', ')}`);
  try {
    return { request: fromJson(desc, normalized, { ignoreUnknownFields: true }), raw: json as JsonObject };
  } catch (err) {
    throw new EngineError('VALIDATION_ERROR', (err as Error).message);
  }
}

/**
 * Rewrites a request object for strict protojson parsing: keys renamed to the camelCase JSON
 * name (camelCase wins over snake_case), unknown keys dropped (and their paths pushed to
 * `unknown` when given), enum aliases resolved; nested messages are walked, well-known types
 * (Struct, Timestamp…) left as they are.
 */
function normalizeMessageJson(desc: DescMessage, json: JsonObject, path: string, unknown: string[] | undefined): JsonObject {
  const out: JsonObject = {};
  for (const [key, value] of Object.entries(json)) {
    const field = desc.fields.find((f) => f.jsonName === key || f.name === key);
    if (!field) {
      // Named as REST registration names them (`triggers.0.evnt`).
      unknown?.push((path ? `${path}.${key}` : key).replace(/\[(\d+)\]/g, '.$1'));
      continue;
    }
    if (key !== field.jsonName && Object.prototype.hasOwnProperty.call(json, field.jsonName)) continue;
    out[field.jsonName] = normalizeFieldValue(field, value, path ? `${path}.${field.jsonName}` : field.jsonName, unknown);
  }
  return out;
}

function normalizeFieldValue(field: DescField, value: JsonValue, path: string, unknown: string[] | undefined): JsonValue {
  if (value === null) return value;
  switch (field.fieldKind) {
    case 'enum':
      return normalizeEnum(field.enum, value, path);
    case 'message':
      return normalizeNested(field.message, value, path, unknown);
    case 'list':
      if (!Array.isArray(value)) return value;
      if (field.listKind === 'enum') return value.map((v, i) => normalizeEnum(field.enum, v, `${path}[${i}]`));
      if (field.listKind === 'message') return value.map((v, i) => normalizeNested(field.message, v, `${path}[${i}]`, unknown));
      return value;
    case 'map': {
      if (typeof value !== 'object' || Array.isArray(value)) return value;
      const out: JsonObject = {};
      for (const [k, v] of Object.entries(value)) {
        out[k] =
          field.mapKind === 'enum'
            ? normalizeEnum(field.enum, v, `${path}.${k}`)
            : field.mapKind === 'message'
              ? normalizeNested(field.message, v, `${path}.${k}`, unknown)
              : v;
      }
      return out;
    }
    case 'scalar':
      return value;
  }
}

function normalizeNested(desc: DescMessage, value: JsonValue, path: string, unknown: string[] | undefined): JsonValue {
  if (desc.typeName.startsWith('google.protobuf.')) return value;
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return value;
  return normalizeMessageJson(desc, value, path, unknown);
}

/**
 * Enum aliases (7.1): full name in any case, the name without the enum's shared prefix in any
 * case (`push` → EXECUTION_MODE_PUSH, `waiting_for_capacity` → RUN_STATUS_WAITING_FOR_CAPACITY),
 * or a declared number. Anything else → VALIDATION_ERROR.
 */
function normalizeEnum(desc: DescEnum, value: JsonValue, path: string): JsonValue {
  if (typeof value === 'number' && desc.values.some((v) => v.number === value)) return value;
  if (typeof value === 'string') {
    const wanted = value.trim().toUpperCase();
    const prefix = (desc.sharedPrefix ?? '').toUpperCase();
    const match = desc.values.find((v) => v.name === wanted || v.name === prefix + wanted);
    if (match) return match.name;
  }
  throw new EngineError(
    'VALIDATION_ERROR',
    `${path}: ${JSON.stringify(value)} is not a valid ${desc.name} (accepted: ${desc.values
      .map((v) => v.name)
      .join(', ')}, the same without the prefix, or the number)`,
  );
}
