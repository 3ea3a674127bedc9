import { Bus, Subscription, subjects } from '@ironflow/bus';

/** How long a scope's RESULTS subscription outlives its last waiter (ms): sequential calls reuse it. */
const LINGER_MS = 30_000;

interface ScopeSubscription {
  sub: Subscription;
  /** Run id → the callers waiting for its frame. */
  byRun: Map<string, Set<(frame: unknown) => void>>;
  /** Callers still starting their runs: they see every frame's run id (their ids are not known yet). */
  starting: Set<(runId: string, frame: unknown) => void>;
  users: number;
  linger?: NodeJS.Timeout;
}

/** One sync call's interest in RESULTS frames (see {@link ResultWaiters.listen}). */
export interface ResultListener {
  /** The call's runs are known: from now on only their frames nudge it (also at once for each frame seen while starting). */
  watch(runIds: string[]): void;
  /** The call answered: it hears no more frames. */
  close(): void;
}

/**
 * The RESULTS frames that sync calls (TriggerSync, InvokeFunctionSync) wait for, through one
 * subscription per project and env in this process, with a map from run id to its waiting calls:
 * a frame costs one decode and one map lookup, whatever the number of calls in flight (issue 11).
 * The subscription lives while calls use it and {@link LINGER_MS} after the last one. Frames are
 * hints only: the calls also read the store (`syncPollMs`), so a frame lost here costs latency.
 */
export class ResultWaiters {
  private readonly scopes = new Map<string, ScopeSubscription>();

  constructor(private readonly bus: Bus) {}

  /** Registers a call that is starting its runs in `project`/`env`; `nudge` runs with each frame (its data) of its runs. */
  listen(project: string, env: string, nudge: (frame: unknown) => void): ResultListener {
    const scope = this.acquire(project, env);
    const seen = new Map<string, unknown>();
    const onStarting = (runId: string, frame: unknown) => seen.set(runId, frame);
    scope.starting.add(onStarting);
    let watched: string[] = [];
    let closed = false;
    return {
      watch: (runIds) => {
        if (closed) return;
        scope.starting.delete(onStarting);
        watched = runIds;
        for (const id of runIds) {
          let set = scope.byRun.get(id);
          if (!set) scope.byRun.set(id, (set = new Set()));
          set.add(nudge);
        }
        for (const id of runIds) if (seen.has(id)) nudge(seen.get(id));
      },
      close: () => {
        if (closed) return;
        closed = true;
        scope.starting.delete(onStarting);
        for (const id of watched) {
          const set = scope.byRun.get(id);
          set?.delete(nudge);
          if (set?.size === 0) scope.byRun.delete(id);
        }
        this.release(project, env, scope);
      },
    };
  }

  /**
   * A RESULTS frame (`frame`: the run's result view, with `runId`) this process is about to publish
   * for `project`/`env`, after its outcome's commit: the calls waiting for it here hear it at once,
   * without its round trip through the NATS server (two socket writes on a sync call's path, issue
   * 11). The bus's copy follows; the calls it finds have answered or ignore it. Returns whether a
   * call heard it (one waits for its run, or is still starting its runs in that scope).
   */
  deliver(project: string, env: string, frame: { runId: string }): boolean {
    const scope = this.scopes.get(`${project}\u0000${env}`);
    return scope ? hear(scope, frame) : false;
  }

  /** Ends every subscription (the engine stops). */
  close(): void {
    for (const scope of this.scopes.values()) {
      clearTimeout(scope.linger);
      scope.sub.unsubscribe();
    }
    this.scopes.clear();
  }

  private acquire(project: string, env: string): ScopeSubscription {
    const key = `${project}\u0000${env}`;
    let scope = this.scopes.get(key);
    if (!scope) {
      const created: ScopeSubscription = { sub: undefined as unknown as Subscription, byRun: new Map(), starting: new Set(), users: 0 };
      created.sub = this.bus.subscribe(subjects.result(project, env, '*'), (message) => hear(created, message.data));
      this.scopes.set(key, (scope = created));
    }
    clearTimeout(scope.linger);
    scope.linger = undefined;
    scope.users += 1;
    return scope;
  }

  private release(project: string, env: string, scope: ScopeSubscription): void {
    scope.users -= 1;
    if (scope.users > 0) return;
    scope.linger = setTimeout(() => {
      if (scope.users > 0 || this.scopes.get(`${project}\u0000${env}`) !== scope) return;
      scope.sub.unsubscribe();
      this.scopes.delete(`${project}\u0000${env}`);
    }, LINGER_MS);
    scope.linger.unref?.();
  }
}

/** A frame reaches a scope's calls: every call still starting sees it, then the calls waiting for its run. Returns whether any call heard it. */
function hear(scope: ScopeSubscription, frame: unknown): boolean {
  const runId = (frame as { runId?: string } | null)?.runId;
  if (!runId) return false;
  for (const onStarting of scope.starting) onStarting(runId, frame);
  const waiting = scope.byRun.get(runId);
  if (waiting) for (const nudge of waiting) nudge(frame);
  return scope.starting.size > 0 || waiting !== undefined;
}
