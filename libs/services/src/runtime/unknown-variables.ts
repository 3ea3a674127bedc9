import { closest, distance } from 'fastest-levenshtein';

/**
 * `IRONFLOW_*` variables that are not settings of the services but legitimately share their
 * environment, so a service does not refuse them: the SDK's and the CLI's client settings (README
 * "Every client command", "Security"), set in the same shell as `ironflow dev` or in a worker's
 * container next to a service's.
 */
export const CLIENT_VARIABLES: readonly string[] = ['IRONFLOW_SERVER_URL', 'IRONFLOW_API_KEY', 'IRONFLOW_ENV'];

/**
 * Prefixes and names of this repository's test and bench variables, which the test and bench
 * harnesses pass on to the service processes they start (`ServiceProcess` copies its environment):
 * `IRONFLOW_TEST_*` (the test store and NATS), `IRONFLOW_BENCH_*`, `IRONFLOW_NODE_ARGS_<APP>`
 * (node options of one service), `IRONFLOW_TRACE_DIR` (bench/compare/trace-preload.ts).
 */
export const TOOLING_PREFIXES: readonly string[] = ['IRONFLOW_TEST_', 'IRONFLOW_BENCH_', 'IRONFLOW_NODE_ARGS_'];
export const TOOLING_VARIABLES: readonly string[] = ['IRONFLOW_TRACE_DIR'];

/**
 * One message per `IRONFLOW_*` name of `names` that is neither one of `settings` (the names the
 * services read) nor a client or tooling variable above: a typo (`IRONFLOW_LEASE_MSS`) would
 * otherwise be ignored without a word and the default used. Each message names the variable and,
 * when a known name is within a few edits (at most half the part after `IRONFLOW_`, at
 * least 2), the closest one: `IRONFLOW_LEASE_MSS: not a setting (did you mean IRONFLOW_LEASE_MS?)`.
 * Names without the `IRONFLOW_` prefix are none of ours and never refused. Empty when all are known.
 */
export function unknownVariableIssues(names: Iterable<string>, settings: readonly string[]): string[] {
  const known = [...settings, ...CLIENT_VARIABLES, ...TOOLING_VARIABLES];
  const issues: string[] = [];
  for (const name of names) {
    if (!name.startsWith('IRONFLOW_') || known.includes(name) || TOOLING_PREFIXES.some((p) => name.startsWith(p))) continue;
    const guess = closest(name, known);
    const near = distance(name, guess) <= Math.max(2, Math.floor((name.length - 'IRONFLOW_'.length) / 2));
    issues.push(`${name}: not a setting${near ? ` (did you mean ${guess}?)` : ''}`);
  }
  return issues;
}
