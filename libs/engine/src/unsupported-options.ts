import { EngineError, RegisterFunctionInput } from '@ironflow/contracts';

/**
 * "Refuse what you do not act on": the registration options and trigger fields the Ironflow SDK
 * can send that this engine does not implement yet. Each one found is named in one
 * `VALIDATION_ERROR`, so a user never registers an option that is stored and silently ignored.
 * An option leaves this list in the change that makes the engine act on it.
 */
export function refuseUnsupportedOptions(input: RegisterFunctionInput): void {
  const refused: string[] = [];
  if ((input.cancelOn ?? []).length > 0) refused.push('cancelOn (cancel on event)');
  // Sticky routing would pin an actor's runs to one worker; pull and stream workers claim any
  // queued run of their functions, and the Ironflow SDK's workers ignore `actor_id`, so nothing
  // here could keep that promise.
  if (input.actorKey) refused.push('actorKey (sticky routing: workers claim any queued run)');
  if (input.recordingRetention) refused.push('recordingRetention');
  if (input.changeReason) refused.push('changeReason (function history)');
  if (refused.length > 0) {
    throw new EngineError('VALIDATION_ERROR', `not supported by this engine yet: ${refused.join(', ')}`, { unsupported: refused });
  }
}
