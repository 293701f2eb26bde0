// Consumer groups: one row per (group, queue) with its lag; move a group to
// a time or to the end of a queue, or delete its cursors (confirmed);
// lagging partitions.

import { api } from '../api.js';
import { h, panel, num, dec, table, link, seconds, time, chip, confirm, act } from '../ui.js';

// LAGGING_ROWS is how many lagging pairs the page lists.
const LAGGING_ROWS = 100;

export default {
  title: 'Consumer groups',
  mount(el, ctx) {
    const q = { group: '', queue: '', minLag: '3600', ...ctx.query };
    const set = (patch) => ctx.go('/consumers', { ...q, ...patch });
    const search = h('input', { type: 'search', placeholder: 'group or queue', value: q.group || q.queue, 'aria-label': 'filter groups' });
    search.addEventListener('change', () => set({ group: search.value, queue: '' }));

    const toEnd = async (g, btn) => {
      const ok = await confirm({
        title: `Move ${g.name} to now?`,
        text: `The cursors of ${g.name} on every partition of ${g.queueName} move to the newest message: everything not yet consumed is skipped.`,
        ok: 'Skip to now',
      });
      if (!ok) return;
      const r = await act(btn, () => api.seekConsumerGroup(g.name, g.queueName, { toEnd: true }), (x) => `${x.partitionsUpdated} partition cursor(s) of ${g.name} moved to the end of ${g.queueName}.`);
      if (r) ctx.refresh();
    };
    // seek moves the group's cursors on every partition of the queue to the
    // last message at or before a time; what follows it is delivered again.
    const seek = async (g, btn) => {
      const at = h('input', { type: 'datetime-local', step: 1, value: localInput(new Date(Date.now() - 3600000)), 'aria-label': 'seek time', dataset: { seek: '' } });
      const ok = await confirm({
        title: `Seek ${g.name} on ${g.queueName}`,
        text: 'Every partition cursor of the group moves to the last message at or before this time (your browser\'s time zone): messages after it are delivered again, earlier ones are skipped.',
        ok: 'Seek',
        extra: h('label', { class: 'field' }, h('span', {}, 'Time'), at),
        canConfirm: () => !Number.isNaN(new Date(at.value).getTime()),
      });
      if (!ok) return;
      const when = new Date(at.value);
      const r = await act(btn, () => api.seekConsumerGroup(g.name, g.queueName, { timestamp: when.toISOString() }),
        (x) => `${x.partitionsUpdated} partition cursor(s) of ${g.name} moved to ${time(when.toISOString())}.`);
      if (r) ctx.refresh();
    };
    const remove = async (g, btn) => {
      const ok = await confirm({
        title: `Delete ${g.name} on ${g.queueName}?`,
        text: `Its cursors and subscription on ${g.queueName} are deleted; the group starts over by its subscription mode on its next pop.`,
        ok: 'Delete group',
      });
      if (!ok) return;
      const r = await act(btn, () => api.deleteConsumerGroupForQueue(g.name, g.queueName, true), (x) => `${x.deletedPartitions} cursor(s) of ${x.consumerGroup} deleted.`);
      if (r) ctx.refresh();
    };

    const groups = panel('Groups', api.listConsumerGroups, (rows) => {
      if (!rows || !rows.length) return 'No consumer group yet: groups appear when a consumer pops with a consumerGroup, or in queue mode (__QUEUE_MODE__).';
      const s = (q.group || q.queue).toLowerCase();
      const mine = rows.filter((g) => !s || g.name.toLowerCase().includes(s) || g.queueName.toLowerCase().includes(s));
      if (!mine.length) return `No group matches “${s}”.`;
      return table([
        ['Group', (g) => g.name],
        ['Queue', (g) => link(`/queues/${encodeURIComponent(g.queueName)}`, null, g.queueName)],
        ['State', (g) => chip(g.state, g.state.toLowerCase())],
        ['Partitions with cursor', (g) => num(g.members), { class: 'n' }],
        ['Partitions with lag', (g) => num(g.partitionsWithLag), { class: 'n' }],
        ['Lag (msgs)', (g) => num(g.totalLag), { class: 'n' }],
        ['Max time lag', (g) => seconds(g.maxTimeLag), { class: 'n' }],
        ['Subscription', (g) => (g.subscriptionMode ? `${g.subscriptionMode}${g.subscriptionTimestamp ? ` since ${time(g.subscriptionTimestamp)}` : ''}` : '–')],
        ['', (g) => h('span', { class: 'actions' },
          ctx.can('read-write') ? h('button', { class: 'small', dataset: { action: 'seek' }, onclick: (ev) => seek(g, ev.target) }, 'Seek…') : null,
          ctx.can('read-write') ? h('button', { class: 'small', onclick: (ev) => toEnd(g, ev.target) }, 'Skip to now') : null,
          ctx.can('admin') ? h('button', { class: 'danger small', onclick: (ev) => remove(g, ev.target) }, 'Delete') : null)],
      ], mine, { rowAttrs: (g) => ({ dataset: { group: g.name, queue: g.queueName } }) });
    }, { actions: search });

    const threshold = h('input', { type: 'number', min: 0, value: q.minLag, 'aria-label': 'minimum lag in seconds', class: 'narrow' });
    threshold.addEventListener('change', () => set({ minLag: threshold.value }));
    // The worst LAGGING_ROWS pairs, asked for with one more to tell whether
    // there are others: a deep backlog has a pair per partition and group.
    const lagging = panel('Lagging partitions', () => api.listLaggingPartitions(Number(q.minLag) || 0, LAGGING_ROWS + 1), (all) => {
      if (!all || !all.length) return `No partition lags more than ${seconds(Number(q.minLag) || 0)}.`;
      const more = all.length > LAGGING_ROWS;
      const rows = more ? all.slice(0, LAGGING_ROWS) : all;
      const note = more ? h('p', { class: 'hint', dataset: { more: '' } }, `The ${num(LAGGING_ROWS)} that lag longest; more lag over ${seconds(Number(q.minLag) || 0)}.`) : null;
      return h('div', {}, note, table([
        ['Group', (r) => r.consumer_group],
        ['Queue', (r) => r.queue_name],
        ['Partition', (r) => r.partition_name],
        ['Lag (msgs)', (r) => num(r.offset_lag), { class: 'n' }],
        ['Time lag', (r) => seconds(r.time_lag_seconds), { class: 'n' }],
        ['Hours', (r) => dec(r.lag_hours), { class: 'n' }],
        ['Last consumed', (r) => time(r.last_consumed_at)],
      ], rows));
    }, { actions: h('label', { class: 'inline' }, 'older than ', threshold, ' s') });

    el.append(groups.el, lagging.el);
    return { refresh: (force) => Promise.all([groups, lagging].map((p) => p.refresh(force))) };
  },
};

// localInput formats d for a datetime-local input, in the browser's zone.
function localInput(d) {
  const p = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}
