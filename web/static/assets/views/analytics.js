// Analytics: throughput, lag, errors, per-queue operations and retention over
// a range the user picks.

import { api, range } from '../api.js';
import { h, panel, stats, num, dec } from '../ui.js';
import { chart, pivot } from '../charts.js';

const ranges = [['15', '15 min'], ['60', '1 hour'], ['360', '6 hours'], ['1440', '24 hours'], ['10080', '7 days']];

export default {
  title: 'Analytics',
  mount(el, ctx) {
    const q = { range: '60', queue: '', ...ctx.query };
    const set = (patch) => ctx.go('/analytics', { ...q, ...patch });
    const minutes = Number(q.range) || 60;
    const queue = h('input', { type: 'search', placeholder: 'all queues', value: q.queue, 'aria-label': 'queue' });
    queue.addEventListener('change', () => set({ queue: queue.value }));
    const controls = h('div', { class: 'filters' },
      h('div', { class: 'segmented', role: 'group', 'aria-label': 'range' }, ranges.map(([v, label]) =>
        h('button', { class: v === String(minutes) ? 'active' : '', 'aria-pressed': String(v === String(minutes)), onclick: () => set({ range: v }) }, label))),
      queue);
    const win = () => ({ ...range(minutes), queue: q.queue });

    const status = panel('Throughput', () => api.getStatus(win()), (s) => h('div', {},
      stats([
        ['Messages stored', num(s.messages.total), 'lifetime'],
        ['Pending', num(s.messages.pending)],
        ['Completed', num(s.messages.completed), 'lifetime'],
        ['Failed', num(s.messages.failed), 'lifetime'],
        ['Dead-lettered', num(s.messages.deadLetter), 'lifetime'],
        ['Push batch', dec(s.messages.batchEfficiency.push), 'msgs / request'],
        ['Pop batch', dec(s.messages.batchEfficiency.pop), 'msgs / request'],
        ['Bucket', `${s.bucketMinutes} min`],
      ]),
      h('div', { class: 'charts-2' },
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
        }),
        chart({
          title: 'Errors', points: s.throughput, x: (p) => p.timestamp,
          series: [
            { label: 'ack failed', value: (p) => p.ackFailed },
            { label: 'dead-lettered', value: (p) => p.dlqCount },
            { label: 'db errors', value: (p) => p.dbErrors },
          ],
        }),
        chart({
          title: 'Broker CPU (%) and DB pool', points: s.throughput, x: (p) => p.timestamp,
          series: [
            { label: 'cpu user %', value: (p) => p.queenCpuUserPct },
            { label: 'pool active', value: (p) => p.dbPoolActive },
          ],
        }))));

    const ops = panel('Per queue', () => api.getQueueOps(win()), (r) => {
      const push = pivot(r.series, (p) => p.bucket, (p) => p.queueName, (p) => p.pushPerSecond);
      const pop = pivot(r.series, (p) => p.bucket, (p) => p.queueName, (p) => p.popPerSecond);
      const parked = pivot(r.series, (p) => p.bucket, (p) => p.queueName, (p) => p.parkedCount);
      return h('div', { class: 'charts-2' },
        chart({ title: 'Push / s by queue', ...push }),
        chart({ title: 'Pop / s by queue', ...pop }),
        chart({ title: 'Parked long-polls by queue', ...parked }));
    });

    const brokers = panel('Brokers', () => api.getWorkerMetrics({ from: win().from, to: win().to }), (r) => h('div', {},
      stats([
        ['Brokers reporting', num(r.workers.length), 'last 5 min'],
        ['Pushed', num(r.summary.totalPushMessages), 'lifetime'],
        ['Popped', num(r.summary.totalPopMessages), 'lifetime'],
        ['Acked', num(r.summary.totalAckMessages), 'lifetime'],
        ['DB errors', num(r.summary.totalDbErrors), 'lifetime'],
      ]),
      h('div', { class: 'charts-2' },
        chart({
          title: 'Scheduler lag (ms)', points: r.timeSeries, x: (p) => p.timestamp,
          series: [{ label: 'avg', value: (p) => p.avgEventLoopLagMs }, { label: 'max', value: (p) => p.maxEventLoopLagMs }],
        }),
        chart({
          title: 'Database connections and queued work', points: r.timeSeries, x: (p) => p.timestamp,
          series: [{ label: 'connections', value: (p) => p.dbConnections }, { label: 'queued work (max)', value: (p) => p.maxJobQueueSize }],
        }))));

    const retention = panel('Retention', () => api.getRetentionAnalytics(win()), (r) => h('div', {},
      stats([
        ['Deleted by retention', num(r.totals.retentionMsgs)],
        ['Completed retention', num(r.totals.completedRetentionMsgs)],
        ['Evicted (max wait)', num(r.totals.evictionMsgs)],
      ]),
      chart({
        title: 'Messages deleted', points: r.series, x: (p) => p.bucket,
        series: [
          { label: 'retention', value: (p) => p.retentionMsgs },
          { label: 'completed', value: (p) => p.completedRetentionMsgs },
          { label: 'eviction', value: (p) => p.evictionMsgs },
        ],
      })));

    el.append(controls, status.el, ops.el, brokers.el, retention.el);
    return { refresh: (force) => Promise.all([status, ops, brokers, retention].map((p) => p.refresh(force))) };
  },
};
