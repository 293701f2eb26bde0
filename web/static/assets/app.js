// The shell: hash router, refresh loop, broker health, identity, bearer
// token, the tenant picker and the maintenance banner. Views live in ./views/, one module each,
// exporting {title, mount(el, ctx) -> {refresh()}}.

import { api, Kind, getToken, setToken, getTenant, setTenant, DEFAULT_TENANT } from './api.js';
import { h, errorState, link } from './ui.js';
import overview from './views/overview.js';
import queues from './views/queues.js';
import queue from './views/queue.js';
import messages from './views/messages.js';
import dlq from './views/dlq.js';
import consumers from './views/consumers.js';
import traces from './views/traces.js';
import analytics from './views/analytics.js';
import system from './views/system.js';
import migration from './views/migration.js';
import { setupSearch } from './search.js';

// Routes: [pattern, nav entry, view]. ":name" captures one segment.
const routes = [
  ['/', 'overview', overview],
  ['/queues', 'queues', queues],
  ['/queues/:name', 'queues', queue],
  ['/messages', 'messages', messages],
  ['/dlq', 'dlq', dlq],
  ['/consumers', 'consumers', consumers],
  ['/traces', 'traces', traces],
  ['/analytics', 'analytics', analytics],
  ['/operations', 'analytics', analytics], // the reference's Queue Operations view
  ['/system', 'system', system],
  ['/migration', 'migration', migration],
];

const $ = (id) => document.getElementById(id);
const state = { identity: null, identityError: null, view: null, busy: false, timer: 0 };

// ctx is what views get: the route and a few shell services.
function context(params, query) {
  return {
    params,
    query,
    go: (path, q) => {
      const qs = new URLSearchParams(Object.entries(q || {}).filter(([, v]) => v !== undefined && v !== ''));
      location.hash = `#${path}${qs.toString() ? `?${qs}` : ''}`;
    },
    // can(level) tells whether the signed-in identity passes an access
    // level; when the identity is unknown the broker decides.
    can: (level) => !state.identity || (state.identity.access || []).includes(level),
    refresh: () => refreshAll(true),
  };
}

function match(path) {
  for (const [pattern, nav, view] of routes) {
    const want = pattern.split('/');
    const got = path.split('/');
    if (want.length !== got.length) continue;
    const params = {};
    if (want.every((w, i) => (w.startsWith(':') ? (params[w.slice(1)] = decodeURIComponent(got[i])) !== '' : w === got[i]))) {
      return { nav, view, params };
    }
  }
  return null;
}

function route() {
  const raw = location.hash.replace(/^#/, '') || '/';
  const [path, qs] = raw.split('?');
  const query = Object.fromEntries(new URLSearchParams(qs || ''));
  const m = match(path.replace(/\/+$/, '') || '/');
  const el = $('view');
  for (const a of document.querySelectorAll('#nav a')) a.classList.toggle('active', m && a.dataset.route === m.nav);
  el.replaceChildren();
  delete el.dataset.ready;
  if (!m) {
    state.view = null;
    el.dataset.view = 'none';
    $('title').textContent = 'Not found';
    el.append(h('div', { class: 'state empty' }, `No view at ${path}. `, link('/', null, 'Go to the overview.')));
    refreshAll(true);
    return;
  }
  $('title').textContent = m.view.title;
  document.title = `${m.view.title} · Queen`;
  el.dataset.view = m.nav;
  state.view = m.view.mount(el, context(m.params, query));
  refreshAll(true);
}

// refreshAll reloads the shell and the current view. A timer tick that
// finds a refresh still running is dropped (the next one catches up); a
// navigation or an action (force) always reloads.
async function refreshAll(force = false) {
  if (state.busy && !force) return;
  state.busy = true;
  const view = state.view;
  try {
    await Promise.all([refreshShell(), view && view.refresh(force)]);
    if (view === state.view) $('view').dataset.ready = '1';
    $('refresh-at').textContent = `updated ${new Date().toLocaleTimeString()}`;
  } finally {
    state.busy = false;
  }
}

async function refreshShell() {
  await Promise.all([refreshHealth(), refreshIdentity(), refreshMaintenance()]);
}

async function refreshHealth() {
  const box = $('health');
  let ok = false;
  let text;
  try {
    const hl = await api.getHealth();
    ok = hl.status === 'healthy' || hl.status === 'ok';
    text = ok ? `connected${hl.version ? ` · ${hl.version}` : ''}` : `${hl.status}`;
  } catch (e) {
    text = e.kind === Kind.network ? 'broker unreachable' : `${e.body && e.body.status ? e.body.status : 'unhealthy'}${e.body && e.body.database === 'disconnected' ? ' · database disconnected' : ''}`;
  }
  box.classList.toggle('ok', ok);
  box.classList.toggle('bad', !ok);
  box.lastElementChild.textContent = text;
}

async function refreshIdentity() {
  const out = $('identity-text');
  // An answer to a request sent with another token than the current one
  // (the user pasted or forgot one meanwhile) is stale: drop it.
  const token = getToken();
  try {
    const id = await api.getIdentity();
    if (token !== getToken()) return;
    state.identity = id;
    state.identityError = null;
    const who = id.auth === 'off' ? 'standalone' : (id.email || id.sub || id.user_id || 'token without sub');
    out.textContent = `${who} · ${id.role}${id.auth === 'off' ? ' · auth off' : ''}`;
    out.title = `access: ${(id.access || []).join(', ')}`;
    out.className = 'signed-in';
    $('identity').dataset.user = who;
    $('identity').dataset.role = id.role;
    await renderTenant(id);
  } catch (e) {
    if (token !== getToken()) return;
    state.identity = null;
    state.identityError = e;
    delete $('identity').dataset.user;
    if (e.kind === Kind.auth) {
      out.textContent = token ? 'token refused' : 'signed out';
      out.className = 'signed-out';
      showToken(token ? 'The broker refused the token (expired, or signed with another key). Paste a new one.' : null);
    } else {
      out.textContent = 'identity unknown';
      out.className = 'muted';
    }
  }
}

async function refreshMaintenance() {
  const box = $('banners');
  try {
    const m = await api.getMaintenance();
    const items = [];
    if (m.maintenanceMode) items.push(['Push maintenance is ON: pushes go to the disk buffer.', 'warn']);
    if (m.popMaintenanceMode) items.push(['Pop maintenance is ON: pops return no messages.', 'warn']);
    if (m.bufferedMessages > 0) items.push([`${m.bufferedMessages} buffered message(s) waiting to be written to PostgreSQL.`, 'info']);
    if (m.bufferStats && m.bufferStats.failedCount > 0) items.push([`${m.bufferStats.failedCount} buffered event(s) failed to flush.`, 'error']);
    box.replaceChildren(...items.map(([t, k]) => h('div', { class: `banner banner-${k}` }, t, ' ', link('/system', null, 'System'))));
  } catch {
    box.replaceChildren(); // not served, or not an admin: no banner
  }
}

// renderTenant shows the tenant picker when the broker scopes requests by
// tenant: the tenants it lists (an admin may list them), the one in use, and
// "Other…" to type any UUID (a tenant owning nothing yet is not listed).
// When the token's claim fixes the tenant there is nothing to pick.
const OTHER = 'other';
async function renderTenant(id) {
  const box = $('tenant');
  box.hidden = !id.tenancy;
  if (!id.tenancy) return;
  const sel = $('tenant-select');
  if (id.tenant_from_token) {
    delete sel.dataset.key;
    sel.replaceChildren(h('option', { value: id.tenant_id }, id.tenant_id));
    sel.disabled = true;
    sel.title = 'fixed by the token';
    return;
  }
  sel.disabled = false;
  sel.title = '';
  const current = getTenant() || DEFAULT_TENANT;
  // Labels stay short (the full id is the option's title).
  const label = (t, queues) => `${t === DEFAULT_TENANT ? 'default' : `${t.slice(0, 8)}…${t.slice(-4)}`}` +
    (queues === undefined ? '' : ` · ${queues} queue${queues === 1 ? '' : 's'}`);
  let known = [];
  try {
    known = (await api.listTenants()).tenants.map((t) => [t.id, label(t.id, t.queues)]);
  } catch {
    known = []; // not an admin: the default and the one in use only
  }
  if (!known.some(([t]) => t === DEFAULT_TENANT)) known.unshift([DEFAULT_TENANT, label(DEFAULT_TENANT)]);
  if (!known.some(([t]) => t === current)) known.push([current, label(current)]);
  // Rebuilt only when something changed, so that a refresh does not close
  // the list under the user's pointer.
  const key = JSON.stringify([known, current]);
  if (sel.dataset.key === key || document.activeElement === sel) return;
  sel.dataset.key = key;
  const labels = known.map(([t, text]) => h('option', { value: t, title: t }, text));
  sel.replaceChildren(...labels, h('option', { value: OTHER }, 'Other…'));
  if ($('tenant-input').hidden) sel.value = current;
}

function setupTenant() {
  const sel = $('tenant-select');
  const input = $('tenant-input');
  const use = async (tenant) => {
    if (!setTenant(tenant)) {
      input.classList.add('invalid');
      input.title = 'a tenant is a UUID';
      return;
    }
    input.classList.remove('invalid');
    input.hidden = true;
    input.value = '';
    await refreshIdentity();
    route();
  };
  sel.addEventListener('change', () => {
    if (sel.value === OTHER) {
      input.hidden = false;
      input.focus();
      return;
    }
    use(sel.value);
  });
  input.addEventListener('keydown', (ev) => {
    if (ev.key === 'Enter') use(input.value);
    if (ev.key === 'Escape') {
      input.hidden = true;
      sel.value = getTenant() || DEFAULT_TENANT;
    }
  });
}

function showToken(reason) {
  const panel = $('token-panel');
  if (reason) $('token-reason').textContent = reason;
  panel.hidden = false;
}

function setupToken() {
  $('token-toggle').addEventListener('click', () => { $('token-panel').hidden = !$('token-panel').hidden; });
  $('token-panel').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    setToken($('token-input').value);
    $('token-input').value = '';
    $('token-panel').hidden = true;
    await refreshIdentity();
    route();
  });
  $('token-forget').addEventListener('click', async () => {
    setToken('');
    $('token-input').value = '';
    await refreshIdentity();
    route();
  });
}

// The refresh loop: an interval the user picks, paused by a button (and
// while the tab is hidden). Both are remembered in localStorage.
function setupRefresh() {
  const sel = $('refresh-interval');
  const pauseBtn = $('refresh-pause');
  sel.value = localStorage.getItem('queen.refresh') || '5000';
  let paused = localStorage.getItem('queen.paused') === '1';
  const render = () => {
    pauseBtn.textContent = paused ? 'Resume' : 'Pause';
    pauseBtn.setAttribute('aria-pressed', String(paused));
    document.body.classList.toggle('paused', paused);
  };
  const schedule = () => {
    clearTimeout(state.timer);
    if (!paused) state.timer = setTimeout(tick, Number(sel.value));
  };
  const tick = async () => {
    if (!document.hidden) await refreshAll();
    schedule();
  };
  sel.addEventListener('change', () => { localStorage.setItem('queen.refresh', sel.value); schedule(); });
  pauseBtn.addEventListener('click', () => {
    paused = !paused;
    localStorage.setItem('queen.paused', paused ? '1' : '0');
    render();
    schedule();
  });
  $('refresh-now').addEventListener('click', () => refreshAll(true));
  render();
  schedule();
}

// Deep links of the reference dashboard (/queues, /dlq, …) arrive here
// through the broker's index fallback; they become hash routes so that the
// page at "/" is the only document (it is the only public one with JWT on).
function adoptPathRoute() {
  if (location.pathname !== '/' && match(location.pathname.replace(/\/+$/, ''))) {
    history.replaceState(null, '', `/#${location.pathname}${location.search}`);
  }
}

window.addEventListener('error', (ev) => {
  $('view').append(errorState({ message: `The dashboard hit a bug: ${ev.message}` }));
});
adoptPathRoute();
setupToken();
setupSearch();
setupTenant();
setupRefresh();
window.addEventListener('hashchange', route);
// Who is signed in decides which actions the first view offers.
await refreshIdentity();
route();
