import { Dialect, Store, Tx, UnitOptions } from '@ironflow/store';

/** Which store calls a fault applies to: units of work and reads by name, and statements by SQL. */
export interface StoreFaultRule {
  /** A unit of work (`kind: 'unit'`) or a read (`kind: 'read'`) by its name. */
  unit?: (name: string, kind: 'unit' | 'read') => boolean;
  /** A statement by its SQL text and parameters (checked as it runs, inside its unit). */
  query?: (sql: string, params: readonly unknown[]) => boolean;
}

interface Armed {
  rule: StoreFaultRule;
  left: number;
}

/**
 * A fault hook around a real store, behind the same port (STYLE.md "fault-injection hooks live
 * behind ports"): calls matching a `fail` rule throw as a store error would (before the unit
 * starts, or at the matching statement, rolling its unit back); `afterCommit` runs a callback once a
 * matching unit has committed (to fail the reads that follow a commit). Everything else passes
 * through. Every failure is recorded in `failures`.
 */
export class FaultyStore implements Store {
  readonly failures: string[] = [];
  private fails: Armed[] = [];
  private commits: { match: (name: string) => boolean; then: () => unknown }[] = [];

  constructor(private readonly inner: Store) {}

  get dialect(): Dialect {
    return this.inner.dialect;
  }

  /** Fails the next `count` calls (default: all) that `rule` matches. Returns what removes this rule alone. */
  fail(rule: StoreFaultRule, count = Number.POSITIVE_INFINITY): () => void {
    const armed = { rule, left: count };
    this.fails.push(armed);
    return () => {
      this.fails = this.fails.filter((f) => f !== armed);
    };
  }

  /**
   * Calls `then` once, right after the next unit of work whose name `match` accepts commits; the
   * unit returns to its caller once what `then` returns settled (a promise holds the caller there).
   */
  afterCommit(match: (name: string) => boolean, then: () => unknown): void {
    this.commits.push({ match, then });
  }

  /** Removes every fail rule. */
  heal(): void {
    this.fails = [];
  }

  async unitOfWork<T>(name: string, work: (tx: Tx) => Promise<T>, options?: UnitOptions): Promise<T> {
    this.enter(name, 'unit');
    const result = await this.inner.unitOfWork(name, (tx) => work(this.faulty(tx, name)), options);
    const due = this.commits.filter((c) => c.match(name));
    this.commits = this.commits.filter((c) => !due.includes(c));
    for (const c of due) await c.then();
    return result;
  }

  async read<T>(name: string, work: (tx: Tx) => Promise<T>): Promise<T> {
    this.enter(name, 'read');
    return this.inner.read(name, (tx) => work(this.faulty(tx, name)));
  }

  close(): Promise<void> {
    return this.inner.close();
  }

  private enter(name: string, kind: 'unit' | 'read'): void {
    if (this.take((rule) => !!rule.unit?.(name, kind) && !rule.query)) throw this.failure(`${kind} ${name}`);
  }

  private faulty(tx: Tx, name: string): Tx {
    const check = (sql: string, params: readonly unknown[] = []) => {
      if (this.take((rule) => !!rule.query?.(sql, params) && (!rule.unit || rule.unit(name, 'unit') || rule.unit(name, 'read')))) {
        throw this.failure(`statement in ${name}: ${sql.replace(/\s+/g, ' ').slice(0, 80)}`);
      }
    };
    return {
      dialect: tx.dialect,
      now: tx.now,
      forUpdate: tx.forUpdate,
      forUpdateSkipLocked: tx.forUpdateSkipLocked,
      setLockTimeout: (ms) => tx.setLockTimeout(ms),
      query: async (sql, params) => {
        check(sql, params);
        return tx.query(sql, params);
      },
      execute: async (sql, params) => {
        check(sql, params);
        return tx.execute(sql, params);
      },
      queryTogether: async (statements) => {
        for (const { sql, params } of statements) check(sql, params);
        return tx.queryTogether(statements);
      },
    };
  }

  private take(matches: (rule: StoreFaultRule) => boolean): boolean {
    const armed = this.fails.find((f) => f.left > 0 && matches(f.rule));
    if (!armed) return false;
    armed.left -= 1;
    return true;
  }

  private failure(what: string): Error {
    this.failures.push(what);
    return new Error(`fault hook: ${what} failed`);
  }
}
