import { z } from 'zod';
import {
  CallScope,
  DEFAULT_FUNCTION_TIMEOUT_MS,
  DEFAULT_RETRY,
  EngineError,
  FunctionDefinition,
  RecordingProfile,
  RegisterFunctionInput,
} from '@ironflow/contracts';
import { FunctionRecord, cronSql, functionsSql } from '@ironflow/store';
import { cronSpecOf, cronTriggersOf, nextTick, parseCronTrigger } from './cron-schedule';
import { PushEndpointPolicy } from './push-endpoint-policy';
import { EngineResources } from './resources';
import { MAX_FUNCTION_SECRETS, SecretSystem, checkSecretName } from './secret-system';
import { TriggerExpressions } from './trigger-expressions';
import { cancelOnConditions } from './cancel-on-specs';
import { refuseUnsupportedOptions } from './unsupported-options';
import { checkName, refuseNulAnywhere } from './payload-limits';
import { dataPathProblem } from './json-path';

const ID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;
/** Largest value of a protobuf `int32` field (`timeout_ms`, `initial_delay_ms`, …). */
const INT32_MAX = 2_147_483_647;

/** A path into the event data (`concurrency.key`, `debounce.key`, `cancelOn[].match`): refused when empty or with an empty name (`dataPathProblem`). */
const dataPath = z
  .string()
  .max(256)
  .superRefine((path, ctx) => {
    const problem = dataPathProblem(path);
    if (problem) ctx.addIssue({ code: z.ZodIssueCode.custom, message: problem });
  });

/**
 * `retry.initialDelayMs` above `retry.maxDelayMs` (either one the default when left out) is
 * refused: every delay would be the cap, so `initialDelayMs` and `backoffFactor` would do nothing.
 */
function refuseInitialDelayAboveCap(retry: { initialDelayMs?: number; maxDelayMs?: number }, ctx: z.RefinementCtx): void {
  const initial = retry.initialDelayMs ?? DEFAULT_RETRY.initialDelayMs;
  const cap = retry.maxDelayMs ?? DEFAULT_RETRY.maxDelayMs;
  if (initial <= cap) return;
  const initialText = retry.initialDelayMs === undefined ? `${initial} (the default)` : `${initial}`;
  const capText = retry.maxDelayMs === undefined ? `${cap}, the default` : `${cap}`;
  ctx.addIssue({
    code: z.ZodIssueCode.custom,
    path: ['initialDelayMs'],
    message: `${initialText} is above retry.maxDelayMs (${capText}): every delay would be the cap; give a maxDelayMs at least initialDelayMs`,
  });
}

const definitionSchema = z.object({
  id: z.string().regex(ID, 'function id: letters, digits, ".", "_", ":", "-" (at most 128)'),
  name: z.string().max(256).optional(),
  description: z.string().max(4096).optional(),
  // Left out: push when an endpointUrl is given (the engine calls it), else pull.
  mode: z.enum(['push', 'pull']).optional(),
  endpointUrl: z.string().url().refine((u) => /^https?:\/\//i.test(u), 'must be an http:// or https:// URL').optional(),
  // An empty expression or cron was taken for none: refused, leave the key out instead.
  triggers: z
    .array(
      z
        .object({
          event: z.string().min(1).max(256).optional(),
          expression: z.string().min(1, 'empty (leave expression out for no filter)').optional(),
          cron: z.string().min(1, 'empty (leave cron out for an event trigger)').optional(),
        })
        .strict(),
    )
    .default([]),
  // Integer ranges are the protobuf fields' (int32), so REST registration accepts exactly what Connect does.
  retry: z
    .object({
      maxAttempts: z.number().int().min(1).max(100).optional(),
      initialDelayMs: z.number().int().min(0).max(INT32_MAX).optional(),
      backoffFactor: z.number().min(1).finite().optional(),
      maxDelayMs: z.number().int().min(0).max(INT32_MAX).optional(),
    })
    .strict()
    .superRefine(refuseInitialDelayAboveCap)
    .optional(),
  timeoutMs: z.number().int().positive().max(INT32_MAX).optional(),
  // A limit of 0 was read as "no limit" (and its key ignored): refused, leave `concurrency` out instead.
  concurrency: z.object({ limit: z.number().int().min(1, 'at least 1 (leave concurrency out for no limit)').max(INT32_MAX), key: dataPath.optional() }).strict().optional(),
  // An unknown key (a timeout this engine does not act on) is refused, not dropped.
  cancelOn: z.array(z.object({ event: z.string().min(1).max(256), match: dataPath.optional(), if: z.string().min(1).max(4096).optional() }).strict()).default([]),
  debounce: z
    .object({
      periodMs: z.number().int().min(1000, 'at least 1000 ms (the debounce period floor)'),
      key: dataPath.optional(),
      maxWaitMs: z.number().int().positive().optional(),
    })
    .strict()
    .refine((d) => d.maxWaitMs === undefined || d.maxWaitMs >= d.periodMs, { message: 'maxWaitMs must be at least periodMs', path: ['maxWaitMs'] })
    .optional(),
  metadata: z.record(z.unknown()).optional(),
  secrets: z.array(z.string()).max(MAX_FUNCTION_SECRETS).default([]),
  recording: z.boolean().nullish(),
  recordingProfile: z.enum(['none', 'run_lifecycle', 'all']).optional(),
  // Refused by name in `refuseUnsupportedOptions` before the schema runs; listed so they are not "unknown".
  actorKey: z.unknown(),
  recordingRetention: z.unknown(),
  changeReason: z.unknown(),
})
  // Every object is strict: a key this engine does not know (a misspelling, another SDK's option)
  // is refused by name, never stored and ignored.
  .strict();

/** `preferredMode` (the SDK's name, Connect's `preferred_mode`) as REST may send it: `push`/`pull` or the enum names. */
const PREFERRED_MODES: Record<string, 'push' | 'pull'> = { push: 'push', pull: 'pull', EXECUTION_MODE_PUSH: 'push', EXECUTION_MODE_PULL: 'pull' };

/**
 * `preferredMode` is another name of `mode` (FUNCTION_OPTIONS "preferredMode / mode"): taken as
 * `mode`; an unknown value, or one that contradicts `mode`, is `VALIDATION_ERROR`.
 */
function withModeAlias(input: RegisterFunctionInput): RegisterFunctionInput {
  if (!('preferredMode' in input)) return input;
  const { preferredMode, ...rest } = input as RegisterFunctionInput & { preferredMode?: unknown };
  if (preferredMode === undefined) return rest;
  const mode = typeof preferredMode === 'string' ? PREFERRED_MODES[preferredMode] : undefined;
  if (!mode) throw new EngineError('VALIDATION_ERROR', `preferredMode: "push" or "pull", not ${JSON.stringify(preferredMode)}`);
  if (rest.mode !== undefined && rest.mode !== mode) throw new EngineError('VALIDATION_ERROR', `preferredMode ${JSON.stringify(preferredMode)} contradicts mode ${JSON.stringify(rest.mode)}`);
  return { ...rest, mode };
}

/**
 * The function's mode: the one given, else `push` when it has an `endpointUrl` (a registration
 * that names an endpoint but no mode was stored as pull, and its runs waited for workers that
 * never came). A push function without an endpoint, and a pull function with one (which nothing
 * would call), are `VALIDATION_ERROR`.
 */
function modeOf(d: { mode?: 'push' | 'pull'; endpointUrl?: string }): 'push' | 'pull' {
  const mode = d.mode ?? (d.endpointUrl ? 'push' : 'pull');
  if (mode === 'push' && !d.endpointUrl) throw new EngineError('VALIDATION_ERROR', 'endpointUrl: a push function needs the URL the engine calls');
  if (mode === 'pull' && d.endpointUrl) {
    throw new EngineError('VALIDATION_ERROR', 'endpointUrl: a pull function has no endpoint (its workers poll the engine); register it with mode "push" to be called there, or leave endpointUrl out');
  }
  return mode;
}

/**
 * The schema's issues as one message: unknown keys named with their full path (`retry.maxAttemps`),
 * the others as `path: message`.
 */
function describeIssues(issues: readonly z.ZodIssue[]): string {
  const unknown = issues.flatMap((i) => (i.code === 'unrecognized_keys' ? i.keys.map((k) => [...i.path, k].join('.')) : []));
  const other = issues.filter((i) => i.code !== 'unrecognized_keys').map((i) => `${i.path.join('.') || 'function'}: ${i.message}`);
  return [...(unknown.length > 0 ? [`unknown field(s), not options of this engine: ${unknown.join(', ')}`] : []), ...other].join('; ');
}

/**
 * Registers and reads functions. `register` validates the definition (throws `VALIDATION_ERROR`
 * listing the bad paths; integers within the protobuf `int32` range as over Connect; no U+0000 in
 * any string; a push function needs `endpointUrl`, which the push allow-list must admit, a pull
 * function has none, and a mode left out is push with an endpoint, else pull; trigger
 * event names are trimmed as at emit, a blank one refused; a trigger's cron schedule and CEL
 * expression must compile, and neither may be empty; `retry.initialDelayMs` may not be above
 * `retry.maxDelayMs` (defaults included); `concurrency.key`, `debounce.key` and `cancelOn[].match`
 * are paths with no empty name and never empty (`dataPathProblem`); debounce needs `periodMs` ≥ 1000 and `maxWaitMs` ≥ `periodMs`;
 * declared `secrets` need valid names and a secrets key, else `SECRETS_NOT_CONFIGURED`; an option
 * the engine does not act on yet is refused by name, and so is any key it does not know, at any
 * depth: `unknown field(s), not options of this engine: retry.maxAttemps`), keeps the function's cron schedule in the
 * same unit of work, stores the recording profile (`recording`/`recordingProfile`, see
 * `RecordingProfile`; this node's recorder forgets its cached profile at once), fills defaults
 * (retry 3 attempts,
 * 1 s, ×2, cap 300 s; timeout 600 s) and bumps the version when the definition changed.
 */
export class FunctionRegistry {
  constructor(
    private readonly r: EngineResources,
    private readonly secrets: SecretSystem,
    private readonly pushEndpoints: PushEndpointPolicy,
  ) {}

  async register(scope: CallScope, input: RegisterFunctionInput): Promise<{ record: FunctionRecord; created: boolean }> {
    refuseNulAnywhere('function', input);
    refuseUnsupportedOptions(input);
    const parsed = definitionSchema.safeParse(withModeAlias(input));
    if (!parsed.success) throw new EngineError('VALIDATION_ERROR', describeIssues(parsed.error.issues));
    const d = parsed.data;
    const mode = modeOf(d);
    checkTriggers(d.triggers);
    checkCancelOnConditions(d.cancelOn);
    if (d.endpointUrl) await this.pushEndpoints.checkRegistration(d.endpointUrl);
    const secrets = [...new Set(d.secrets.map((name, i) => checkSecretName(name, `secrets.${i}`)))];
    if (secrets.length > 0 && !this.secrets.configured) {
      throw new EngineError('SECRETS_NOT_CONFIGURED', 'secrets: this server has no IRONFLOW_SECRETS_KEY, so it cannot deliver secrets');
    }
    const definition: FunctionDefinition = {
      id: d.id,
      name: d.name ?? d.id,
      ...(d.description ? { description: d.description } : {}),
      mode,
      ...(d.endpointUrl ? { endpointUrl: d.endpointUrl } : {}),
      // Event names are trimmed here as at emit, so `"x.go "` fires on `x.go` (never a silent mismatch).
      triggers: d.triggers.map((t, i) => (t.event === undefined ? t : { ...t, event: checkName(`triggers.${i}.event`, t.event, 256) })),
      retry: { ...DEFAULT_RETRY, ...stripUndefined(d.retry ?? {}) },
      timeoutMs: d.timeoutMs ?? DEFAULT_FUNCTION_TIMEOUT_MS,
      ...(d.concurrency ? { concurrency: d.concurrency } : {}),
      cancelOn: d.cancelOn,
      ...(d.debounce ? { debounce: stripUndefined(d.debounce) as FunctionDefinition['debounce'] } : {}),
      ...(d.metadata ? { metadata: d.metadata } : {}),
      ...(secrets.length > 0 ? { secrets } : {}),
      ...recordingOf(d),
    };
    const crons = cronTriggersOf(definition);
    const result = await this.r.store.unitOfWork('registerFunction', async (tx) => {
      const registered = await functionsSql.upsertFunction(tx, scope.project, scope.env, definition);
      const nextAt = crons.length > 0 ? nextTick(crons, tx.now) : null;
      await cronSql.syncSchedule(tx, scope.project, scope.env, definition.id, nextAt !== null ? { spec: cronSpecOf(crons), nextAt } : null);
      return registered;
    });
    this.r.audit.forgetRecording(scope.project, scope.env, definition.id);
    return result;
  }

  async list(scope: CallScope): Promise<FunctionRecord[]> {
    return this.r.store.read('listFunctions', (tx) => functionsSql.listFunctions(tx, scope.project, scope.env));
  }
}

/**
 * The stored recording profile: `recordingProfile` when given, else the SDK's `recording`
 * (`true` → `all`, `false` → `none`); nothing stored when neither is, which means the default.
 */
function recordingOf(d: { recording?: boolean | null; recordingProfile?: RecordingProfile }): { recordingProfile?: RecordingProfile } {
  if (d.recordingProfile) return { recordingProfile: d.recordingProfile };
  if (d.recording === true) return { recordingProfile: 'all' };
  if (d.recording === false) return { recordingProfile: 'none' };
  return {};
}

/**
 * Each trigger is an event trigger (`event`, optionally filtered by a CEL `expression`) or a cron
 * trigger (`cron`, optionally naming its runs' `event`). Throws one `VALIDATION_ERROR` naming every
 * bad trigger: neither `event` nor `cron`, an `expression` on a cron trigger, a cron schedule or an
 * expression that does not compile.
 */
function checkTriggers(triggers: { event?: string; expression?: string; cron?: string }[]): void {
  const problems: string[] = [];
  triggers.forEach((t, i) => {
    if (!t.event && !t.cron) problems.push(`triggers.${i}: a trigger needs an event or a cron schedule`);
    if (t.cron) {
      if (t.expression) problems.push(`triggers.${i}.expression: filters events; a cron trigger has none to filter`);
      try {
        parseCronTrigger(t);
      } catch (err) {
        problems.push(`triggers.${i}.cron: ${(err as Error).message}`);
      }
    } else if (t.expression) {
      try {
        TriggerExpressions.compile(t.expression);
      } catch (err) {
        problems.push(`triggers.${i}.expression: ${(err as Error).message}`);
      }
    }
  });
  if (problems.length > 0) throw new EngineError('VALIDATION_ERROR', problems.join('; '));
}

/** Each `cancelOn[].if` must compile as a CEL bool over `event` and `async`; throws one `VALIDATION_ERROR` naming every one that does not. */
function checkCancelOnConditions(specs: { if?: string }[]): void {
  const problems: string[] = [];
  specs.forEach((spec, i) => {
    if (spec.if === undefined) return;
    try {
      cancelOnConditions.compile(spec.if);
    } catch (err) {
      problems.push(`cancelOn.${i}.if: ${(err as Error).message}`);
    }
  });
  if (problems.length > 0) throw new EngineError('VALIDATION_ERROR', problems.join('; '));
}

function stripUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}
