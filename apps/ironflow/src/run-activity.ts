import { Bus, Subscription, subjects } from '@ironflow/bus';
import { CallScope, ClientApi, RunView, isTerminalRunStatus } from '@ironflow/contracts';

/** Where the env stands among a run event subject's tokens (`public.{env}.system.run.{id}.{event}`). */
const ENV_TOKEN = subjects.runEvent('\u0000', '*', '*').split('.').indexOf('\u0000');

/**
 * The activity lines of `ironflow dev`: one line per run outcome, so a developer sees what runs.
 * Listens to the run events (`public.{env}.system.run.{id}.{status}`, best effort) off the
 * engine's path and, as the specification tells consumers to, reads the run for its details:
 *
 *     run <id> <function> completed in <ms> ms
 *     run <id> <function> failed <CODE>: <message>
 *     run <id> <function> cancelled <CODE>: <reason>
 *
 * Runs are read in project `default` (the dev server's); when the read fails the line is printed
 * from the event alone. Returns the subscription (unsubscribe to stop).
 */
export function printRunOutcomes(bus: Bus, api: Pick<ClientApi, 'getRun'>, out: (line: string) => void): Subscription {
  return bus.subscribe(subjects.runEvent('*', '*', '*'), (message) => {
    const event = message.data as { runId?: string; functionId?: string; status?: string } | null;
    if (!event?.runId || !event.status || !isTerminalRunStatus(event.status)) return;
    const scope: CallScope = { project: 'default', env: message.subject.split('.')[ENV_TOKEN] ?? 'default' };
    api.getRun(scope, event.runId).then(
      (run) => out(outcomeLine(run)),
      () => out(`run ${event.runId} ${event.functionId ?? ''} ${event.status}`),
    );
  });
}

/** The one line of a run's outcome (see {@link printRunOutcomes}). */
export function outcomeLine(run: RunView): string {
  const head = `run ${run.id} ${run.functionId}`;
  switch (run.status) {
    case 'completed': {
      const ms = run.endedAt ? Date.parse(run.endedAt) - Date.parse(run.startedAt ?? run.createdAt) : undefined;
      return `${head} completed${ms !== undefined ? ` in ${ms} ms` : ''}`;
    }
    case 'failed':
      return `${head} failed ${run.error?.code ?? 'ERROR'}: ${oneLine(run.error?.message ?? 'no message')}`;
    case 'cancelled':
      return run.error ? `${head} cancelled ${run.error.code ?? 'CANCELLED'}: ${oneLine(run.error.message)}` : `${head} cancelled`;
    default:
      return `${head} ${run.status}`;
  }
}

/** A message on one line, at most 200 characters. */
function oneLine(text: string): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > 200 ? `${flat.slice(0, 199)}…` : flat;
}
