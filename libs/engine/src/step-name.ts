/** The user's step name from a step id `<runId>:<name>:<k>` (WIRE-PROTOCOL.md 1.2). */
export function stepNameOf(runId: string, stepId: string): string {
  const rest = stepId.startsWith(`${runId}:`) ? stepId.slice(runId.length + 1) : stepId;
  const cut = rest.lastIndexOf(':');
  return (cut > 0 ? rest.slice(0, cut) : rest).replace(/\\:/g, ':').replace(/\\\\/g, '\\');
}
