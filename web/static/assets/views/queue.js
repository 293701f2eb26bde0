// Queue detail: options, totals, partitions, the consumer groups reading it
// and its last hour of operations.

import { api, range } from '../api.js';
import { h, panel, stats, num, table, link, ago, seconds, chip, confirm, act } from '../ui.js';
import { chart } from '../charts.js';

const yes = (b) => (b ? 'yes' : 'no');

export default {
  title: 'Queue',
  mount(el, ctx) {
    const name = ctx.params.name;
    const enc = encodeURIComponent(name);

    const remove = async (btn) => {
      const ok = await confirm({
        title: `Delete queue ${name}?`,
        text: 'This deletes every partition, message, cursor and dead letter of the queue. It cannot be undone.',
        ok: 'Delete queue', typeToConfirm: name,
      });
      if (!ok) return;
      const r = await act(btn, () => api.deleteQueue(name), (res) => (res.existed ? `Queue ${name} deleted.` : `Queue ${name} did not exist.`));
      if (r) ctx.go('/queues');
    };

    const head = h('div', { class: 'view-head' },
      h('h2', { class: 'queue-name' }, name),
      h('div', { class: 'actions' },
        h('a', { class: 'button', href: `#/messages?queue=${enc}` }, 'Messages'),
        h('a', { class: 'button', href: `#/dlq?queue=${enc}` }, 'Dead letters'),
        h('a', { class: 'button', href: `#/analytics?queue=${enc}` }, 'Analytics'),
        ctx.can('admin') ? h('button', { class: 'danger', onclick: (ev) => remove(ev.target) }, 'Delete queue') : null));

    const summary = panel('Summary', () => api.getQueue(name), (q) => {
      const o = q.options;
      return h('div', {},
        stats([
          ['Partitions', num(q.totals.partitions)],
          ['Messages', num(q.totals.total)],
          ['Pending', num(q.totals.pending)],
          ['Dead letters', num(q.totals.deadLetter)],
        ]),
        h('dl', { class: 'config' },
          ...[
            ['Namespace', q.namespace || '–'], ['Task', q.task || '–'], ['Created', ago(q.createdAt)],
            ['Priority', o.priority], ['Lease time', seconds(o.leaseTime)], ['TTL', seconds(o.ttl)],
            ['Max size', o.maxSize ? num(o.maxSize) : '∞'], ['Retry limit', o.retryLimit], ['Retry delay', `${o.retryDelay} ms`],
            ['Dead-letter queue', yes(o.deadLetterQueue)], ['Encryption', yes(o.encryptionEnabled)],
            ['Retention', o.retentionEnabled ? seconds(o.retentionSeconds) : 'off'],
          ].flatMap(([k, v]) => [h('dt', {}, k), h('dd', {}, String(v))])));
    });

    const parts = panel('Partitions', () => api.listPartitions({ queue: name, limit: 1000 }), (p) => {
      if (!p.partitions.length) return 'No partition yet.';
      return h('div', {},
        table([
          ['Partition', (r) => link('/messages', { queue: name, partition: r.partition }, r.partition)],
          ['Messages', (r) => num(r.total), { class: 'n' }],
          ['Pending', (r) => num(r.pending), { class: 'n' }],
          ['Processing', (r) => num(r.processing), { class: 'n' }],
          ['Dead letters', (r) => num(r.deadLetter), { class: 'n' }],
          ['Oldest pending', (r) => (r.lagSeconds ? seconds(r.lagSeconds) : '–'), { class: 'n' }],
          ['Last message', (r) => ago(r.lastMessageAt)],
        ], p.partitions),
        p.truncated ? h('p', { class: 'hint' }, `Showing ${p.partitions.length} of ${num(p.total)} partitions.`) : null);
    });

    const groups = panel('Consumer groups', api.listConsumerGroups, (rows) => {
      const mine = (rows || []).filter((g) => g.queueName === name);
      if (!mine.length) return 'No consumer group reads this queue yet.';
      return table([
        ['Group', (g) => link('/consumers', { queue: name, group: g.name }, g.name)],
        ['State', (g) => chip(g.state, g.state.toLowerCase())],
        ['Partitions with cursor', (g) => num(g.members), { class: 'n' }],
        ['Partitions with lag', (g) => num(g.partitionsWithLag), { class: 'n' }],
        ['Lag (msgs)', (g) => num(g.totalLag), { class: 'n' }],
        ['Max time lag', (g) => seconds(g.maxTimeLag), { class: 'n' }],
      ], mine);
    });

    const ops = panel('Last hour', () => api.getQueueOps({ ...range(60), queue: name }), (r) => h('div', { class: 'charts-2' },
      chart({
        title: 'Messages per second', points: r.series, x: (p) => p.bucket,
        series: [
          { label: 'push', value: (p) => p.pushPerSecond },
          { label: 'pop', value: (p) => p.popPerSecond },
          { label: 'ack', value: (p) => p.ackPerSecond },
        ],
      }),
      chart({
        title: 'Pop lag (ms)', points: r.series, x: (p) => p.bucket,
        series: [{ label: 'avg', value: (p) => p.avgLagMs }, { label: 'max', value: (p) => p.maxLagMs }],
      })));

    el.append(head, summary.el, parts.el, groups.el, ops.el);
    return { refresh: (force) => Promise.all([summary, parts, groups, ops].map((p) => p.refresh(force))) };
  },
};
