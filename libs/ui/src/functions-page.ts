import { api } from './api.js';
import { h, mount, table } from './dom.js';
import { PageContext } from './page.js';

/** `#/functions`: every registered function, with a link to its runs. */
export async function functionsPage(ctx: PageContext): Promise<void> {
  const { functions } = await api.listFunctions();
  if (!ctx.alive()) return;
  const rows = functions.map((f) => [
    h('a', { href: `#/runs?function=${encodeURIComponent(f.id)}`, 'data-testid': 'function-link' }, f.id),
    f.mode,
    `v${f.version}`,
    f.triggers.map((t) => t.event ?? t.cron ?? t.expression).filter(Boolean).join(', ') || 'invoke only',
    f.concurrency ? `${f.concurrency.limit}${f.concurrency.key ? ` per ${f.concurrency.key}` : ''}` : '—',
    f.endpointUrl ? h('span', { class: 'mono' }, f.endpointUrl) : '—',
  ]);
  mount(ctx.main, h('h1', {}, `Functions (${functions.length})`), table(['Function', 'Mode', 'Version', 'Triggers', 'Concurrency', 'Endpoint'], rows, 'functions-table', 'No function is registered.'));
}
