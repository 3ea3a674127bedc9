/**
 * The alert rules (`deploy/prometheus/rules.yml`) and the Grafana dashboard against promtool
 * (Prometheus 2.42, Debian's package) and against the metrics the services really export.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import { EngineMetrics } from '@ironflow/observability';
import { repoRoot } from '../support/helm';
import { promtool } from '../support/promtool';

const RULES = 'deploy/prometheus/rules.yml';
const DASHBOARD = 'deploy/grafana/ironflow-dashboard.json';

interface AlertRule {
  alert: string;
  expr: string;
  for?: string;
  labels: { severity: string };
  annotations: Record<string, string>;
}

const alertRules = (): AlertRule[] => parse(readFileSync(join(repoRoot, RULES), 'utf8')).groups.flatMap((g: { rules: AlertRule[] }) => g.rules);

interface Dashboard {
  panels: { title: string; targets?: { expr: string }[] }[];
  templating: { list: { name: string; type: string; query?: { query: string } | string; includeAll?: boolean; allValue?: string }[] };
}

const dashboard = (): Dashboard => JSON.parse(readFileSync(join(repoRoot, DASHBOARD), 'utf8'));

const dashboardQueries = (): string[] => dashboard().panels.flatMap((p) => (p.targets ?? []).map((t) => t.expr));

/** The dashboard's installation variable: its `label_values(…)` query. */
const clusterVariable = () => dashboard().templating.list.find((v) => v.name === 'cluster_id');

/** Every metric family the services can export (the backlog gauges come with the capacity scanner). */
async function exportedMetricNames(): Promise<Set<string>> {
  const metrics = new EngineMetrics();
  metrics.exportBacklog(async () => ({ queued: [], activeWorkers: 0, now: 0 }));
  return new Set((await metrics.registry.getMetricsAsJSON()).map((m) => m.name));
}

/** The `ironflow_*` metric families a PromQL expression reads (histogram series map to their family). */
function metricsIn(expr: string): string[] {
  return [...new Set([...expr.matchAll(/\bironflow_[a-z0-9_]+/g)].map((m) => m[0].replace(/_(bucket|count|sum)$/, '')))];
}

describe('Prometheus alert rules', () => {
  it('promtool check rules accepts deploy/prometheus/rules.yml', async () => {
    expect(await promtool(['check', 'rules', RULES])).toMatch(/SUCCESS: 7 rules found/);
  });

  it('promtool test rules passes every case of deploy/prometheus/rules.test.yml', async () => {
    expect(await promtool(['test', 'rules', 'deploy/prometheus/rules.test.yml'])).toMatch(/SUCCESS/);
  });

  it('alerts on outcome commit errors, lost RESULTS frames, dead letters, recovery exhaustion, audit loss, a lease recovery spike and backlog age', () => {
    const rules = new Map(alertRules().map((r) => [r.alert, r]));
    expect([...rules.keys()].sort()).toEqual([
      'IronflowAuditRowsLost',
      'IronflowBacklogAge',
      'IronflowDeadLetters',
      'IronflowLeaseRecoveriesSpike',
      'IronflowOutcomeCommitErrors',
      'IronflowRecoveryExhausted',
      'IronflowResultFramesLost',
    ]);
    expect(metricsIn(rules.get('IronflowOutcomeCommitErrors')!.expr)).toEqual(['ironflow_outcome_commit_errors_total']);
    expect(metricsIn(rules.get('IronflowResultFramesLost')!.expr)).toEqual(['ironflow_run_result_publish_failures_total']);
    expect(metricsIn(rules.get('IronflowDeadLetters')!.expr)).toEqual(['ironflow_run_event_publish_failures_total']);
    expect(rules.get('IronflowRecoveryExhausted')!.expr).toContain('ironflow_lease_recoveries_total{effect="exhausted"}');
    // The specification's audit-loss expression, which also catches a label set's first burst, per
    // installation (cluster_id, like every alert).
    expect(rules.get('IronflowAuditRowsLost')!.expr.replace(/\s+/g, ' ').trim()).toBe(
      'sum by (cluster_id, event_type) (increase(ironflow_audit_write_failures_total[5m])) > 0 or ' +
        'sum by (cluster_id, event_type) (ironflow_audit_write_failures_total unless ironflow_audit_write_failures_total offset 5m) > 0',
    );
    for (const rule of rules.values()) expect([rule.alert, rule.expr.replace(/\s+/g, ' ')]).toEqual([rule.alert, expect.stringMatching(/^(sum|max) by \(cluster_id\b/)]);
    expect(rules.get('IronflowLeaseRecoveriesSpike')!.expr).toContain('ironflow_lease_recoveries_total{effect="requeued"}');
    expect(metricsIn(rules.get('IronflowBacklogAge')!.expr)).toEqual(['ironflow_oldest_queued_run_age_seconds']);
    for (const rule of rules.values()) {
      expect([rule.alert, ['warning', 'critical'].includes(rule.labels.severity)]).toEqual([rule.alert, true]);
      expect(Object.keys(rule.annotations).sort()).toEqual(['description', 'runbook', 'summary']);
    }
  });

  it('every metric an alert or a dashboard query names is one the services export', async () => {
    const exported = await exportedMetricNames();
    const variable = clusterVariable()?.query;
    const named = [...alertRules().map((r) => r.expr), ...dashboardQueries(), typeof variable === 'object' ? variable.query : ''].flatMap(metricsIn);
    expect(named.length).toBeGreaterThan(20);
    expect(named.filter((name) => !exported.has(name))).toEqual([]);
    // The check itself can fail: a made-up name is caught.
    expect(metricsIn('rate(ironflow_no_such_metric_total[5m])').filter((name) => !exported.has(name))).toEqual(['ironflow_no_such_metric_total']);
  });

  it('every Grafana dashboard query is valid PromQL (promtool parses each as a recording rule)', async () => {
    const queries = dashboardQueries();
    expect(queries.length).toBeGreaterThanOrEqual(20);
    const dir = mkdtempSync(join(tmpdir(), 'ironflow-dashboard-'));
    try {
      const file = join(dir, 'dashboard-queries.yml');
      writeFileSync(file, stringify({ groups: [{ name: 'dashboard', rules: queries.map((expr, i) => ({ record: `dashboard:query_${i}`, expr })) }] }));
      expect(await promtool(['check', 'rules', file])).toMatch(new RegExp(`SUCCESS: ${queries.length} rules found`));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('the dashboard shows one installation: a cluster_id variable, and every series of every query filtered by it', () => {
    expect(clusterVariable()).toMatchObject({
      type: 'query',
      query: { query: 'label_values(ironflow_run_outcomes_total, cluster_id)' },
      includeAll: true,
      // All: every installation, and series without the label (a scrape config that does not add it).
      allValue: '.*',
    });
    const selectors = dashboardQueries().flatMap((expr) => [...expr.matchAll(/\b(ironflow_[a-z0-9_]+|ALERTS)\b(\{[^}]*\})?/g)].map((m) => m[0]));
    expect(selectors.length).toBeGreaterThanOrEqual(27);
    expect(selectors.filter((selector) => !selector.includes('{cluster_id=~"$cluster_id"'))).toEqual([]);
  });

  it('with an installation chosen a panel counts only its series; with All, every installation\'s (promtool evaluates the queries)', async () => {
    const query = (title: string): string => dashboard().panels.find((p) => p.title === title)!.targets![0].expr;
    const chosen = (expr: string, value: string): string => expr.replaceAll('$cluster_id', value);
    const streams = query('Open worker streams');
    const queued = query('Queued runs');
    const dir = mkdtempSync(join(tmpdir(), 'ironflow-dashboard-'));
    try {
      const file = join(dir, 'dashboard.test.yml');
      const sample = (value: number) => [{ labels: '{}', value }];
      writeFileSync(file, stringify({
        rule_files: [],
        evaluation_interval: '1m',
        tests: [{
          interval: '1m',
          input_series: [
            { series: 'ironflow_stream_connections{cluster_id="prod", instance="dispatcher-1"}', values: '2x5' },
            { series: 'ironflow_stream_connections{cluster_id="prod", instance="dispatcher-2"}', values: '3x5' },
            { series: 'ironflow_stream_connections{cluster_id="staging", instance="dispatcher-1"}', values: '7x5' },
            { series: 'ironflow_queued_runs{cluster_id="prod", mode="pull", instance="scanner-1"}', values: '4x5' },
            { series: 'ironflow_queued_runs{cluster_id="staging", mode="pull", instance="scanner-1"}', values: '10x5' },
          ],
          promql_expr_test: [
            { expr: chosen(streams, 'prod'), eval_time: '2m', exp_samples: sample(5) },
            { expr: chosen(streams, 'staging'), eval_time: '2m', exp_samples: sample(7) },
            { expr: chosen(streams, '.*'), eval_time: '2m', exp_samples: sample(12) },
            { expr: chosen(queued, 'prod'), eval_time: '2m', exp_samples: sample(4) },
            { expr: chosen(queued, 'staging'), eval_time: '2m', exp_samples: sample(10) },
          ],
        }],
      }));
      expect(await promtool(['test', 'rules', file])).toMatch(/SUCCESS/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('README "Alerts" explains every alert', () => {
    const readme = readFileSync(join(repoRoot, 'README.md'), 'utf8');
    expect(readme.indexOf('### Alerts')).toBeGreaterThan(0);
    const section = readme.slice(readme.indexOf('### Alerts'));
    for (const rule of alertRules()) expect([rule.alert, section.includes(`\`${rule.alert}\``)]).toEqual([rule.alert, true]);
  });
});
