import { FunctionRecord } from '@ironflow/store';

/** How many event names (per project and env) the cache keeps; past it the oldest is dropped. */
const ENTRIES = 1000;

/**
 * The active functions whose triggers named an event, as a trigger of this process last read them
 * (issue 11): a later trigger of that name builds its one-statement write from them
 * (`triggerSql.insertTriggerAtOnce`), which checks them against the store in its own snapshot
 * (ids and versions) and writes nothing when they changed. So an entry may be stale, never wrong:
 * a stale one costs the general trigger once, which reads the functions again and replaces it.
 */
export class EventFunctionsCache {
  private readonly entries = new Map<string, FunctionRecord[]>();

  /** The functions last read for `name` in `project`/`env`, or undefined when none were read. */
  get(project: string, env: string, name: string): FunctionRecord[] | undefined {
    return this.entries.get(keyOf(project, env, name));
  }

  /** Records what a trigger read for `name` (the active functions whose triggers name it). */
  set(project: string, env: string, name: string, functions: FunctionRecord[]): void {
    const key = keyOf(project, env, name);
    this.entries.delete(key);
    this.entries.set(key, functions);
    if (this.entries.size > ENTRIES) this.entries.delete(this.entries.keys().next().value!);
  }
}

function keyOf(project: string, env: string, name: string): string {
  return `${project}\u0000${env}\u0000${name}`;
}
