/** A child of {@link h}: a node, text (set as text, never parsed as HTML), or nothing. */
export type Child = Node | string | number | null | undefined | false;

/**
 * Builds an element: `props` become attributes (`on*` functions become listeners, `false`/`undefined`
 * are left out), children are appended, strings as text nodes. The UI never builds HTML from
 * strings, so run data cannot inject markup.
 */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  props: Record<string, string | number | boolean | undefined | ((event: Event) => void)> = {},
  ...children: (Child | Child[])[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(props)) {
    if (value === undefined || value === false) continue;
    if (typeof value === 'function') el.addEventListener(name.slice(2).toLowerCase(), value);
    else el.setAttribute(name, value === true ? '' : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(typeof child === 'string' || typeof child === 'number' ? document.createTextNode(String(child)) : child);
  }
  return el;
}

/** Replaces the content of `parent` with `children` (nested arrays flattened, nothing-values left out). */
export function mount(parent: Element, ...children: (Child | Child[])[]): void {
  parent.replaceChildren(...children.flat().filter((c): c is Node | string | number => c !== null && c !== undefined && c !== false).map((c) => (typeof c === 'number' ? String(c) : c)));
}

/** A table with a header row; `rows` are arrays of cells; `testid` names it for tests. */
export function table(headers: string[], rows: Child[][], testid: string, empty = 'Nothing yet.'): HTMLElement {
  if (rows.length === 0) return h('p', { class: 'muted', 'data-testid': `${testid}-empty` }, empty);
  return h(
    'table',
    { 'data-testid': testid },
    h('thead', {}, h('tr', {}, headers.map((t) => h('th', {}, t)))),
    h('tbody', {}, rows.map((cells) => h('tr', {}, cells.map((c) => h('td', {}, c))))),
  );
}

/**
 * A "Load more" button for a paged list: each click reads the page after `cursor`, appends its rows
 * to the body of `list` (a {@link table}) and moves on; the button goes away on the last page.
 */
export function loadMore<T>(cursor: string, next: (cursor: string) => Promise<{ items: T[]; nextCursor: string }>, row: (item: T) => Child[], list: HTMLElement): HTMLElement {
  const box = h('div', { class: 'more' });
  const show = () =>
    mount(box, cursor ? h('button', {
      'data-testid': 'load-more',
      onclick: async () => {
        const page = await next(cursor);
        cursor = page.nextCursor;
        list.querySelector('tbody')?.append(...page.items.map((item) => h('tr', {}, row(item).map((c) => h('td', {}, c)))));
        show();
      },
    }, 'Load more') : null);
  show();
  return box;
}
