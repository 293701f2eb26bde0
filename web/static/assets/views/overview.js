// Overview: counts, the last hour's throughput, the busiest queues and the
// consumer groups that lag most.

import { api, range } from '../api.js';
import { h, panel, stats, num, dec, table, link, seconds, chip } from '../ui.js';
import { chart } from '../charts.js';

export default {
  title: 'Overview',
  mount(el) {
    const counts = panel('Cluster', api.getOverview, (o) => h('div', {},
      stats([
        ['Queues', num(o.queues)],
        ['Partitions', num(o.partitions)],
        ['Messages', num(o.messages.total)],
        ['Pending', num(o.messages.pending)],
        ['Processing', num(o.messages.processing)],
        ['Completed', num(o.messages.completed)],
        ['Failed', num(o.messages.failed)],
        ['Dead letters', num(o.messages.deadLetter)],
        ['In / s', dec(o.throughput.ingestedPerSecond), 'last 5 min'],
        ['Out / s', dec(o.throughput.processedPerSecond), 'last 5 min'],
      ]),
      o.queues === 0 ? h('p', { class: 'hint' }, 'The database is empty: no queue exists yet. A first push (POST /api/v1/push) creates its queue.') : null));

    const flow = panel('Throughput, last hour', () => api.getStatus(range(60)), (s) => h('div', { class: 'charts-2' },
      chart({
        title: 'Messages per second', points: s.throughput, x: (p) => p.timestamp,
        series: [
          { label: 'ingested', value: (p) => p.ingestedPerSecond },
          { label: 'popped', value: (p) => p.popPerSecond },
          { label: 'acked', value: (p) => p.processedPerSecond },
        ],
      }),
      chart({
        title: 'Pop lag (ms)', points: s.throughput, x: (p) => p.timestamp,
        series: [{ label: 'avg', value: (p) => p.avgLagMs }, { label: 'max', value: (p) => p.maxLagMs }],
      })));

    const top = panel('Top queues by pending', () => api.listQueues(), ({ queues }) => {
      if (!queues.length) return 'No queues yet.';
      const rows = [...queues].sort((a, b) => b.messages.pending - a.messages.pending).slice(0, 6);
      return table([
        ['Queue', (q) => link(`/queues/${encodeURIComponent(q.name)}`, null, q.name)],
        ['Pending', (q) => num(q.messages.pending), { class: 'n' }],
        ['Processing', (q) => num(q.messages.processing), { class: 'n' }],
        ['Total', (q) => num(q.messages.total), { class: 'n' }],
        ['Dead letters', (q) => num(q.messages.deadLetter), { class: 'n' }],
      ], rows);
    });

    const groups = panel('Consumer groups by lag', api.listConsumerGroups, (rows) => {
      if (!rows || !rows.length) return 'No consumer group has read anything yet.';
      const sorted = [...rows].sort((a, b) => b.maxTimeLag - a.maxTimeLag).slice(0, 8);
      return table([
        ['Group', (g) => link('/consumers', { group: g.name }, g.name)],
        ['Queue', (g) => g.queueName],
        ['State', (g) => chip(g.state, g.state.toLowerCase())],
        ['Lag (msgs)', (g) => num(g.totalLag), { class: 'n' }],
        ['Max time lag', (g) => seconds(g.maxTimeLag), { class: 'n' }],
      ], sorted);
    });

    el.append(counts.el, flow.el, h('div', { class: 'grid-2' }, top.el, groups.el));
    return { refresh: (force) => Promise.all([counts, flow, top, groups].map((p) => p.refresh(force))) };
  },
};
