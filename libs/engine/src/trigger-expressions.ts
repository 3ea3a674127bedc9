import { ParseResult } from '@marcbachmann/cel-js';
import { WireEvent } from '@ironflow/contracts';
import { FunctionRecord } from '@ironflow/store';
import { EngineMetrics } from '@ironflow/observability';
import { CelPrograms } from './cel-programs';

/**
 * CEL trigger expressions (WIRE-PROTOCOL.md 5.3 `triggers[].expression`), with
 * `@marcbachmann/cel-js`. The one variable is `event` ({id, name, data, timestamp, version}, as
 * the handler sees it); JSON numbers are CEL doubles, which compare with int literals
 * (`event.data.amount > 10`). An expression is compiled (parsed and type-checked) at registration
 * and once per process after that.
 */
export class TriggerExpressions {
  private static readonly programs = new CelPrograms(['event']);

  /**
   * Parses and type-checks `expression`; throws an `Error` saying why it cannot filter events
   * (a syntax error, an unknown variable, a result that is not a bool).
   */
  static compile(expression: string): ParseResult {
    return this.programs.compile(expression);
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
        return TriggerExpressions.programs.test(t.expression!, { event });
      } catch {
        this.metrics.triggerExpressionErrors.inc({ function_id: fn.definition.id });
        return false;
      }
    });
  }
}
