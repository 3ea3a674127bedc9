import * as http2 from 'node:http2';
import { randomUUID } from 'node:crypto';
import { STORES, TestServer, startTestServer, waitFor } from '@ironflow/testing';

/** One sample's value from Prometheus text, or undefined when the series is absent. */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

async function scrape(url: string): Promise<string> {
  const res = await fetch(`${url}/metrics`);
  expect(res.status).toBe(200);
  return res.text();
}

/** A Connect unary JSON call over h2c (the HTTP/2 side of the one port). */
function http2Call(url: string, path: string, body: unknown): Promise<number> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(url);
    session.on('error', reject);
    const req = session.request({ ':method': 'POST', ':path': path, 'content-type': 'application/json' });
    req.on('response', (headers) => {
      req.resume();
      req.on('end', () => {
        session.close();
        resolve(Number(headers[':status']));
      });
    });
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

describe.each(STORES)('operational metrics on /metrics (%s)', (store) => {
  let t: TestServer;
  let url: string;

  beforeAll(async () => {
    t = await startTestServer(store, 'opsmetrics');
    url = t.server.url.replace('localhost', '127.0.0.1');
  });
  afterAll(async () => {
    await t?.close();
  });

  it('labelled counters whose label values are known are exported at zero before anything happened', async () => {
    const text = await scrape(url);
    for (const series of [
      'ironflow_run_outcomes_total{status="failed"}',
      'ironflow_run_event_publish_failures_total{event="completed"}',
      'ironflow_lease_recoveries_total{effect="exhausted"}',
      'ironflow_lease_recoveries_total{effect="requeued"}',
      'ironflow_outcome_commit_errors_total{unit="applyReport"}',
      'ironflow_outcome_commit_errors_total{unit="recoverLease"}',
      'ironflow_segments_dispatched_total{mode="pull"}',
      'ironflow_reports_rejected_total{code="STALE_EXECUTION"}',
      'ironflow_run_result_publish_failures_total',
      'ironflow_stream_connections',
    ]) {
      expect([series, sample(text, series)]).toEqual([series, 0]);
    }
  });

  it('HTTP requests are timed by route template or RPC path, method and status, never by raw URL', async () => {
    const runId = randomUUID();
    const probe = `/no-such-route-${randomUUID()}`;
    expect((await fetch(`${url}/api/v1/runs/${runId}`)).status).toBe(404);
    expect((await fetch(`${url}${probe}`)).status).toBe(404);
    const listed = await fetch(`${url}/ironflow.v1.IronflowService/ListFunctions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    expect(listed.status).toBe(200);
    expect(await http2Call(url, '/ironflow.v1.IronflowService/Health', {})).toBe(200);

    const text = await waitFor('the requests observed', async () => {
      const body = await scrape(url);
      return sample(body, 'ironflow_http_request_duration_seconds_count{route="/ironflow.v1.IronflowService/Health",method="POST",status="200"}') ? body : undefined;
    });
    expect(sample(text, 'ironflow_http_request_duration_seconds_count{route="/api/v1/runs/:id",method="GET",status="404"}')).toBe(1);
    expect(sample(text, 'ironflow_http_request_duration_seconds_count{route="/ironflow.v1.IronflowService/ListFunctions",method="POST",status="200"}')).toBe(1);
    expect(sample(text, 'ironflow_http_request_duration_seconds_count{route="unmatched",method="GET",status="404"}')).toBeGreaterThanOrEqual(1);
    expect(sample(text, 'ironflow_http_request_duration_seconds_bucket{le="+Inf",route="/api/v1/runs/:id",method="GET",status="404"}')).toBe(1);
    expect(text).not.toContain(runId);
    expect(text).not.toContain(probe);
  });

  it('the backlog gauges count queued runs by mode and age the oldest, and active workers count registered pull workers', async () => {
    const before = await scrape(url);
    expect(sample(before, 'ironflow_queued_runs{mode="pull"}')).toBe(0);
    expect(sample(before, 'ironflow_oldest_queued_run_age_seconds{mode="pull"}')).toBe(0);
    expect(sample(before, 'ironflow_queued_runs{mode="push"}')).toBe(0);

    const fnId = `backlog-${randomUUID().slice(0, 8)}`;
    const registered = await fetch(`${url}/api/v1/functions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ id: fnId, triggers: [{ event: `${fnId}.go` }], preferredMode: 'pull' }),
    });
    expect(registered.status).toBeLessThan(300);
    for (let i = 0; i < 3; i++) {
      const emitted = await fetch(`${url}/api/v1/events`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name: `${fnId}.go`, data: { i } }) });
      expect(emitted.status).toBeLessThan(300);
    }
    // No worker claims them: three pull runs wait, and the oldest one's age grows past zero.
    const queued = await waitFor('three queued pull runs, the oldest older than 0 s', async () => {
      const text = await scrape(url);
      return sample(text, 'ironflow_queued_runs{mode="pull"}') === 3 && (sample(text, 'ironflow_oldest_queued_run_age_seconds{mode="pull"}') ?? 0) > 0 ? text : undefined;
    });
    expect(sample(queued, 'ironflow_queued_runs{mode="push"}')).toBe(0);
    expect(sample(queued, 'ironflow_workers_active')).toBe(0);

    const worker = `worker-${randomUUID().slice(0, 8)}`;
    const reg = await fetch(`${url}/api/v1/workers/${worker}/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ worker_id: worker, hostname: 'metrics-test', function_ids: [fnId], max_concurrent_jobs: 1, labels: {} }),
    });
    expect(reg.status).toBeLessThan(300);
    await waitFor('one active worker', async () => sample(await scrape(url), 'ironflow_workers_active') === 1 || undefined);
  });
});
