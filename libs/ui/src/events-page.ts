import { EventInfo, api } from './api.js';
import { h, loadMore, mount, table } from './dom.js';
import { shortId, time } from './format.js';
import { PageContext } from './page.js';

const PAGE = 50;

const eventRow = (e: EventInfo) => [shortId(e.id), h('span', { 'data-testid': 'event-name' }, e.name), time(e.ts), h('code', {}, JSON.stringify(e.data).slice(0, 160)), e.idempotencyKey ?? '—'];

/** `#/events?name=<name>`: the event log, newest first, 50 a page. */
export async function eventsPage(ctx: PageContext): Promise<void> {
  const name = ctx.params.get('name') ?? '';
  const page = await api.listEvents({ name, limit: PAGE });
  if (!ctx.alive()) return;
  const input = h('input', { name: 'name', value: name, placeholder: 'any name', 'data-testid': 'filter-event-name' });
  const list = table(['Event', 'Name', 'Time', 'Data', 'Idempotency key'], page.events.map(eventRow), 'events-table', 'No events.');
  const more = loadMore(page.nextCursor, async (cursor) => {
    const next = await api.listEvents({ name, limit: PAGE, cursor });
    return { items: next.events, nextCursor: next.nextCursor };
  }, eventRow, list);
  mount(
    ctx.main,
    h('h1', {}, 'Events'),
    h('form', { class: 'filters', onsubmit: (ev: Event) => { ev.preventDefault(); location.hash = input.value ? `#/events?name=${encodeURIComponent(input.value)}` : '#/events'; } },
      h('label', {}, 'Name', input), h('button', { type: 'submit' }, 'Filter')),
    list,
    more,
  );
}
