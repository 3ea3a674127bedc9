import { EngineError, RegisterFunctionInput } from '@ironflow/contracts';

/**
 * "Refuse what you do not act on": the registration options and trigger fields the Ironflow SDK
 * can send that this engine does not implement yet. Each one found is named in one
 * `VALIDATION_ERROR`, so a user never registers an option that is stored and silently ignored.
 * An option leaves this list in the change that makes the engine act on it.
 */
export function refuseUnsupportedOptions(input: RegisterFunctionInput): void {
  const refused: string[] = [];
  (input.triggers ?? []).forEach((t, i) => {
    if (t?.cron) refused.push(`triggers.${i}.cron (cron triggers)`);
    if (t?.expression) refused.push(`triggers.${i}.expression (trigger expressions)`);
  });
  if ((input.cancelOn ?? []).length > 0) refused.push('cancelOn (cancel on event)');
  if (input.debounce !== undefined && input.debounce !== null) refused.push('debounce');
  if ((input.secrets ?? []).length > 0) refused.push('secrets');
  if (input.actorKey) refused.push('actorKey (sticky routing)');
  if (input.recording === true) refused.push('recording');
  if (input.recordingRetention) refused.push('recordingRetention');
  if (input.changeReason) refused.push('changeReason (function history)');
  if (refused.length > 0) {
    throw new EngineError('VALIDATION_ERROR', `not supported by this engine yet: ${refused.join(', ')}`, { unsupported: refused });
  }
}
