import { ApiError, HistoryEntry, Run, RunSteps, Step, UiConfig, api } from './api.js';
import { Child, h, mount, table } from './dom.js';
import { duration, json, runDuration, shortId, status, time } from './format.js';
import { PageContext } from './page.js';
import { RUN_ACTIONS } from './run-actions.js';

const TERMINAL = new Set(['completed', 'failed', 'cancelled']);
const POLL_MS = 1000;
let config: Promise<UiConfig> | undefined;

const runLink = (id: string, testid = 'run-link') => h('a', { href: `#/runs/${encodeURIComponent(id)}`, 'data-testid': testid, 'data-run-id': id }, shortId(id));

/**
 * `#/runs/<id>`: the run (status, function, attempt, event, parent, times, input, output, error),
 * its actions (see `run-actions.ts`), its steps, its child runs and a timeline from its history.
 * While the run has not ended the page reads it again every second and redraws when it changed.
 */
export async function runPage(ctx: PageContext, id: string): Promise<void> {
  config ??= api.config().catch(() => ({ actions: { pause: false, resume: false } }));
  let shown = '';
  const draw = async (): Promise<Run> => {
    const [run, detail, cfg] = await Promise.all([api.getRun(id), api.getRunSteps(id), config!]);
    const fingerprint = JSON.stringify([run.updatedAt, run.status, detail.steps.length, detail.history.length, detail.children.map((c) => c.status)]);
    if (ctx.alive() && fingerprint !== shown) {
      shown = fingerprint;
      render(ctx, run, detail, cfg, () => void draw());
    }
    return run;
  };
  let run = await draw();
  while (ctx.alive() && !TERMINAL.has(run.status)) {
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    if (!ctx.alive()) return;
    run = await draw().catch(() => run);
  }
}

function render(ctx: PageContext, run: Run, detail: RunSteps, cfg: UiConfig, refresh: () => void): void {
  const notice = h('div', { 'data-testid': 'action-notice' });
  const actions = RUN_ACTIONS.filter((a) => a.shows(run, cfg)).map((action) =>
    h('button', {
      type: 'button',
      class: action.danger ? 'danger' : undefined,
      'data-testid': action.testid,
      onclick: async (event: Event) => {
        if (action.confirm && !window.confirm(action.confirm)) return;
        (event.target as HTMLButtonElement).disabled = true;
        try {
          await action.perform(run);
        } catch (err) {
          mount(notice, h('p', { class: 'notice' }, `${action.label} failed: ${err instanceof ApiError ? `[${err.code}] ` : ''}${err instanceof Error ? err.message : String(err)}`));
        }
        refresh();
      },
    }, action.label));

  mount(
    ctx.main,
    h('h1', {}, 'Run ', h('span', { class: 'mono', 'data-testid': 'run-id' }, run.id), ' ', h('span', { 'data-testid': 'run-status' }, status(run.status))),
    actions.length ? h('div', { class: 'actions' }, actions) : null,
    notice,
    h('div', { class: 'card' }, h('dl', { class: 'summary' },
      field('Function', h('a', { href: `#/runs?function=${encodeURIComponent(run.functionId)}`, 'data-testid': 'run-function' }, `${run.functionId} (v${run.functionVersion}, ${run.executionMode})`)),
      field('Attempt', `${run.attempt} of ${run.maxAttempts}`),
      run.eventId ? field('Event', h('span', { class: 'mono' }, run.eventId)) : null,
      run.parentRunId ? field('Parent run', h('span', {}, runLink(run.parentRunId, 'parent-link'), run.parentStepId ? ` (step ${run.parentStepId})` : '')) : null,
      field('Created', time(run.createdAt)),
      field('Started', time(run.startedAt)),
      field('Ended', time(run.endedAt)),
      field('Duration', runDuration(run)),
    )),
    run.error ? h('div', { class: 'error-box', 'data-testid': 'run-error' },
      h('strong', {}, run.error.code ? `${run.error.code}: ` : 'Error: '), run.error.message,
      run.error.child_run_id ? h('div', {}, 'child run ', runLink(run.error.child_run_id)) : null) : null,
    h('h2', {}, 'Input'), json(run.input, 'run-input'),
    run.output !== undefined ? [h('h2', {}, 'Output'), json(run.output, 'run-output')] : null,
    h('h2', {}, `Steps (${detail.steps.length})`),
    table(['#', 'Step', 'Type', 'Status', 'Started', 'Ended', 'Result'], detail.steps.map(stepRow), 'steps-table', 'No steps yet.'),
    h('h2', {}, `Child runs (${detail.children.length})`),
    table(['Run', 'Function', 'Status', 'Attempt', 'Duration'],
      detail.children.map((c) => [runLink(c.id, 'child-link'), c.functionId, status(c.status), `${c.attempt} / ${c.maxAttempts}`, runDuration(c)]), 'children-table', 'No child runs.'),
    h('h2', {}, 'Timeline'),
    timeline(run, detail.history),
  );
}

const field = (label: string, value: Child) => [h('dt', {}, label), h('dd', {}, value)];

function stepRow(step: Step): Child[] {
  const result: Child = step.childRunId
    ? h('span', {}, 'child run ', runLink(step.childRunId, 'step-child-link'))
    : step.error !== undefined
      ? json(step.error)
      : step.output !== undefined
        ? json(step.output)
        : step.wakeAt
          ? `until ${time(step.wakeAt)}`
          : '—';
  // An output set by InjectStepOutput is marked: the worker did not produce it.
  const marked: Child = step.injected ? h('span', {}, h('span', { class: 'status injected', 'data-testid': 'step-injected', title: 'set by InjectStepOutput while the run was paused' }, 'injected'), ' ', result) : result;
  return [String(step.sequence), step.name, step.type.replace(/_/g, ' '), status(step.status), time(step.startedAt ?? step.createdAt), time(step.endedAt), marked];
}

/** The run's life: created, started, every history row (retries, status changes, cancel), ended; offsets from creation. */
function timeline(run: Run, history: HistoryEntry[]): HTMLElement {
  const created = Date.parse(run.createdAt);
  const entries: { ts: string; what: string; detail?: string }[] = [
    { ts: run.createdAt, what: 'created' },
    ...(run.startedAt ? [{ ts: run.startedAt, what: 'started' }] : []),
    ...history.map((e) => ({ ts: e.ts, what: e.eventType, detail: [e.cause, describe(e.data)].filter(Boolean).join(' · ') })),
    ...(run.endedAt ? [{ ts: run.endedAt, what: `ended: ${run.status}` }] : []),
  ].sort((a, b) => Date.parse(a.ts) - Date.parse(b.ts));
  return h('ol', { class: 'timeline', 'data-testid': 'timeline' }, entries.map((e) =>
    h('li', { title: time(e.ts) },
      h('span', { class: 'mono muted' }, `+${duration(Date.parse(e.ts) - created)} `),
      h('strong', {}, e.what),
      e.detail ? h('span', { class: 'muted' }, ` ${e.detail}`) : null)));
}

/** A history row's data in a few words (status, attempt, error code). */
function describe(data: unknown): string {
  if (!data || typeof data !== 'object') return '';
  const d = data as { status?: string; attempt?: number; error?: { code?: string; message?: string } };
  return [d.status, d.attempt !== undefined ? `attempt ${d.attempt}` : '', d.error ? d.error.code ?? d.error.message ?? '' : ''].filter(Boolean).join(', ');
}
