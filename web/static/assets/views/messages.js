// Messages: a filtered, paged list that follows new messages as they
// arrive, and a drawer with one message's payload, consumers and traces.

import { api, range } from '../api.js';
import { h, panel, num, table, time, ago, chip, json, confirm, act, select, errorState, loading, link } from '../ui.js';

const PAGE = 100;
const windows = [['15', 'last 15 min'], ['60', 'last hour'], ['360', 'last 6 h'], ['1440', 'last 24 h'], ['10080', 'last 7 days']];
const statuses = [['', 'any status'], 'pending', 'processing', 'completed', 'dead_letter'];

export default {
  title: 'Messages',
  mount(el, ctx) {
    const q = { queue: '', partition: '', status: '', window: '60', offset: '0', ...ctx.query };
    const set = (patch) => ctx.go('/messages', { ...q, ...patch });
    const seen = new Set();
    let first = true;

    const queueSelect = select([['', 'all queues']], q.queue, (v) => set({ queue: v, partition: '', offset: 0 }), { 'aria-label': 'queue' });
    api.listQueues().then(({ queues }) => {
      for (const x of queues) queueSelect.append(h('option', { value: x.name, selected: x.name === q.queue }, x.name));
    }).catch(() => {});
    const partition = h('input', { type: 'search', placeholder: 'partition', value: q.partition, 'aria-label': 'partition' });
    partition.addEventListener('change', () => set({ partition: partition.value, offset: 0 }));
    const filters = h('div', { class: 'filters' }, queueSelect, partition,
      select(statuses, q.status, (v) => set({ status: v, offset: 0 }), { 'aria-label': 'status' }),
      select(windows, q.window, (v) => set({ window: v, offset: 0 }), { 'aria-label': 'time window' }));

    const open = (m) => set({ pid: m.partitionId, tid: m.transactionId });
    const offset = Number(q.offset) || 0;

    const list = panel('Messages', () => api.listMessages({
      queue: q.queue, partition: q.partition, status: q.status, limit: PAGE, offset, ...range(Number(q.window) || 60),
    }), (page) => {
      const fresh = new Set();
      for (const m of page.messages) if (!first && !seen.has(m.id)) fresh.add(m.id);
      for (const m of page.messages) seen.add(m.id);
      first = false;
      if (!page.messages.length) return offset ? 'No more messages.' : 'No message matches in this window. New ones appear here as they are pushed.';
      return h('div', {},
        page.mode.type === 'bus' ? h('p', { class: 'hint' }, `Bus mode: ${page.mode.busGroupsCount} consumer group(s) read these partitions; a message is completed once every group consumed it.`) : null,
        table([
          ['Created', (m) => time(m.createdAt)],
          ['Queue', (m) => link(`/queues/${encodeURIComponent(m.queue)}`, null, m.queue)],
          ['Partition', (m) => m.partition],
          ['Transaction', (m) => h('a', { href: '#', class: 'mono', onclick: (ev) => { ev.preventDefault(); open(m); } }, m.transactionId)],
          ['Status', (m) => chip(m.status)],
          ['Groups', (m) => (m.busStatus.totalGroups ? `${m.busStatus.consumedBy}/${m.busStatus.totalGroups}` : '–'), { class: 'n' }],
        ], page.messages, {
          rowAttrs: (m) => ({
            class: `clickable${fresh.has(m.id) ? ' fresh' : ''}${m.transactionId === q.tid ? ' selected' : ''}`,
            dataset: { tx: m.transactionId, status: m.status },
            onclick: (ev) => { if (ev.target.tagName !== 'A') open(m); },
          }),
        }),
        h('div', { class: 'pager' },
          offset > 0 ? h('button', { onclick: () => set({ offset: Math.max(0, offset - PAGE) }) }, '← Newer') : null,
          h('span', { class: 'muted' }, `${num(offset + 1)}–${num(offset + page.messages.length)}`),
          page.pagination.hasMore ? h('button', { onclick: () => set({ offset: offset + PAGE }) }, 'Older →') : null));
    }, { actions: filters });

    const drawer = h('aside', { class: 'drawer', hidden: !q.pid });
    if (q.pid && q.tid) loadDetail(drawer, q.pid, q.tid, ctx, () => set({ pid: '', tid: '' }));

    el.append(h('div', { class: q.pid ? 'with-drawer' : '' }, list.el, drawer));
    return { refresh: (force) => list.refresh(force) };
  },
};

async function loadDetail(drawer, pid, tid, ctx, close) {
  drawer.replaceChildren(loading('Loading message…'));
  let m;
  try {
    m = await api.getMessage(pid, tid);
  } catch (e) {
    drawer.replaceChildren(h('button', { class: 'close', onclick: close, 'aria-label': 'close' }, '×'), errorState(e));
    return;
  }
  const reload = () => loadDetail(drawer, pid, tid, ctx, close);
  const actions = [];
  if (ctx.can('read-write')) {
    if (m.status === 'dead_letter') {
      actions.push(h('button', {
        class: 'primary', onclick: async (ev) => {
          const r = await act(ev.target, () => api.retryMessage(pid, tid, {}), (x) => `Retried: replayed as ${x.replayedAs.transaction_id} (${x.result}).`);
          if (r) { ctx.refresh(); reload(); }
        },
      }, 'Retry'));
    }
    if (m.status === 'pending') {
      actions.push(h('button', {
        onclick: async (ev) => {
          if (!await confirm({ title: 'Move to the dead-letter queue?', text: `Message ${tid} is dead-lettered for the queue-mode consumers, which skip it.`, ok: 'Move to DLQ' })) return;
          const r = await act(ev.target, () => api.moveMessageToDLQ(pid, tid, { errorMessage: 'moved from the dashboard' }), (x) => `Moved to DLQ (${x.result}).`);
          if (r) { ctx.refresh(); reload(); }
        },
      }, 'Move to DLQ'));
    }
    actions.push(h('button', {
      class: 'danger', onclick: async (ev) => {
        if (!await confirm({ title: 'Delete this message?', text: `Message ${tid} of ${m.queuePath} is deleted with its dead-letter and trace rows. It cannot be undone.`, ok: 'Delete message' })) return;
        const r = await act(ev.target, () => api.deleteMessage(pid, tid), (x) => x.message);
        if (r) { ctx.refresh(); close(); }
      },
    }, 'Delete'));
  }
  const traces = h('div', {}, loading('Loading traces…'));
  api.getMessageTraces(pid, tid).then((t) => traces.replaceChildren(t.traces.length
    ? h('ol', { class: 'timeline' }, t.traces.map((e) => h('li', {}, h('time', {}, time(e.created_at)), ' ', chip(e.event_type, 'event'), ' ',
      e.consumer_group, ' ', h('span', { class: 'muted' }, (e.trace_names || []).join(', ')), json(e.data))))
    : h('p', { class: 'muted' }, 'No trace recorded.'))).catch((e) => traces.replaceChildren(errorState(e)));

  const kv = [
    ['Status', chip(m.status)], ['Queue', link(`/queues/${encodeURIComponent(m.queue)}`, null, m.queue)], ['Partition', m.partition],
    ['Transaction id', h('span', { class: 'mono' }, m.transactionId)], ['Message id', h('span', { class: 'mono' }, m.id)],
    ['Partition id', h('span', { class: 'mono' }, m.partitionId)], ['Created', `${time(m.createdAt)} (${ago(m.createdAt)})`],
    ['Trace id', m.traceId || '–'], ['Producer', m.producerSub || '–'], ['Lease expires', m.leaseExpiresAt ? time(m.leaseExpiresAt) : '–'],
    ...(m.errorMessage || m.retryCount !== null ? [['Error', m.errorMessage || '–'], ['Retries', String(m.retryCount ?? '–')]] : []),
  ];
  drawer.replaceChildren(
    h('div', { class: 'drawer-head' }, h('h2', {}, 'Message'), h('button', { class: 'close', onclick: close, 'aria-label': 'close' }, '×')),
    h('dl', { class: 'config' }, kv.flatMap(([k, v]) => [h('dt', {}, k), h('dd', {}, v)])),
    actions.length ? h('div', { class: 'actions' }, actions) : null,
    h('h3', {}, 'Payload', m.isEncrypted ? h('span', { class: 'muted' }, ' (encrypted at rest)') : null),
    h('div', { class: 'payload', dataset: { payload: '' } }, json(m.payload)),
    h('h3', {}, 'Consumer groups'),
    m.consumerGroups.length
      ? table([['Group', (g) => g.name], ['Consumed', (g) => (g.consumed ? 'yes' : 'no')], ['Lease', (g) => (g.leaseExpiresAt ? time(g.leaseExpiresAt) : '–')]], m.consumerGroups)
      : h('p', { class: 'muted' }, 'No consumer has a cursor on this partition.'),
    h('h3', {}, 'Traces'), traces);
  drawer.hidden = false;
}
