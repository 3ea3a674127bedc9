import { Environment, ParseResult } from '@marcbachmann/cel-js';
import { WireEvent } from '@ironflow/contracts';
import { FunctionRecord } from '@ironflow/store';
import { EngineMetrics } from '@ironflow/observability';

/**
 * CEL trigger expressions (WIRE-PROTOCOL.md 5.3 `triggers[].expression`), with
 * `@marcbachmann/cel-js`. The one variable is `event` ({id, name, data, timestamp, version}, as
 * the handler sees it); JSON numbers are CEL doubles, which compare with int literals
 * (`event.data.amount > 10`). An expression is compiled (parsed and type-checked) at registration
 * and once per process after that.
 */
export class TriggerExpressions {
  private static readonly env = new Environment().registerVariable('event', 'map');
  private static readonly compiled = new Map<string, ParseResult>();

  /**
   * Parses and type-checks `expression`; throws an `Error` saying why it cannot filter events
   * (a syntax error, an unknown variable, a result that is not a bool).
   */
  static compile(expression: string): ParseResult {
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

  constructor(private readonly metrics: EngineMetrics) {}

  /**
   * Whether `fn` starts a run for `event` (as its run's handler receives it): one of its event triggers naming the event has no
   * expression, or its expression yields `true`. An expression that fails at run time (a missing
   * key, a type mismatch) or yields something else than a bool does not match, and is counted in
   * `ironflow_trigger_expression_errors_total{function_id}`.
   */
  accepts(fn: FunctionRecord, event: WireEvent): boolean {
    const triggers = fn.definition.triggers.filter((t) => !t.cron && t.event === event.name);
    if (triggers.length === 0 || triggers.some((t) => !t.expression)) return true;
    return triggers.some((t) => {
      try {
        const result: unknown = TriggerExpressions.compile(t.expression!)({ event });
        if (typeof result === 'boolean') return result;
        throw new Error(`expression yielded ${typeof result}, not a bool`);
      } catch {
        this.metrics.triggerExpressionErrors.inc({ function_id: fn.definition.id });
        return false;
      }
    });
  }
}
