import { h } from './dom.js';

/** The browser's time format with milliseconds, placed where the locale puts fractional seconds (`10:52:50.018 PM`). */
const TIME_TO_MS: Intl.DateTimeFormatOptions = { hour: 'numeric', minute: '2-digit', second: '2-digit', fractionalSecondDigits: 3 };

/** A timestamp as local date and time to the millisecond; `—` when absent. */
export function time(iso: string | undefined): string {
  if (!iso) return '—';
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : `${d.toLocaleDateString()} ${d.toLocaleTimeString(undefined, TIME_TO_MS)}`;
}

/** A duration in ms as `850 ms`, `4.2 s`, `3 min 5 s`. */
export function duration(ms: number): string {
  if (ms < 1000) return `${Math.max(0, Math.round(ms))} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1000)} s`;
}

/** How long a run took (ended − started), or has been going; `—` before it started. */
export function runDuration(run: { createdAt: string; startedAt?: string; endedAt?: string }): string {
  const start = Date.parse(run.startedAt ?? run.createdAt);
  if (Number.isNaN(start)) return '—';
  return duration((run.endedAt ? Date.parse(run.endedAt) : Date.now()) - start);
}

/** A status badge (`class="status <status>"`). */
export function status(value: string): HTMLElement {
  return h('span', { class: `status ${value}`, 'data-status': value }, value.replace(/_/g, ' '));
}

/** JSON, pretty-printed in a `<pre>`; values are shown as text. */
export function json(value: unknown, testid?: string): HTMLElement {
  return h('pre', { 'data-testid': testid }, value === undefined ? '—' : JSON.stringify(value, null, 2));
}

/** Short id: the first 8 characters, the whole id in the title. */
export function shortId(id: string): HTMLElement {
  return h('span', { class: 'mono', title: id }, id.length > 12 ? `${id.slice(0, 8)}…` : id);
}
