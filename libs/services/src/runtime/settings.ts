import { hostname } from 'node:os';
import { z } from 'zod';
import { parseAllowedHosts, parseSecretsKey } from '@ironflow/engine';
import { CLUSTER_ID_PATTERN, DEFAULT_CLUSTER_ID } from '@ironflow/bus';
import { STREAM_MAX_MESSAGE_BYTES } from '@ironflow/contracts';
import { LOG_LEVELS, LogLevel } from '@ironflow/observability';
import { unknownVariableIssues } from './unknown-variables';

/**
 * Process settings from the environment, validated at start (a bad value stops the process
 * with a message naming the variable). Durations are ms.
 *
 * | variable | default |
 * | IRONFLOW_DATABASE_URL | `sqlite:.ironflow/dev.db` (`postgres://…` for a cluster) |
 * | IRONFLOW_PORT | 9123 |
 * | IRONFLOW_HOST | 0.0.0.0 |
 * | IRONFLOW_NODE_ID | the host name |
 * | IRONFLOW_POOL_SIZE | 10 (PostgreSQL connections) |
 * | IRONFLOW_LEASE_MS | 90000 |
 * | IRONFLOW_TICK_MS | 1000 |
 * | IRONFLOW_DISPATCH_POLL_MS | 1000 |
 * | IRONFLOW_SCAN_MS | 1000 (capacity scanner period) |
 * | IRONFLOW_MAX_PAYLOAD_BYTES | 4194304 |
 * | IRONFLOW_STREAM_MAX_MESSAGE_BYTES | 67108864 (largest message sent on a worker stream; a larger job assignment fails its attempt with PAYLOAD_TOO_LARGE) |
 * | IRONFLOW_CRON_CATCH_UP_MS | 10000 (a cron tick later than this is missed; missed ticks collapse into one run) |
 * | IRONFLOW_TRIGGER_FORWARD_TIMEOUT_MS | 2000 (api-gateway: how long it waits for a dispatcher to answer a forwarded TriggerSync before it triggers itself) |
 * | IRONFLOW_GATEWAY_PUSH | true: the api-gateway calls the push runs of its sync triggers itself (claim at trigger, no hop to a dispatcher; it needs the dispatchers' IRONFLOW_SIGNING_KEY and IRONFLOW_PUSH_ALLOWED_HOSTS and egress to the endpoints); false: it hands every sync trigger to a dispatcher |
 * | IRONFLOW_GATEWAY_PUSH_SLOTS | 128 (api-gateway: how many push calls of its TriggerSync calls it runs at once; past it a TriggerSync goes to a dispatcher) |
 * | IRONFLOW_FORWARDED_TRIGGER_WAIT_MS | 1000 (dispatcher: how long a forwarded TriggerSync waits for a free push slot before it answers busy; 0: at once). Must be below IRONFLOW_TRIGGER_FORWARD_TIMEOUT_MS |
 * | NATS_URL (or IRONFLOW_NATS_URL) | none: the in-process bus (one process); `nats://…` for a cluster |
 * | IRONFLOW_LOG_LEVEL | info (trace, debug, info, warn, error, fatal, silent) |
 * | IRONFLOW_SHUTDOWN_TIMEOUT_MS | 30000: after SIGTERM the process exits within this, drained or not |
 * | IRONFLOW_SIGNING_KEY | none: push requests unsigned; else each carries `X-Ironflow-Signature` (at least 16 characters, no surrounding whitespace) |
 * | IRONFLOW_SECRETS_KEY | none: secrets cannot be set or delivered; 32 bytes as 64 hex digits or base64 |
 * | IRONFLOW_REQUIRE_API_KEY | false: keys are required once the first key exists; true: from the start |
 * | IRONFLOW_ADMIN_KEY | none: the bearer that manages API keys (at least 32 characters) |
 * | IRONFLOW_API_KEY_CACHE_MS | 5000 (how long a key lookup is trusted; a revocation reaches other processes within it) |
 * | IRONFLOW_PUSH_ALLOWED_HOSTS | none: push anywhere but link-local/metadata; else a comma list of CIDRs, addresses, host names, `*.domain` |
 * | IRONFLOW_CLUSTER_ID | `ironflow`: the deployment's namespace on a shared NATS (`BusNamespace`); letters, digits, `_`, `-` |
 *
 * Any other non-empty `IRONFLOW_*` variable stops the process too (a typo would leave the default
 * in force without a word), but for the client's and this repository's test and bench variables
 * (`unknown-variables.ts`).
 */
const variables = z.object({
  IRONFLOW_DATABASE_URL: z
    .string()
    .refine((u) => u.startsWith('postgres://') || u.startsWith('postgresql://') || u.startsWith('sqlite:'), 'must start with postgres://, postgresql:// or sqlite:')
    .default('sqlite:.ironflow/dev.db'),
  IRONFLOW_PORT: z.coerce.number().int().min(0).max(65535).default(9123),
  IRONFLOW_HOST: z.string().default('0.0.0.0'),
  IRONFLOW_NODE_ID: z.string().regex(/^[A-Za-z0-9_.-]+$/).default(hostname().replace(/[^A-Za-z0-9_.-]/g, '-')),
  IRONFLOW_POOL_SIZE: z.coerce.number().int().min(1).max(200).default(10),
  IRONFLOW_LEASE_MS: z.coerce.number().int().min(100).default(90_000),
  IRONFLOW_TICK_MS: z.coerce.number().int().min(10).default(1000),
  IRONFLOW_DISPATCH_POLL_MS: z.coerce.number().int().min(10).default(1000),
  IRONFLOW_SCAN_MS: z.coerce.number().int().min(10).default(1000),
  IRONFLOW_MAX_PAYLOAD_BYTES: z.coerce.number().int().min(1024).default(4 * 1024 * 1024),
  IRONFLOW_STREAM_MAX_MESSAGE_BYTES: z.coerce.number().int().min(1024).default(STREAM_MAX_MESSAGE_BYTES),
  IRONFLOW_LOG_LEVEL: z.enum(LOG_LEVELS).default('info'),
  IRONFLOW_SHUTDOWN_TIMEOUT_MS: z.coerce.number().int().min(100).default(30_000),
  IRONFLOW_CRON_CATCH_UP_MS: z.coerce.number().int().min(0).default(10_000),
  IRONFLOW_TRIGGER_FORWARD_TIMEOUT_MS: z.coerce.number().int().min(1).default(2000),
  IRONFLOW_FORWARDED_TRIGGER_WAIT_MS: z.coerce.number().int().min(0).default(1000),
  IRONFLOW_GATEWAY_PUSH: z.enum(['true', 'false', '1', '0']).transform((v) => v === 'true' || v === '1').default('true'),
  IRONFLOW_GATEWAY_PUSH_SLOTS: z.coerce.number().int().min(1).max(10_000).default(128),
  IRONFLOW_NATS_URL: z.string().regex(/^nats:\/\//, 'NATS_URL (or IRONFLOW_NATS_URL) must start with nats://').optional(),
  IRONFLOW_SIGNING_KEY: z
    .string()
    .min(16, 'at least 16 characters')
    // A key read from a file or a Secret often ends in a newline: the HMAC would silently differ from the app's.
    .refine((k) => k.trim() === k, 'has leading or trailing whitespace (a newline from a file?)')
    .optional(),
  IRONFLOW_SECRETS_KEY: z.string().transform((v, ctx) => {
    try {
      return parseSecretsKey(v);
    } catch (err) {
      ctx.addIssue({ code: z.ZodIssueCode.custom, message: (err as Error).message });
      return z.NEVER;
    }
  }).optional(),
  IRONFLOW_REQUIRE_API_KEY: z.enum(['true', 'false', '1', '0']).transform((v) => v === 'true' || v === '1').default('false'),
  IRONFLOW_ADMIN_KEY: z.string().min(32, 'IRONFLOW_ADMIN_KEY: at least 32 characters (e.g. `openssl rand -base64 32`)').optional(),
  IRONFLOW_API_KEY_CACHE_MS: z.coerce.number().int().min(0).default(5000),
  IRONFLOW_PUSH_ALLOWED_HOSTS: z.string().transform((v, ctx) => {
    const entries = v.split(',').map((e) => e.trim()).filter((e) => e !== '');
    try {
      parseAllowedHosts(entries);
    } catch (err) {
      ctx.addIssue({ code: z.ZodIssueCode.custom, message: (err as Error).message });
      return z.NEVER;
    }
    return entries;
  }).default(''),
  IRONFLOW_CLUSTER_ID: z.string().regex(CLUSTER_ID_PATTERN, "1-63 letters, digits, '_' or '-' (it stands in NATS subjects and stream names)").default(DEFAULT_CLUSTER_ID),
});
const schema = variables.refine((e) => e.IRONFLOW_FORWARDED_TRIGGER_WAIT_MS < e.IRONFLOW_TRIGGER_FORWARD_TIMEOUT_MS, {
  // A dispatcher that holds a forwarded trigger past the gateway's wait answers nobody: the gateway
  // has already triggered itself, and the run waits for a claim instead of the free slot.
  path: ['IRONFLOW_FORWARDED_TRIGGER_WAIT_MS'],
  message: 'must be below IRONFLOW_TRIGGER_FORWARD_TIMEOUT_MS (the gateway stops waiting for the dispatcher\'s answer then)',
});

export interface IronflowSettings {
  databaseUrl: string;
  port: number;
  host: string;
  nodeId: string;
  poolSize: number;
  leaseMs: number;
  tickMs: number;
  dispatchPollMs: number;
  scanMs: number;
  maxPayloadBytes: number;
  /** Largest message sent on a worker stream, bytes (default 64 MiB). */
  streamMaxMessageBytes: number;
  /** Cron: ticks at most this late all fire; a schedule further behind fires once (ms). */
  cronCatchUpMs: number;
  /** api-gateway: how long it waits for a dispatcher's answer to a forwarded TriggerSync, ms (engine `triggerForwardTimeoutMs`). */
  triggerForwardTimeoutMs: number;
  /** Dispatcher: how long a forwarded TriggerSync waits for a push slot before answering busy, ms (engine `forwardedTriggerWaitMs`). */
  forwardedTriggerWaitMs: number;
  /**
   * api-gateway: calls the push runs of its sync triggers itself, with their claim in the trigger's
   * unit of work (engine role `pushAtOnce`); when its push slots are full it hands the trigger to a
   * dispatcher. `IRONFLOW_GATEWAY_PUSH`, default true.
   */
  gatewayPush: boolean;
  /**
   * api-gateway: its push slots, the push calls of its TriggerSync calls in flight at once
   * (`IRONFLOW_GATEWAY_PUSH_SLOTS`, default 128); past them a TriggerSync goes to a dispatcher. Each
   * is a caller waiting on its own connection, so the bound only caps a flood; 128 is what a
   * dispatcher lets wait for its 16 slots (8 forwarded triggers a slot).
   */
  gatewayPushSlots: number;
  /** NATS JetStream URL; without it the process uses the in-process bus. */
  natsUrl?: string;
  logLevel: LogLevel;
  /** The hard cap of a shutdown (SIGTERM → exit), ms; see `startServer`'s `close`. */
  shutdownTimeoutMs: number;
  /** Key of the push signature (`X-Ironflow-Signature`); without it push requests are unsigned. */
  signingKey?: string;
  /** The deployment's namespace on NATS: subjects `ifx.{clusterId}.…`, streams `{clusterId}_…` (default `ironflow`). */
  clusterId: string;
  /** SQLite: hold the file exclusively (`ironflow dev`). */
  exclusiveStore?: boolean;
  /** `IRONFLOW_SECRETS_KEY`, decoded (32 bytes). */
  secretsKey?: Buffer;
  /** `IRONFLOW_REQUIRE_API_KEY`. */
  requireApiKey: boolean;
  /** `IRONFLOW_ADMIN_KEY`. */
  adminKey?: string;
  apiKeyCacheMs: number;
  /** `IRONFLOW_PUSH_ALLOWED_HOSTS` entries; empty = anywhere but link-local and metadata addresses. */
  pushAllowedHosts: string[];
}

/**
 * A start-up problem the operator fixes in the environment (a bad value, a store or NATS that
 * cannot be reached, a port in use): its message names the variable, and a service logs it as one
 * line, without a stack.
 */
export class SettingsError extends Error {
  /** What the CLI and logs show as the error's code. */
  readonly code = 'SETTINGS_ERROR';

  constructor(message: string) {
    super(message);
    this.name = 'SettingsError';
  }
}

/** Where the settings are listed, for the message that refuses an unknown one. */
const SETTINGS_DOC = 'README.md "Running on PostgreSQL and NATS"';

/**
 * Reads and validates settings; throws a {@link SettingsError} listing every bad variable and every
 * unknown non-empty `IRONFLOW_*` one (with the closest setting's name when it looks like a typo).
 */
export function loadSettings(env: NodeJS.ProcessEnv = process.env, overrides: Partial<IronflowSettings> = {}): IronflowSettings {
  const vars = Object.fromEntries(Object.entries(env).filter(([k, v]) => k.startsWith('IRONFLOW_') && v !== ''));
  const unknown = unknownVariableIssues(Object.keys(vars), Object.keys(variables.shape));
  if (!vars.IRONFLOW_NATS_URL && env.NATS_URL) vars.IRONFLOW_NATS_URL = env.NATS_URL;
  const parsed = schema.safeParse(vars);
  if (unknown.length > 0 || !parsed.success) {
    const bad = parsed.success ? [] : parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
    throw new SettingsError(`invalid configuration: ${[...unknown, ...bad].join('; ')}${unknown.length > 0 ? ` (the settings are listed in ${SETTINGS_DOC})` : ''}`);
  }
  const e = parsed.data;
  return {
    databaseUrl: e.IRONFLOW_DATABASE_URL,
    port: e.IRONFLOW_PORT,
    host: e.IRONFLOW_HOST,
    nodeId: e.IRONFLOW_NODE_ID,
    poolSize: e.IRONFLOW_POOL_SIZE,
    leaseMs: e.IRONFLOW_LEASE_MS,
    tickMs: e.IRONFLOW_TICK_MS,
    dispatchPollMs: e.IRONFLOW_DISPATCH_POLL_MS,
    scanMs: e.IRONFLOW_SCAN_MS,
    maxPayloadBytes: e.IRONFLOW_MAX_PAYLOAD_BYTES,
    streamMaxMessageBytes: e.IRONFLOW_STREAM_MAX_MESSAGE_BYTES,
    logLevel: e.IRONFLOW_LOG_LEVEL,
    shutdownTimeoutMs: e.IRONFLOW_SHUTDOWN_TIMEOUT_MS,
    cronCatchUpMs: e.IRONFLOW_CRON_CATCH_UP_MS,
    triggerForwardTimeoutMs: e.IRONFLOW_TRIGGER_FORWARD_TIMEOUT_MS,
    forwardedTriggerWaitMs: e.IRONFLOW_FORWARDED_TRIGGER_WAIT_MS,
    gatewayPush: e.IRONFLOW_GATEWAY_PUSH,
    gatewayPushSlots: e.IRONFLOW_GATEWAY_PUSH_SLOTS,
    ...(e.IRONFLOW_NATS_URL ? { natsUrl: e.IRONFLOW_NATS_URL } : {}),
    ...(e.IRONFLOW_SIGNING_KEY ? { signingKey: e.IRONFLOW_SIGNING_KEY } : {}),
    ...(e.IRONFLOW_SECRETS_KEY ? { secretsKey: e.IRONFLOW_SECRETS_KEY } : {}),
    requireApiKey: e.IRONFLOW_REQUIRE_API_KEY,
    ...(e.IRONFLOW_ADMIN_KEY ? { adminKey: e.IRONFLOW_ADMIN_KEY } : {}),
    apiKeyCacheMs: e.IRONFLOW_API_KEY_CACHE_MS,
    pushAllowedHosts: e.IRONFLOW_PUSH_ALLOWED_HOSTS,
    clusterId: e.IRONFLOW_CLUSTER_ID,
    ...overrides,
  };
}
