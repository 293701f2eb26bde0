// The header search. Names match as you type: queues, consumer groups and
// trace names, each opening its view. An id (a message id, a transaction
// id or a trace id) is looked up when chosen, among the messages of the
// last 7 days, and opens that message. Ctrl-K or ⌘K focuses the box;
// arrows, Enter and Escape work in the list.

import { api, range } from './api.js';
import { h, href, notify } from './ui.js';

const NAMES_TTL_MS = 30000; // names are reloaded when older than this
const PER_KIND = 5; // results of each kind shown
// The id lookup reads pages of listMessages (no route looks a message up by
// id): at most SCAN_PAGES pages of SCAN_PAGE messages, newest first.
const SCAN_PAGE = 1000;
const SCAN_PAGES = 10;
const SCAN_MINUTES = 7 * 24 * 60;

let names = null;
let namesAt = 0;
let namesLoading = null;

// loadNames fetches what names are matched against; a part the broker
// refuses (a token's role, an old broker) is simply left out.
function loadNames() {
  if (names && Date.now() - namesAt < NAMES_TTL_MS) return Promise.resolve(names);
  if (!namesLoading) {
    namesLoading = Promise.allSettled([api.listQueues(), api.listConsumerGroups(), api.listTraceNames({ limit: 500 })])
      .then(([q, g, t]) => {
        names = {
          queues: q.status === 'fulfilled' ? q.value.queues : [],
          groups: g.status === 'fulfilled' ? g.value : [],
          traces: t.status === 'fulfilled' ? t.value.trace_names : [],
        };
        namesAt = Date.now();
        return names;
      })
      .finally(() => { namesLoading = null; });
  }
  return namesLoading;
}

// results lists what text matches: [{kind, label, hint, go}] where go is a
// hash route or a function that finds one.
function results(text, n) {
  const s = text.toLowerCase();
  const has = (v) => (v || '').toLowerCase().includes(s);
  const out = [];
  for (const q of n.queues.filter((x) => has(x.name)).slice(0, PER_KIND)) {
    out.push({ kind: 'queue', label: q.name, hint: `${q.partitions} partition(s)${q.namespace ? ` · ${q.namespace}` : ''}`, go: href(`/queues/${encodeURIComponent(q.name)}`) });
  }
  const seen = new Set();
  for (const g of n.groups.filter((x) => has(x.name))) {
    if (seen.has(g.name) || seen.size >= PER_KIND) continue;
    seen.add(g.name);
    const queues = n.groups.filter((x) => x.name === g.name).map((x) => x.queueName);
    out.push({ kind: 'group', label: g.name, hint: queues.join(', '), go: href('/consumers', { group: g.name }) });
  }
  for (const t of n.traces.filter((x) => has(x.trace_name)).slice(0, PER_KIND)) {
    out.push({ kind: 'trace', label: t.trace_name, hint: `${t.trace_count} event(s)`, go: href('/traces', { name: t.trace_name }) });
  }
  // An exact id is never a substring match of a name: offer the lookup,
  // first when the text looks like an id (a UUID, or no name matched).
  const lookup = { kind: 'id', label: text, hint: 'find the message with this message, transaction or trace id', go: () => findMessage(text) };
  if (/^[0-9a-f]{8}-[0-9a-f]{4}-/i.test(text) || !out.length) out.unshift(lookup);
  else out.push(lookup);
  return out;
}

// findMessage walks recent messages, newest first, for one whose id,
// transactionId or traceId is text, and returns the route of its drawer.
async function findMessage(text) {
  const window = range(SCAN_MINUTES);
  let read = 0;
  for (let page = 0; page < SCAN_PAGES; page++) {
    const p = await api.listMessages({ ...window, limit: SCAN_PAGE, offset: page * SCAN_PAGE });
    const m = p.messages.find((x) => x.id === text || x.transactionId === text || x.traceId === text);
    if (m) {
      return href('/messages', { queue: m.queue, partition: m.partition, window: String(SCAN_MINUTES), pid: m.partitionId, tid: m.transactionId });
    }
    read += p.messages.length;
    if (!p.pagination.hasMore) break;
  }
  notify(`No message of the last 7 days has the id “${text}” (${read} message(s) searched).`, 'error');
  return null;
}

export function setupSearch() {
  const input = document.getElementById('search');
  const list = document.getElementById('search-results');
  let items = [];
  let active = 0;
  let seq = 0;

  const close = () => { list.hidden = true; list.replaceChildren(); items = []; };
  const render = () => {
    list.replaceChildren(...items.map((r, i) => h('div', {
      class: `search-item${i === active ? ' active' : ''}`, role: 'option', 'aria-selected': String(i === active),
      dataset: { kind: r.kind, label: r.label },
      onmousedown: (ev) => { ev.preventDefault(); choose(i); },
    }, h('span', { class: `search-kind kind-${r.kind}` }, r.kind), h('span', { class: 'search-label' }, r.label), h('span', { class: 'search-hint' }, r.hint))));
    list.hidden = !items.length;
  };
  const update = async () => {
    const text = input.value.trim();
    const mine = ++seq;
    if (!text) { close(); return; }
    const n = await loadNames();
    if (mine !== seq) return; // the user typed on meanwhile
    items = results(text, n);
    active = 0;
    render();
  };
  const choose = async (i) => {
    const r = items[i];
    if (!r) return;
    let to = r.go;
    if (typeof to === 'function') {
      list.replaceChildren(h('div', { class: 'search-item busy' }, h('span', { class: 'spinner' }), `Looking for “${r.label}”…`));
      try {
        to = await r.go();
      } catch (e) {
        notify(`Search failed: ${e.message}`, 'error');
        to = null;
      }
    }
    close();
    if (!to) { input.focus(); return; }
    input.value = '';
    input.blur();
    location.hash = to;
  };

  input.addEventListener('input', update);
  input.addEventListener('focus', update);
  input.addEventListener('blur', () => setTimeout(() => { if (document.activeElement !== input) close(); }, 150));
  input.addEventListener('keydown', (ev) => {
    if (ev.key === 'ArrowDown' || ev.key === 'ArrowUp') {
      ev.preventDefault();
      if (!items.length) return;
      active = (active + (ev.key === 'ArrowDown' ? 1 : items.length - 1)) % items.length;
      render();
    } else if (ev.key === 'Enter') {
      ev.preventDefault();
      choose(active);
    } else if (ev.key === 'Escape') {
      input.value = '';
      close();
      input.blur();
    }
  });
  document.addEventListener('keydown', (ev) => {
    if ((ev.ctrlKey || ev.metaKey) && ev.key.toLowerCase() === 'k') {
      ev.preventDefault();
      input.focus();
      input.select();
    }
  });
}
