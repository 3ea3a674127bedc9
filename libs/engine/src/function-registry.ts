import { z } from 'zod';
import {
  CallScope,
  DEFAULT_FUNCTION_TIMEOUT_MS,
  DEFAULT_RETRY,
  EngineError,
  FunctionDefinition,
  RegisterFunctionInput,
} from '@ironflow/contracts';
import { FunctionRecord, functionsSql } from '@ironflow/store';
import { EngineResources } from './resources';
import { refuseUnsupportedOptions } from './unsupported-options';
import { checkName, refuseNulAnywhere } from './payload-limits';

const ID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;
/** Largest value of a protobuf `int32` field (`timeout_ms`, `initial_delay_ms`, …). */
const INT32_MAX = 2_147_483_647;

const definitionSchema = z.object({
  id: z.string().regex(ID, 'function id: letters, digits, ".", "_", ":", "-" (at most 128)'),
  name: z.string().max(256).optional(),
  description: z.string().max(4096).optional(),
  mode: z.enum(['push', 'pull']).default('pull'),
  endpointUrl: z.string().url().refine((u) => /^https?:\/\//i.test(u), 'must be an http:// or https:// URL').optional(),
  triggers: z.array(z.object({ event: z.string().min(1).max(256).optional(), expression: z.string().optional(), cron: z.string().optional() })).default([]),
  // Integer ranges are the protobuf fields' (int32), so REST registration accepts exactly what Connect does.
  retry: z
    .object({
      maxAttempts: z.number().int().min(1).max(100).optional(),
      initialDelayMs: z.number().int().min(0).max(INT32_MAX).optional(),
      backoffFactor: z.number().min(1).finite().optional(),
      maxDelayMs: z.number().int().min(0).max(INT32_MAX).optional(),
    })
    .optional(),
  timeoutMs: z.number().int().positive().max(INT32_MAX).optional(),
  concurrency: z.object({ limit: z.number().int().min(0).max(INT32_MAX), key: z.string().optional() }).optional(),
  cancelOn: z.array(z.object({ event: z.string().min(1), match: z.string().optional() })).default([]),
  metadata: z.record(z.unknown()).optional(),
});

/**
 * Registers and reads functions. `register` validates the definition (throws `VALIDATION_ERROR`
 * listing the bad paths; integers within the protobuf `int32` range as over Connect; no U+0000 in
 * any string; a push function needs `endpointUrl`; an option the engine does not act
 * on yet is refused by name; trigger event names are trimmed as at emit, a blank one refused), fills defaults (retry 3 attempts,
 * 1 s, ×2, cap 300 s; timeout 600 s) and bumps the version when the definition changed.
 */
export class FunctionRegistry {
  constructor(private readonly r: EngineResources) {}

  async register(scope: CallScope, input: RegisterFunctionInput): Promise<{ record: FunctionRecord; created: boolean }> {
    refuseNulAnywhere('function', input);
    refuseUnsupportedOptions(input);
    const parsed = definitionSchema.safeParse(input);
    if (!parsed.success) {
      throw new EngineError('VALIDATION_ERROR', parsed.error.issues.map((i) => `${i.path.join('.') || 'function'}: ${i.message}`).join('; '));
    }
    const d = parsed.data;
    if (d.mode === 'push' && !d.endpointUrl) throw new EngineError('VALIDATION_ERROR', 'endpointUrl: a push function needs the URL the engine calls');
    const definition: FunctionDefinition = {
      id: d.id,
      name: d.name ?? d.id,
      ...(d.description ? { description: d.description } : {}),
      mode: d.mode,
      ...(d.endpointUrl ? { endpointUrl: d.endpointUrl } : {}),
      // Event names are trimmed here as at emit, so `"x.go "` fires on `x.go` (never a silent mismatch).
      triggers: d.triggers.map((t, i) => (t.event === undefined ? t : { ...t, event: checkName(`triggers.${i}.event`, t.event, 256) })),
      retry: { ...DEFAULT_RETRY, ...stripUndefined(d.retry ?? {}) },
      timeoutMs: d.timeoutMs ?? DEFAULT_FUNCTION_TIMEOUT_MS,
      ...(d.concurrency ? { concurrency: d.concurrency } : {}),
      cancelOn: d.cancelOn,
      ...(d.metadata ? { metadata: d.metadata } : {}),
    };
    return this.r.store.unitOfWork('registerFunction', (tx) => functionsSql.upsertFunction(tx, scope.project, scope.env, definition));
  }

  async list(scope: CallScope): Promise<FunctionRecord[]> {
    return this.r.store.read('listFunctions', (tx) => functionsSql.listFunctions(tx, scope.project, scope.env));
  }
}

function stripUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}
