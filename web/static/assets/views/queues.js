// Queues: every queue with its counts and the last 15 minutes' rates;
// search, and delete (admin, confirmed).

import { api, range } from '../api.js';
import { h, panel, num, dec, table, link, ago, confirm, act } from '../ui.js';

export default {
  title: 'Queues',
  mount(el, ctx) {
    let search = ctx.query.q || '';
    const input = h('input', { type: 'search', placeholder: 'Filter by name, namespace or task', value: search, 'aria-label': 'filter queues' });
    input.addEventListener('input', () => { search = input.value; list.refresh(true); });

    // Rates per queue over the last 15 minutes; optional (analytics may be off).
    const rates = async () => {
      try {
        const ops = await api.getQueueOps(range(15));
        const out = {};
        for (const p of ops.series) {
          const r = (out[p.queueName] ||= { push: 0, pop: 0, maxLag: 0 });
          r.push += p.pushMessages; r.pop += p.popMessages; r.maxLag = Math.max(r.maxLag, p.maxLagMs);
        }
        return out;
      } catch { return null; }
    };

    const remove = async (q, btn) => {
      const ok = await confirm({
        title: `Delete queue ${q.name}?`,
        text: `This deletes its ${num(q.partitions)} partition(s), ${num(q.messages.total)} message(s), cursors and dead letters. It cannot be undone.`,
        ok: 'Delete queue', typeToConfirm: q.name,
      });
      if (!ok) return;
      await act(btn, () => api.deleteQueue(q.name), (r) => (r.existed ? `Queue ${r.queue} deleted.` : `Queue ${r.queue} did not exist.`));
      ctx.refresh();
    };

    const list = panel('Queues', async () => Promise.all([api.listQueues(), rates()]), ([{ queues }, r]) => {
      if (!queues.length) return 'No queues yet. Pushing to a queue name creates it.';
      const s = search.toLowerCase();
      const rows = queues.filter((q) => !s || [q.name, q.namespace, q.task].some((v) => (v || '').toLowerCase().includes(s)));
      if (!rows.length) return `No queue matches “${search}”.`;
      const rate = (q, k) => (r && r[q.name] ? dec(r[q.name][k] / 900) : (r ? '0.00' : '–'));
      return table([
        ['Queue', (q) => link(`/queues/${encodeURIComponent(q.name)}`, null, q.name)],
        ['Namespace', (q) => q.namespace || '–'],
        ['Task', (q) => q.task || '–'],
        ['Partitions', (q) => num(q.partitions), { class: 'n' }],
        ['Pending', (q) => num(q.messages.pending), { class: 'n' }],
        ['Processing', (q) => num(q.messages.processing), { class: 'n' }],
        ['Total', (q) => num(q.messages.total), { class: 'n' }],
        ['Dead letters', (q) => (q.messages.deadLetter ? link('/dlq', { queue: q.name }, num(q.messages.deadLetter)) : '0'), { class: 'n' }],
        ['Push/s (15m)', (q) => rate(q, 'push'), { class: 'n' }],
        ['Pop/s (15m)', (q) => rate(q, 'pop'), { class: 'n' }],
        ['Created', (q) => ago(q.createdAt)],
        ['', (q) => (ctx.can('admin') ? h('button', { class: 'danger small', onclick: (ev) => remove(q, ev.target) }, 'Delete') : '')],
      ], rows, { rowAttrs: (q) => ({ dataset: { queue: q.name } }) });
    }, { actions: input });

    el.append(list.el);
    return { refresh: (force) => list.refresh(force) };
  },
};
