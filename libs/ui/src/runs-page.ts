import { Run, api } from './api.js';
import { h, loadMore, mount, table } from './dom.js';
import { runDuration, shortId, status, time } from './format.js';
import { PageContext } from './page.js';

const STATUSES = ['waiting_for_capacity', 'running', 'waiting', 'paused', 'completed', 'failed', 'cancelled'];
const PAGE = 50;

/** A runs-list row: id (link), function, status, attempt, created, duration. */
export function runRow(run: Run): (Node | string)[] {
  return [
    h('a', { href: `#/runs/${encodeURIComponent(run.id)}`, 'data-testid': 'run-link', 'data-run-id': run.id }, shortId(run.id)),
    run.functionId,
    status(run.status),
    `${run.attempt} / ${run.maxAttempts}`,
    time(run.createdAt),
    runDuration(run),
  ];
}

/** `#/runs?function=<id>&status=<status>&limit=<n>`: runs newest first, filtered, 50 (`limit`) a page. */
export async function runsPage(ctx: PageContext): Promise<void> {
  const functionId = ctx.params.get('function') ?? '';
  const wanted = ctx.params.get('status') ?? '';
  const limit = Number(ctx.params.get('limit')) || PAGE;
  const [page, fns] = await Promise.all([
    api.listRuns({ functionId, status: wanted, limit }),
    api.listFunctions().then((r) => r.functions.map((f) => f.id)).catch(() => [] as string[]),
  ]);
  if (!ctx.alive()) return;

  const go = () => {
    const q = new URLSearchParams();
    if (fnSelect.value) q.set('function', fnSelect.value);
    if (statusSelect.value) q.set('status', statusSelect.value);
    location.hash = `#/runs${q.toString() ? `?${q}` : ''}`;
  };
  const fnSelect = h('select', { name: 'function', 'data-testid': 'filter-function', onchange: go },
    h('option', { value: '' }, 'all functions'),
    [...new Set([...fns, ...(functionId ? [functionId] : [])])].sort().map((id) => h('option', { value: id, selected: id === functionId }, id)));
  const statusSelect = h('select', { name: 'status', 'data-testid': 'filter-status', onchange: go },
    h('option', { value: '' }, 'any status'),
    STATUSES.map((s) => h('option', { value: s, selected: s === wanted }, s.replace(/_/g, ' '))));

  const rows = page.runs.map(runRow);
  const list = table(['Run', 'Function', 'Status', 'Attempt', 'Created', 'Duration'], rows, 'runs-table', 'No runs match.');
  const more = loadMore(page.nextCursor, async (cursor) => {
    const next = await api.listRuns({ functionId, status: wanted, limit, cursor });
    return { items: next.runs, nextCursor: next.nextCursor };
  }, runRow, list);
  mount(
    ctx.main,
    h('h1', {}, 'Runs ', h('span', { class: 'muted', 'data-testid': 'runs-count' }, `(${page.totalCount})`)),
    h('div', { class: 'filters' },
      h('label', {}, 'Function', fnSelect),
      h('label', {}, 'Status', statusSelect),
      h('button', { type: 'button', onclick: () => void runsPage(ctx) }, 'Refresh')),
    list,
    more,
  );
}
