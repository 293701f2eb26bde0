// Dead letters: what failed, why, and its payload; retry (replay into the
// queue) or purge, each confirmed and reported.

import { api } from '../api.js';
import { h, panel, stats, num, table, time, ago, json, confirm, act, link, short } from '../ui.js';

const PAGE = 100;

export default {
  title: 'Dead letters',
  mount(el, ctx) {
    const q = { queue: '', consumerGroup: '', offset: '0', ...ctx.query };
    const set = (patch) => ctx.go('/dlq', { ...q, ...patch });
    const offset = Number(q.offset) || 0;
    const openRows = new Set(q.open ? [q.open] : []);

    const field = (name, placeholder) => {
      const input = h('input', { type: 'search', placeholder, value: q[name], 'aria-label': placeholder });
      input.addEventListener('change', () => set({ [name]: input.value, offset: 0 }));
      return input;
    };
    const filters = h('div', { class: 'filters' }, field('queue', 'queue'), field('consumerGroup', 'consumer group'));

    const retry = async (d, btn) => {
      const r = await act(btn, () => api.retryMessage(d.partitionId, d.transactionId, { consumerGroup: d.consumerGroup }),
        (x) => `Retried ${d.transactionId}: replayed into ${x.queue}/${x.partition} as ${x.replayedAs.transaction_id} (${x.result}).`);
      if (r) ctx.refresh();
    };
    const purge = async (d, btn) => {
      const ok = await confirm({
        title: 'Purge this dead letter?',
        text: `Message ${d.transactionId} of ${d.queue}/${d.partition} is deleted with its dead-letter and trace rows. It cannot be undone.`,
        ok: 'Purge',
      });
      if (!ok) return;
      const r = await act(btn, () => api.deleteMessage(d.partitionId, d.transactionId), (x) => x.message);
      if (r) ctx.refresh();
    };

    const list = panel('Dead letters', () => api.listDeadLetters({ queue: q.queue, consumerGroup: q.consumerGroup, limit: PAGE, offset }), (page) => {
      if (!page.messages.length) return offset ? 'No more dead letters.' : 'No dead letters. Messages land here when a consumer fails them past the retry limit.';
      const rows = [];
      for (const d of page.messages) {
        const key = `${d.partitionId}/${d.transactionId}/${d.consumerGroup}`;
        const toggle = () => { openRows.has(key) ? openRows.delete(key) : openRows.add(key); list.refresh(true); };
        rows.push(h('tr', { class: 'clickable', dataset: { tx: d.transactionId }, onclick: (ev) => { if (ev.target.tagName !== 'BUTTON' && ev.target.tagName !== 'A') toggle(); } },
          h('td', {}, h('span', { title: time(d.failedAt) }, ago(d.failedAt))),
          h('td', {}, link(`/queues/${encodeURIComponent(d.queue)}`, null, d.queue), ' / ', d.partition),
          h('td', {}, d.consumerGroup),
          h('td', { class: 'error-text' }, d.errorMessage || '–'),
          h('td', { class: 'n' }, num(d.retryCount)),
          h('td', { class: 'mono' }, link('/messages', { queue: d.queue, status: 'dead_letter', pid: d.partitionId, tid: d.transactionId, window: 10080 }, d.transactionId)),
          h('td', { class: 'actions' },
            ctx.can('read-write') ? h('button', { class: 'primary small', onclick: (ev) => retry(d, ev.target) }, 'Retry') : null,
            ctx.can('read-write') ? h('button', { class: 'danger small', onclick: (ev) => purge(d, ev.target) }, 'Purge') : null)));
        if (openRows.has(key)) {
          rows.push(h('tr', { class: 'detail' }, h('td', { colspan: 7 },
            h('div', { class: 'payload', dataset: { payload: d.transactionId } }, json(d.data)),
            h('p', { class: 'muted' }, `message ${d.id} · created ${time(d.createdAt)} · producer ${d.producerSub || '–'} · partition ${short(d.partitionId)}`))));
        }
      }
      return h('div', {},
        stats([['Dead letters', num(page.total)], ['Queues', num(new Set(page.messages.map((d) => d.queue)).size)], ['Groups', num(new Set(page.messages.map((d) => d.consumerGroup)).size)]]),
        h('div', { class: 'table-wrap' }, h('table', {},
          h('thead', {}, h('tr', {}, ['Failed', 'Queue / partition', 'Group', 'Error', 'Retries', 'Transaction', ''].map((t) => h('th', {}, t)))),
          h('tbody', {}, rows))),
        h('div', { class: 'pager' },
          offset > 0 ? h('button', { onclick: () => set({ offset: Math.max(0, offset - PAGE) }) }, '← Newer') : null,
          h('span', { class: 'muted' }, `${num(offset + 1)}–${num(offset + page.messages.length)} of ${num(page.total)}`),
          offset + page.messages.length < page.total ? h('button', { onclick: () => set({ offset: offset + PAGE }) }, 'Older →') : null));
    }, { actions: filters });

    const errors = panel('Top errors', () => api.getStatus(), (s) => {
      const top = s.deadLetterQueue.topErrors || [];
      if (!top.length) return 'No error recorded.';
      return table([['Error', (e) => e.error], ['Count', (e) => num(e.count), { class: 'n' }]], top);
    });

    el.append(list.el, errors.el);
    return { refresh: (force) => Promise.all([list, errors].map((p) => p.refresh(force))) };
  },
};
