/**
 * Deterministic step ids (WIRE-PROTOCOL.md 1.2): the memoization key shared with the engine.
 * A top-level step named `N`, used for the k-th time (k from 0) in this invocation, has the id
 * `<runId>:<esc(N)>:<k>`. Counters are per name and restart with every invocation.
 */

const LITERAL_PREFIXES = ['compensate:', 'publish:'];

/**
 * Escapes a step name for use inside a step id: `\` → `\\`, then `:` → `\:`. A leading
 * `compensate:` or `publish:` prefix stays literal and only the rest is escaped.
 * `escapeStepName("charge:card")` → `"charge\\:card"` (i.e. the text `charge\:card`).
 */
export function escapeStepName(name: string): string {
  for (const prefix of LITERAL_PREFIXES) {
    if (name.startsWith(prefix)) return prefix + escapePart(name.slice(prefix.length));
  }
  return escapePart(name);
}

function escapePart(part: string): string {
  return part.replace(/\\/g, '\\\\').replace(/:/g, '\\:');
}

/**
 * Hands out step ids for one invocation of one run, counting uses per name.
 * `isMemoized(id)` tells the allocator which ids the engine already holds, for the legacy bridge:
 * when a name needs escaping, the unescaped id `<runId>:<N>:<k>` is used if (and only if) it is
 * memoized and the escaped one is not.
 */
export class StepIdAllocator {
  private readonly counters = new Map<string, number>();

  constructor(
    private readonly runId: string,
    private readonly isMemoized: (id: string) => boolean = () => false,
  ) {}

  /** The id of the next use of `name`. Each call consumes one use. */
  next(name: string): string {
    const k = this.counters.get(name) ?? 0;
    this.counters.set(name, k + 1);
    const escaped = `${this.runId}:${escapeStepName(name)}:${k}`;
    const legacy = `${this.runId}:${name}:${k}`;
    if (legacy !== escaped && this.isMemoized(legacy) && !this.isMemoized(escaped)) return legacy;
    return escaped;
  }
}
