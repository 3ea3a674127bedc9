import { EngineError, TriggerInput } from '@ironflow/contracts';
import { checkPayload } from './payload-limits';

/** Largest event `version` (the protobuf field is an `int32`). */
export const MAX_EVENT_VERSION = 2_147_483_647;

/**
 * An emitted event's `version` and `metadata` (WIRE-PROTOCOL.md 5.2, 6), checked before anything is
 * written: `version` is an integer 1..2147483647 (absent → 1); `metadata` is a JSON object (absent
 * or `null` → none) within the payload limits. Throws `VALIDATION_ERROR` or `PAYLOAD_TOO_LARGE`.
 */
export function eventFieldsOf(input: Pick<TriggerInput, 'version' | 'metadata'>, maxPayloadBytes: number): { version: number; metadata: Record<string, unknown> | null } {
  const version = input.version ?? 1;
  if (typeof version !== 'number' || !Number.isInteger(version) || version < 1 || version > MAX_EVENT_VERSION) {
    throw new EngineError('VALIDATION_ERROR', `version: an integer from 1 to ${MAX_EVENT_VERSION} (got ${JSON.stringify(input.version)})`);
  }
  const metadata = input.metadata ?? null;
  if (metadata !== null && (typeof metadata !== 'object' || Array.isArray(metadata))) {
    throw new EngineError('VALIDATION_ERROR', 'metadata: a JSON object');
  }
  if (metadata !== null) checkPayload('event metadata', metadata, maxPayloadBytes);
  return { version, metadata };
}
