import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer, Server } from 'node:http';
import { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BrowserContext, Page, chromium } from 'playwright-core';
import { IronflowClient, NonRetryableError, createClient, createFunction, serve } from '@ironflow/sdk';
import { TestServer, startTestServer, waitFor } from '@ironflow/testing';

/** Debian's Chromium (`.ci/run` installs it); the UI is tested in a real headless browser. */
const CHROMIUM = process.env.IRONFLOW_TEST_CHROMIUM ?? '/usr/bin/chromium';
const FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];

/**
 * The runs UI (`libs/ui`) as a person uses it, in headless Chromium against a real engine (all
 * services, SQLite) and real push workers: the runs list and its filters, a completed run with
 * its steps, child run and timeline, a failed run's error, cancelling a waiting run from the UI,
 * the functions and events pages.
 */
describe('runs UI in a browser', () => {
  let engine: TestServer;
  let push: Server;
  let client: IronflowClient;
  let context: BrowserContext;
  let page: Page;
  let profile: string;
  const ids = { parent: '', child: '', failed: '', sleeping: '' };

  const child = createFunction({ id: 'ui.child', mode: 'push' }, async ({ event, step }) => step.run('double', async () => ({ doubled: (event.data as { n: number }).n * 2 })));
  const parent = createFunction({ id: 'ui.parent', mode: 'push', triggers: [{ event: 'ui.order' }] }, async ({ event, step }) => {
    const n = await step.run('prepare', async () => (event.data as { n: number }).n);
    const doubled = await step.invoke('ui.child', { n });
    return { n, doubled };
  });
  const failing = createFunction({ id: 'ui.failing', mode: 'push', triggers: [{ event: 'ui.charge' }] }, async () => {
    throw new NonRetryableError('card declined by the bank', { code: 'CARD_DECLINED' });
  });
  const sleeper = createFunction({ id: 'ui.sleeper', mode: 'push', triggers: [{ event: 'ui.nap' }] }, async ({ step }) => {
    await step.sleep('long-nap', '1h');
    return { woke: true };
  });

  beforeAll(async () => {
    if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: apt-get install -y chromium (.ci/run does), or set IRONFLOW_TEST_CHROMIUM`);
    engine = await startTestServer('sqlite', 'ironflow_ui');
    push = createServer(serve({ functions: [parent, child, failing, sleeper] }));
    await new Promise<void>((r) => push.listen(0, '127.0.0.1', r));
    const endpointUrl = `http://127.0.0.1:${(push.address() as AddressInfo).port}/`;
    client = createClient({ serverUrl: engine.server.url });
    for (const fn of [parent, child, failing, sleeper]) await client.registerFunction(fn, { endpointUrl });

    const done = await client.emitSync('ui.order', { n: 21 }, { timeoutMs: 20_000 });
    ids.parent = done.runId;
    ids.child = (await client.getRunSteps(ids.parent)).children[0].id;
    ids.failed = (await client.emit('ui.charge', { amount: 5 })).runIds[0];
    ids.sleeping = (await client.emit('ui.nap', {})).runIds[0];
    await waitFor('the failed and the sleeping run', async () => (await client.getRun(ids.failed)).status === 'failed' && (await client.getRun(ids.sleeping)).status === 'waiting', 20_000);

    profile = mkdtempSync(join(tmpdir(), 'ironflow-ui-chromium-'));
    context = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM, headless: true, args: FLAGS });
    page = context.pages()[0] ?? (await context.newPage());
    page.on('dialog', (dialog) => void dialog.accept());
  });

  afterAll(async () => {
    await context?.close();
    if (profile) rmSync(profile, { recursive: true, force: true });
    push?.closeAllConnections();
    await new Promise((r) => push?.close(r));
    await engine?.close();
  });

  const rowIds = async () => page.locator('[data-testid=runs-table] [data-testid=run-link]').evaluateAll((links) => links.map((a) => a.getAttribute('data-run-id')));

  it('lists the runs at / with their functions and statuses', async () => {
    await page.goto(`${engine.server.url}/`);
    await page.locator('[data-testid=runs-table]').waitFor();
    expect((await rowIds()).sort()).toEqual(Object.values(ids).sort());
    expect(await page.locator('[data-testid=runs-count]').textContent()).toBe('(4)');
    const statusOf = (id: string) => page.locator(`tr:has([data-run-id="${id}"]) [data-status]`).getAttribute('data-status');
    expect(await statusOf(ids.parent)).toBe('completed');
    expect(await statusOf(ids.failed)).toBe('failed');
    expect(await statusOf(ids.sleeping)).toBe('waiting');
  });

  it('pages the runs list with "Load more"', async () => {
    await page.goto(`${engine.server.url}/#/runs?limit=3`);
    // A hash change does not reload the page: the previous test's table of four stays until the
    // first page of three replaces it, and "Load more" comes with that page.
    await page.locator('[data-testid=load-more]').waitFor();
    expect(await rowIds()).toHaveLength(3);
    await page.locator('[data-testid=load-more]').click();
    await waitFor('the fourth run', async () => (await rowIds()).length === 4);
    expect((await rowIds()).sort()).toEqual(Object.values(ids).sort());
    expect(await page.locator('[data-testid=load-more]').count()).toBe(0);
  });

  it('filters the runs by status and by function', async () => {
    await page.goto(`${engine.server.url}/#/runs`);
    await page.locator('[data-testid=runs-table]').waitFor();
    await page.locator('[data-testid=filter-status]').selectOption('failed');
    await waitFor('only the failed run', async () => JSON.stringify(await rowIds()) === JSON.stringify([ids.failed]));
    expect(page.url()).toContain('#/runs?status=failed');

    await page.locator('[data-testid=filter-status]').selectOption('');
    await page.locator('[data-testid=filter-function]').selectOption('ui.child');
    await waitFor('only the child run', async () => JSON.stringify(await rowIds()) === JSON.stringify([ids.child]));

    await page.goto(`${engine.server.url}/#/runs?function=ui.parent&status=failed`);
    await page.locator('[data-testid=runs-table-empty]').waitFor();
  });

  it("shows a completed run's steps, output, child run (with a link both ways) and timeline", async () => {
    await page.goto(`${engine.server.url}/#/runs`);
    await page.locator(`[data-testid=runs-table] [data-run-id="${ids.parent}"]`).click();
    await page.locator('[data-testid=run-id]').waitFor();
    expect(await page.locator('[data-testid=run-id]').textContent()).toBe(ids.parent);
    expect(await page.locator('[data-testid=run-status] [data-status]').getAttribute('data-status')).toBe('completed');
    expect(JSON.parse((await page.locator('[data-testid=run-output]').textContent()) ?? '')).toEqual({ n: 21, doubled: { doubled: 42 } });
    const steps = await page.locator('[data-testid=steps-table] tbody tr').allTextContents();
    expect(steps).toHaveLength(2);
    expect(steps[0]).toContain('prepare');
    expect(steps[1]).toContain('invoke');
    expect(await page.locator('[data-testid=step-child-link]').getAttribute('data-run-id')).toBe(ids.child);
    expect(await page.locator('[data-testid=children-table] [data-testid=child-link]').getAttribute('data-run-id')).toBe(ids.child);
    const timeline = (await page.locator('[data-testid=timeline] li').allTextContents()).join('\n');
    expect(timeline).toContain('created');
    expect(timeline).toContain('run.created');
    expect(timeline).toContain('ended: completed');

    await page.locator('[data-testid=children-table] [data-testid=child-link]').click();
    await waitFor('the child run page', async () => (await page.locator('[data-testid=run-id]').textContent()) === ids.child);
    expect(await page.locator('[data-testid=parent-link]').getAttribute('data-run-id')).toBe(ids.parent);
    expect(JSON.parse((await page.locator('[data-testid=run-output]').textContent()) ?? '')).toEqual({ doubled: 42 });
  });

  it("shows a failed run's error code and message, and offers no cancel", async () => {
    await page.goto(`${engine.server.url}/#/runs/${ids.failed}`);
    await page.locator('[data-testid=run-error]').waitFor();
    expect(await page.locator('[data-testid=run-error]').textContent()).toBe('CARD_DECLINED: card declined by the bank');
    expect(await page.locator('[data-testid=cancel-run]').count()).toBe(0);
  });

  it('cancels a waiting run from its page; pause and resume appear only when the API offers them', async () => {
    await page.goto(`${engine.server.url}/#/runs/${ids.sleeping}`);
    await page.locator('[data-testid=cancel-run]').waitFor();
    const config = (await (await fetch(`${engine.server.url}/ui/config.json`)).json()) as { actions: { pause: boolean; resume: boolean } };
    expect(await page.locator('[data-testid=pause-run]').count()).toBe(config.actions.pause ? 1 : 0);
    expect(await page.locator('[data-testid=resume-run]').count()).toBe(0); // a waiting run is not paused

    await page.locator('[data-testid=cancel-run]').click();
    await waitFor('the page to show cancelled', async () => (await page.locator('[data-testid=run-status] [data-status]').getAttribute('data-status')) === 'cancelled', 15_000);
    expect((await client.getRun(ids.sleeping)).status).toBe('cancelled');
    expect(await page.locator('[data-testid=cancel-run]').count()).toBe(0);
    expect((await page.locator('[data-testid=timeline] li').allTextContents()).join('\n')).toContain('run.cancelled');
  });

  it('lists the functions with links to their runs, and the events with a name filter', async () => {
    await page.goto(`${engine.server.url}/#/functions`);
    await page.locator('[data-testid=functions-table]').waitFor();
    expect((await page.locator('[data-testid=function-link]').allTextContents()).sort()).toEqual(['ui.child', 'ui.failing', 'ui.parent', 'ui.sleeper']);
    await page.locator('[data-testid=function-link]', { hasText: 'ui.failing' }).click();
    await waitFor('the runs of ui.failing', async () => JSON.stringify(await rowIds()) === JSON.stringify([ids.failed]));

    await page.goto(`${engine.server.url}/#/events`);
    await page.locator('[data-testid=events-table]').waitFor();
    expect((await page.locator('[data-testid=event-name]').allTextContents()).sort()).toEqual(['ui.charge', 'ui.nap', 'ui.order']);
    await page.locator('[data-testid=filter-event-name]').fill('ui.nap');
    await page.locator('[data-testid=filter-event-name]').press('Enter');
    await waitFor('only ui.nap', async () => JSON.stringify(await page.locator('[data-testid=event-name]').allTextContents()) === JSON.stringify(['ui.nap']));
  });

  it('serves the page at / and only the built UI files under /ui/ (scripts as JavaScript, no path escapes)', async () => {
    const home = await fetch(`${engine.server.url}/`);
    expect(home.status).toBe(200);
    expect(home.headers.get('content-type')).toContain('text/html');
    const script = await fetch(`${engine.server.url}/ui/app.js`);
    expect(script.status).toBe(200);
    expect(script.headers.get('content-type')).toContain('javascript');
    for (const path of ['/ui/..%2Fpackage.json', '/ui/.hidden.js', '/ui/missing.js']) expect((await fetch(`${engine.server.url}${path}`)).status).toBe(404);
    expect(await (await fetch(`${engine.server.url}/ui/config.json`)).json()).toEqual({ actions: { pause: expect.any(Boolean), resume: expect.any(Boolean) } });
  });

  // Last: it starts one more run, which the lists above do not expect.
  it('pauses and resumes a waiting run from its page when the API offers pause and resume', async () => {
    const config = (await (await fetch(`${engine.server.url}/ui/config.json`)).json()) as { actions: { pause: boolean; resume: boolean } };
    expect(config.actions).toEqual({ pause: true, resume: true });
    const runId = (await client.emit('ui.nap', {})).runIds[0];
    await waitFor('the run to wait', async () => (await client.getRun(runId)).status === 'waiting', 20_000);
    await page.goto(`${engine.server.url}/#/runs/${runId}`);
    await page.locator('[data-testid=pause-run]').click();
    await waitFor('the page to show paused', async () => (await page.locator('[data-testid=run-status] [data-status]').getAttribute('data-status')) === 'paused', 15_000);
    expect((await client.getRun(runId)).status).toBe('paused');
    expect(await page.locator('[data-testid=pause-run]').count()).toBe(0);
    // A step output injected while paused is marked in the steps table; steps show local start and end times.
    await client.injectStepOutput(runId, `${runId}:later:0`, { price: 12 }, 'check the price');
    await page.reload();
    await page.locator('[data-testid=step-injected]').waitFor();
    const injectedRow = page.locator('[data-testid=steps-table] tbody tr:has([data-testid=step-injected])');
    expect(await injectedRow.textContent()).toContain('later');
    expect(await injectedRow.textContent()).toContain('"price": 12');
    const { steps } = await client.getRunSteps(runId);
    const nap = steps.find((s) => s.name === 'long-nap')!;
    // The milliseconds stand where the locale puts fractional seconds ("10:52:50.018 PM" in en-US), not after "PM".
    const local = await page.evaluate(
      (iso) => { const d = new Date(iso); return `${d.toLocaleDateString()} ${d.toLocaleTimeString(undefined, { hour: 'numeric', minute: '2-digit', second: '2-digit', fractionalSecondDigits: 3 })}`; },
      nap.startedAt,
    );
    const napRow = await page.locator('[data-testid=steps-table] tbody tr:has-text("long-nap")').textContent();
    expect(napRow).toContain(local);
    expect(napRow).not.toMatch(/[AP]M\.\d{3}/);
    await page.locator('[data-testid=resume-run]').click();
    await waitFor('the page to show it waiting again', async () => (await page.locator('[data-testid=run-status] [data-status]').getAttribute('data-status')) === 'waiting', 15_000);
    expect((await client.getRun(runId)).status).toBe('waiting');
    await client.cancelRun(runId);
  });

  // After every other test: once a key exists, every API call needs one.
  it('once API keys are required the page asks for one, and sends the key typed in it as a Bearer token on every call', async () => {
    const { key } = await engine.server.runtime.engine.apiKeys.create({ name: 'ui-test' });
    const sent: (string | undefined)[] = [];
    page.on('request', (req) => {
      if (req.url().includes('/api/v1/')) sent.push(req.headers()['authorization']);
    });
    await waitFor('the page to ask for a key', async () => {
      await page.goto(`${engine.server.url}/#/functions`);
      await page.reload();
      const error = page.locator('[data-testid=page-error]');
      await Promise.race([error.waitFor(), page.locator('[data-testid=functions-table]').waitFor()]);
      return (await error.count()) === 1 && ((await error.textContent()) ?? '').includes('[UNAUTHENTICATED]');
    }, 20_000);
    expect(await page.locator('main').textContent()).toContain('Enter an API key in the header');

    await page.locator('#api-key').fill(key);
    await page.locator('#settings button[type=submit]').click();
    await page.locator('[data-testid=functions-table]').waitFor();
    expect(sent[sent.length - 1]).toBe(`Bearer ${key}`);
    await page.reload(); // kept for the tab
    await page.locator('[data-testid=functions-table]').waitFor();
    expect(sent[sent.length - 1]).toBe(`Bearer ${key}`);
    expect(await page.locator('[data-testid=function-link]').count()).toBe(4);
  });
});
