import { Environment, ParseResult } from '@marcbachmann/cel-js';

/**
 * Compiled CEL programs over a fixed set of map variables, with `@marcbachmann/cel-js`: an
 * expression is parsed and type-checked once per process (the cache is bounded) and must yield a
 * bool. Shared by trigger expressions (`event`) and `cancelOn` conditions (`event`, `async`).
 */
export class CelPrograms {
  private readonly env = new Environment();
  private readonly compiled = new Map<string, ParseResult>();

  constructor(variables: string[]) {
    for (const name of variables) this.env.registerVariable(name, 'map');
  }

  /**
   * Parses and type-checks `expression`; throws an `Error` saying why it cannot be used (a syntax
   * error, an unknown variable, a result that is not a bool).
   */
  compile(expression: string): ParseResult {
    const cached = this.compiled.get(expression);
    if (cached) return cached;
    const checked = this.env.check(expression);
    if (!checked.valid) throw new Error(String(checked.error?.message ?? 'invalid expression').split('\n')[0]);
    if (checked.type !== 'bool' && checked.type !== 'dyn') throw new Error(`it evaluates to ${checked.type}, not bool`);
    const program = this.env.parse(expression);
    // Expressions come from registered functions, so the cache stays small; a bound keeps it so.
    if (this.compiled.size >= 1000) this.compiled.clear();
    this.compiled.set(expression, program);
    return program;
  }

  /** Evaluates `expression` over `variables`; throws unless it yields a bool. */
  test(expression: string, variables: Record<string, unknown>): boolean {
    const result: unknown = this.compile(expression)(variables);
    if (typeof result === 'boolean') return result;
    throw new Error(`expression yielded ${typeof result}, not a bool`);
  }
}
