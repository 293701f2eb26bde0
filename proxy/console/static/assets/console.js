// The cluster console: overview, usage chart, API keys and members of the
// cluster this host names, through /api/console/* with the session cookie.
// Plain ES module, no build step.

import uPlot from './vendor/uPlot.esm.js';

const $ = (id) => document.getElementById(id);
const state = { me: null, act: '', role: 'none', plot: null };

// api calls the console API; a 401 sends the browser to the login page.
async function api(method, path, body) {
  const headers = { Accept: 'application/json' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (state.act) headers['X-Queen-Act-Cluster'] = state.act;
  const res = await fetch(path, {
    method, headers, credentials: 'same-origin', cache: 'no-store',
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = { error: text }; }
  if (res.status === 401) {
    location.assign(`/auth/login?next=${encodeURIComponent(location.pathname)}`);
    throw new Error('signed out');
  }
  if (!res.ok) throw new Error((data && data.error) || `${res.status} ${res.statusText}`);
  return data;
}

function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === 'class') e.className = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (k === 'dataset') Object.assign(e.dataset, v);
    else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(c ?? ''));
  return e;
}

function toast(text, error = false) {
  const t = $('toast');
  t.textContent = text;
  t.className = error ? 'toast error' : 'toast';
  t.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { t.hidden = true; }, 4000);
}

function problem(text) {
  $('problem').textContent = text;
  $('problem').hidden = !text;
}

const when = (s) => (s ? new Date(s).toLocaleString() : '—');
const num = (n) => (n === null || n === undefined ? 'unlimited' : Number(n).toLocaleString());

async function loadMe() {
  const me = await fetch('/auth/me', { credentials: 'same-origin', cache: 'no-store' });
  if (me.status === 401) {
    location.assign(`/auth/login?next=${encodeURIComponent(location.pathname)}`);
    return false;
  }
  state.me = await me.json();
  $('who').textContent = state.me.email;
  if (state.me.acting_cluster) {
    $('cluster-name').textContent = state.me.acting_cluster.slug;
    state.role = state.me.role;
    return true;
  }
  // A host that serves several clusters: pick one, sent as x-queen-act-cluster.
  const pick = $('cluster-pick');
  pick.replaceChildren(...state.me.clusters.map((c) => el('option', { value: c.slug }, `${c.slug} (${c.role})`)));
  if (state.me.clusters.length === 0) {
    problem('You have no role on any cluster.');
    return false;
  }
  pick.hidden = false;
  $('cluster-name').hidden = true;
  const choose = () => {
    state.act = pick.value;
    state.role = state.me.clusters.find((c) => c.slug === pick.value).role;
  };
  pick.addEventListener('change', () => { choose(); refresh(); });
  choose();
  return true;
}

async function loadOverview() {
  const o = await api('GET', '/api/console/overview');
  state.role = o.role;
  const facts = [
    ['Cluster', o.cluster.slug], ['Status', o.cluster.status], ['Plan', o.cluster.plan], ['Your role', o.role],
    ['Messages this month', num(o.month.msgs)], ['Monthly quota', num(o.month.quota)],
    ['Requests / s', num(o.limits.max_req_per_sec)], ['Messages / s', num(o.limits.max_msgs_per_sec)],
    ['Queues', num(o.limits.max_queues)], ['Features', o.features.join(', ') || 'none'],
  ];
  $('overview-facts').replaceChildren(...facts.flatMap(([k, v]) => [el('dt', {}, k), el('dd', {}, String(v))]));
}

async function loadUsage() {
  const hours = $('usage-hours').value;
  const u = await api('GET', `/api/console/usage?hours=${hours}`);
  const classes = ['push', 'delivery', 'txn', 'configure', 'read'];
  // Every bucket of the range, zeros where nothing was metered.
  const step = u.bucket_seconds;
  const times = [];
  for (let t = Date.parse(u.since) / 1000, end = Date.now() / 1000; t <= end; t += step) times.push(t);
  const index = new Map(times.map((t, i) => [t, i]));
  const data = [times, ...classes.map(() => times.map(() => 0))];
  for (const p of u.series) {
    const i = index.get(Date.parse(p.at) / 1000);
    if (i !== undefined) data[1 + classes.indexOf(p.op_class)][i] += p.msgs;
  }
  const box = $('usage-chart');
  if (state.plot) { state.plot.destroy(); state.plot = null; }
  box.replaceChildren();
  box.dataset.points = String(u.series.length);
  if (u.series.length === 0) {
    box.append(el('p', { class: 'muted' }, 'No usage in this range yet.'));
    return;
  }
  const colors = ['#5b4fd6', '#e0883a', '#2e9e6a', '#d04a5a', '#3a8fd0'];
  state.plot = new uPlot({
    width: Math.max(300, box.clientWidth || 800), height: 200, scales: { x: { time: true } },
    series: [{}, ...classes.map((c, i) => ({ label: c, stroke: colors[i], width: 1.5, points: { show: false } }))],
  }, data, box);
}

async function loadKeys() {
  const { keys } = await api('GET', '/api/console/keys');
  $('key-table').tBodies[0].replaceChildren(...keys.map((k) => el('tr', { class: k.revoked_at ? 'revoked' : '', dataset: { keyId: k.id, keyName: k.name } },
    el('td', {}, k.name), el('td', {}, k.scopes.join(', ')), el('td', {}, when(k.created_at)),
    el('td', {}, when(k.last_used_at)), el('td', {}, k.revoked_at ? `revoked ${when(k.revoked_at)}` : 'live'),
    el('td', {}, k.revoked_at ? '' : el('button', { class: 'danger key-revoke', type: 'button', onclick: () => revokeKey(k) }, 'Revoke')))));
}

async function revokeKey(k) {
  if (!confirm(`Revoke the key "${k.name}"? Clients using it are refused at once.`)) return;
  try {
    await api('DELETE', `/api/console/keys/${encodeURIComponent(k.id)}`);
    toast(`Key "${k.name}" revoked`);
  } catch (e) { toast(e.message, true); }
  await loadKeys();
}

async function issueKey(ev) {
  ev.preventDefault();
  const scopes = [...document.querySelectorAll('input[name=scope]:checked')].map((i) => i.value);
  try {
    const k = await api('POST', '/api/console/keys', { name: $('key-name').value, scopes });
    $('new-key').textContent = k.key;
    $('new-key-box').hidden = false;
    $('key-name').value = '';
  } catch (e) { toast(e.message, true); }
  await loadKeys();
}

async function loadMembers() {
  const { members } = await api('GET', '/api/console/members');
  $('member-table').tBodies[0].replaceChildren(...members.map((m) => el('tr', { dataset: { email: m.email } },
    el('td', {}, m.email), el('td', {}, m.role), el('td', {}, when(m.since)), el('td', {}, when(m.last_login_at)),
    el('td', {}, el('button', { class: 'danger member-revoke', type: 'button', onclick: () => revokeMember(m) }, 'Remove')))));
}

async function grantMember(ev) {
  ev.preventDefault();
  try {
    await api('POST', '/api/console/members', { email: $('member-email').value, role: $('member-role').value });
    toast('Role granted');
    $('member-email').value = '';
  } catch (e) { toast(e.message, true); }
  await loadMembers();
}

async function revokeMember(m) {
  if (!confirm(`Remove ${m.email} from this cluster?`)) return;
  try {
    await api('DELETE', '/api/console/members', { email: m.email });
    toast('Member removed');
  } catch (e) { toast(e.message, true); }
  await loadMembers();
}

async function refresh() {
  problem('');
  try {
    await loadOverview();
    await loadUsage();
    const admin = state.role === 'admin';
    for (const s of document.querySelectorAll('.admin-only')) s.hidden = !admin;
    $('admin-note').hidden = admin;
    if (admin) await Promise.all([loadKeys(), loadMembers()]);
    document.body.dataset.ready = '1';
  } catch (e) {
    if (e.message !== 'signed out') problem(e.message);
  }
}

function setup() {
  $('key-form').addEventListener('submit', issueKey);
  $('member-form').addEventListener('submit', grantMember);
  $('usage-hours').addEventListener('change', () => loadUsage().catch((e) => problem(e.message)));
  $('new-key-done').addEventListener('click', () => { $('new-key-box').hidden = true; $('new-key').textContent = ''; });
  $('new-key-copy').addEventListener('click', () => navigator.clipboard.writeText($('new-key').textContent).then(() => toast('Copied')));
  $('sign-out').addEventListener('click', async () => {
    await fetch('/auth/logout', { method: 'POST', credentials: 'same-origin' });
    location.assign('/auth/login?next=%2Fconsole');
  });
}

setup();
loadMe().then((ok) => { if (ok) refresh(); }).catch((e) => problem(e.message));
