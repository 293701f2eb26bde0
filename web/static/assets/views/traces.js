// Traces: pick a trace name, see its events in time order across messages.

import { api } from '../api.js';
import { h, panel, stats, num, time, ago, chip, json, link } from '../ui.js';

const PAGE = 50;

export default {
  title: 'Traces',
  mount(el, ctx) {
    const name = ctx.query.name || '';
    const offset = Number(ctx.query.offset) || 0;
    const set = (patch) => ctx.go('/traces', { name, ...patch });
    const input = h('input', { type: 'search', placeholder: 'trace name', value: name, 'aria-label': 'trace name' });
    input.addEventListener('change', () => set({ name: input.value, offset: 0 }));

    const names = panel('Trace names', () => api.listTraceNames({ limit: 50 }), (p) => {
      if (!p.trace_names.length) return 'No trace recorded yet. Consumers record events with POST /api/v1/traces and traceNames.';
      return h('div', { class: 'chips' }, p.trace_names.map((t) => h('a', {
        class: `chip chip-name${t.trace_name === name ? ' active' : ''}`, href: `#/traces?name=${encodeURIComponent(t.trace_name)}`,
        title: `${t.trace_count} event(s) on ${t.message_count} message(s), last ${ago(t.last_seen)}`,
      }, `${t.trace_name} (${t.trace_count})`)));
    }, { actions: input });

    const timeline = panel(name ? `Timeline of “${name}”` : 'Timeline', async () => (name ? api.listTracesByName(name, { limit: PAGE, offset }) : null), (p) => {
      if (!p) return 'Pick a trace name to see its events.';
      if (!p.traces.length) return `No event carries the name “${name}”.`;
      const msgs = new Set(p.traces.map((e) => e.transaction_id));
      const queues = new Set(p.traces.map((e) => e.queue_name));
      return h('div', {},
        stats([['Events', num(p.total)], ['Messages', num(msgs.size)], ['Queues', num(queues.size)]]),
        h('ol', { class: 'timeline' }, p.traces.map((e) => h('li', { dataset: { event: e.event_type } },
          h('time', { title: e.created_at }, time(e.created_at)), ' ',
          chip(e.event_type, 'event'), ' ',
          h('strong', {}, (e.data && typeof e.data === 'object' && e.data.text) || ''), ' ',
          h('span', { class: 'muted' }, `${e.consumer_group}${e.worker_id ? ` · worker ${e.worker_id}` : ''} · `),
          link('/messages', { queue: e.queue_name, pid: e.partition_id, tid: e.transaction_id, window: 10080 }, `${e.queue_name}/${e.partition_name} ${e.transaction_id}`),
          (e.trace_names || []).length > 1 ? h('span', { class: 'muted' }, ` · ${e.trace_names.join(', ')}`) : null,
          e.data && !(typeof e.data === 'object' && Object.keys(e.data).length === 1 && e.data.text) ? json(e.data) : null))),
        h('div', { class: 'pager' },
          offset > 0 ? h('button', { onclick: () => set({ offset: Math.max(0, offset - PAGE) }) }, '← Earlier') : null,
          h('span', { class: 'muted' }, `${num(offset + 1)}–${num(offset + p.traces.length)} of ${num(p.total)}`),
          offset + p.traces.length < p.total ? h('button', { onclick: () => set({ offset: offset + PAGE }) }, 'Later →') : null));
    });

    el.append(names.el, timeline.el);
    return { refresh: (force) => Promise.all([names, timeline].map((p) => p.refresh(force))) };
  },
};
