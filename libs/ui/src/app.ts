import { ApiError, credentials } from './api.js';
import { h, mount } from './dom.js';
import { eventsPage } from './events-page.js';
import { functionsPage } from './functions-page.js';
import { PageContext } from './page.js';
import { runPage } from './run-page.js';
import { runsPage } from './runs-page.js';

/**
 * The runs UI: a hash router over four pages (`#/runs`, `#/runs/<id>`, `#/functions`,
 * `#/events`) and the header's settings (environment, API key; kept in `sessionStorage`).
 */
const main = document.getElementById('main') as HTMLElement;
let shown = 0;

async function route(): Promise<void> {
  const generation = ++shown;
  const [path = '', search = ''] = location.hash.replace(/^#/, '').split('?');
  const ctx: PageContext = { main, params: new URLSearchParams(search), alive: () => generation === shown };
  const section = path.split('/')[1] || 'runs';
  for (const link of document.querySelectorAll<HTMLAnchorElement>('nav a')) link.classList.toggle('active', link.dataset.nav === section);
  try {
    const runId = /^\/runs\/(.+)$/.exec(path)?.[1];
    if (runId) await runPage(ctx, decodeURIComponent(runId));
    else if (section === 'functions') await functionsPage(ctx);
    else if (section === 'events') await eventsPage(ctx);
    else await runsPage(ctx);
  } catch (err) {
    if (!ctx.alive()) return;
    const e = err instanceof ApiError ? err : new ApiError(0, 'ERROR', err instanceof Error ? err.message : String(err));
    mount(main, h('p', { class: 'notice', 'data-testid': 'page-error' }, `[${e.code}] ${e.message}`),
      e.status === 401 || e.status === 403 ? h('p', {}, 'Enter an API key in the header and press Apply.') : null);
  }
}

const form = document.getElementById('settings') as HTMLFormElement;
const envInput = document.getElementById('env') as HTMLInputElement;
const keyInput = document.getElementById('api-key') as HTMLInputElement;
envInput.value = credentials.environment;
keyInput.value = credentials.apiKey;
form.addEventListener('submit', (event) => {
  event.preventDefault();
  credentials.environment = envInput.value.trim();
  credentials.apiKey = keyInput.value.trim();
  void route();
});
window.addEventListener('hashchange', () => void route());
void route();
