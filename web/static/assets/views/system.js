// System: the maintenance switches, the disk buffer, this broker's process
// counters, per-broker gauges and PostgreSQL's statistics.

import { api, range } from '../api.js';
import { h, panel, stats, num, dec, bytes, seconds, table, confirm, act } from '../ui.js';
import { chart } from '../charts.js';

const gauge = (m, path) => path.split('.').reduce((o, k) => (o ? o[k] : undefined), m);

export default {
  title: 'System',
  mount(el, ctx) {
    const toggle = async (kind, on, input) => {
      const push = kind === 'push';
      if (on) {
        const ok = await confirm({
          title: push ? 'Turn push maintenance ON?' : 'Turn pop maintenance ON?',
          text: push
            ? 'Every push is written to the disk buffer instead of PostgreSQL until you turn it off; the buffer is then replayed into the database.'
            : 'Every pop answers "no messages" until you turn it off. Acks still work.',
          ok: 'Turn on',
        });
        if (!ok) { input.checked = false; return; }
      }
      await act(input, () => (push ? api.setMaintenance(on) : api.setPopMaintenance(on)), (r) => r.message || `${kind} maintenance ${on ? 'on' : 'off'}.`);
      ctx.refresh();
    };
    const switchFor = (kind, label, on, help) => {
      const input = h('input', { type: 'checkbox', role: 'switch', checked: on, 'aria-label': label, dataset: { maintenance: kind } });
      input.disabled = !ctx.can('admin');
      input.addEventListener('change', () => toggle(kind, input.checked, input));
      return h('label', { class: `switch${on ? ' on' : ''}` }, input, h('span', {}, h('strong', {}, label), ' ', h('span', { class: on ? 'chip chip-warn' : 'chip chip-ok' }, on ? 'ON' : 'off'), h('br'), h('span', { class: 'muted' }, help)));
    };

    const maintenance = panel('Maintenance', api.getMaintenance, (m) => h('div', {},
      h('div', { class: 'switches' },
        switchFor('push', 'Push maintenance', m.maintenanceMode, 'Pushes are buffered on disk, not written to PostgreSQL.'),
        switchFor('pop', 'Pop maintenance', m.popMaintenanceMode, 'Pops return no messages.')),
      stats([
        ['Buffered messages', num(m.bufferedMessages)],
        ['Buffer healthy', m.bufferHealthy ? 'yes' : 'no'],
        ...(m.bufferStats ? [
          ['Failed events', num(m.bufferStats.failedCount)],
          ['Failed files', m.bufferStats.failedFiles ? `${num(m.bufferStats.failedFiles.count)} (${dec(m.bufferStats.failedFiles.totalMB, 1)} MB)` : '–'],
        ] : []),
      ])));

    const buffers = panel('Disk buffer', api.getBuffers, (b) => h('div', {},
      stats([
        ['Pending records', num(b.pending), 'waiting for replay'],
        ['Failed files', num(b.failed), 'quarantined in failed/'],
        ['Database', b.dbHealthy ? 'reachable' : 'unreachable', "the buffer's view"],
        ...(b.writable === undefined ? [] : [['Writable', b.writable ? 'yes' : 'no']]),
        ...(b.drainPaused === undefined ? [] : [['Replay', b.drainPaused ? 'paused' : 'running']]),
      ]),
      b.note ? h('p', { class: 'hint' }, b.note) : null));

    const process = panel('This broker', api.getMetrics, (m) => {
      const queues = Object.entries(m.queues || {});
      return h('div', {},
        stats([
          ['Uptime', seconds(m.uptime)],
          ['Requests', num(m.requests.total), `${dec(m.requests.rate)} / s`],
          ['Messages', num(m.messages.total), `${dec(m.messages.rate)} / s`],
          ['DB pool', `${num(m.database.poolSize - m.database.idleConnections)} / ${num(m.database.poolSize)}`, 'in use / size'],
          ['Waiting for a connection', num(m.database.waitingRequests)],
          ['Memory (RSS)', bytes(m.memory.rss)],
          ['Go heap', bytes(m.memory.heapUsed)],
        ]),
        queues.length ? table([
          ['Queue', ([q]) => q], ['Pushed', ([, c]) => num(c.pushed), { class: 'n' }], ['Popped', ([, c]) => num(c.popped), { class: 'n' }],
          ['Acked', ([, c]) => num(c.acked), { class: 'n' }], ['Failed', ([, c]) => num(c.failed), { class: 'n' }], ['DLQ', ([, c]) => num(c.dlq), { class: 'n' }],
        ], queues) : null);
    });

    const brokers = panel('Brokers, last hour', () => api.getSystemMetrics(range(60)), (r) => {
      if (!r.replicas.length) return 'No broker has reported process metrics in the last hour yet (they are written once a minute).';
      const points = r.replicas.flatMap((rep) => rep.timeSeries.map((p) => ({ ...p, host: `${rep.hostname}:${rep.port}` })));
      const one = r.replicas.length === 1;
      const pick = (path, scale = 1) => (p) => { const v = gauge(p.metrics, path); return v && v.avg !== undefined ? v.avg / scale : null; };
      return h('div', {},
        table([
          ['Broker', (rep) => `${rep.hostname}:${rep.port}`], ['PID', (rep) => rep.pid],
          ['CPU user', (rep) => { const last = rep.timeSeries.at(-1); const v = last && gauge(last.metrics, 'cpu.user_us'); return v ? `${dec(v.last / 100)} %` : '–'; }, { class: 'n' }],
          ['RSS', (rep) => { const last = rep.timeSeries.at(-1); const v = last && gauge(last.metrics, 'memory.rss_bytes'); return v ? bytes(v.last) : '–'; }, { class: 'n' }],
          ['Points', (rep) => num(rep.timeSeries.length), { class: 'n' }],
        ], r.replicas),
        one ? h('div', { class: 'charts-2' },
          chart({ title: 'CPU (%)', points, x: (p) => p.timestamp, series: [{ label: 'user', value: pick('cpu.user_us', 100) }, { label: 'system', value: pick('cpu.system_us', 100) }] }),
          chart({ title: 'Memory (MB)', points, x: (p) => p.timestamp, series: [{ label: 'rss', value: pick('memory.rss_bytes', 1048576) }] }),
          chart({ title: 'DB pool', points, x: (p) => p.timestamp, series: [{ label: 'active', value: pick('database.pool_active') }, { label: 'idle', value: pick('database.pool_idle') }] }))
          : h('p', { class: 'hint' }, `${r.replicas.length} brokers report; charts show one broker at a time with a single replica.`));
    });

    const pg = panel('PostgreSQL', api.getPostgresStats, (s) => h('div', {},
      stats([
        ['Database', s.database],
        ['Cache hit ratio', `${dec(s.databaseCache.cacheHitRatio)} %`],
        ['Table hit ratio', `${dec(s.cacheSummary.tables.hitRatio)} %`],
        ['Index hit ratio', `${dec(s.cacheSummary.indexes.hitRatio)} %`],
        ['shared_buffers', s.bufferConfig.sharedBuffers],
        ['Active queries', num(s.activeQueries.length), '> 1 s'],
      ]),
      h('div', { class: 'grid-2' },
        h('div', {}, h('h3', {}, 'Largest tables'), table([
          ['Table', (t) => t.table], ['Total', (t) => t.totalSize, { class: 'n' }], ['Data', (t) => t.tableSize, { class: 'n' }], ['Indexes', (t) => t.indexSize, { class: 'n' }],
        ], [...s.tableSizes].sort((a, b) => b.totalSizeBytes - a.totalSizeBytes).slice(0, 10))),
        h('div', {}, h('h3', {}, 'Dead tuples'), s.deadTuples.length ? table([
          ['Table', (t) => t.table], ['Dead', (t) => num(t.deadTuples), { class: 'n' }], ['Live', (t) => num(t.liveTuples), { class: 'n' }], ['%', (t) => dec(t.deadPercentage), { class: 'n' }],
        ], s.deadTuples.slice(0, 10)) : h('p', { class: 'muted' }, 'None.'))),
      s.activeQueries.length ? h('div', {}, h('h3', {}, 'Active queries'), table([
        ['PID', (a) => a.pid], ['Duration', (a) => a.duration], ['State', (a) => a.state], ['Wait', (a) => [a.waitEventType, a.waitEvent].filter(Boolean).join(': ') || '–'], ['Query', (a) => h('code', {}, a.query)],
      ], s.activeQueries)) : null,
      s.hotUpdates.length ? h('div', {}, h('h3', {}, 'HOT updates'), table([
        ['Table', (t) => t.table], ['Updates', (t) => num(t.totalUpdates), { class: 'n' }], ['HOT', (t) => num(t.hotUpdates), { class: 'n' }], ['%', (t) => dec(t.hotUpdatePercentage), { class: 'n' }],
      ], s.hotUpdates.slice(0, 10))) : null));

    el.append(h('div', { class: 'grid-2' }, maintenance.el, buffers.el), h('div', { class: 'grid-2' }, process.el, brokers.el), pg.el);
    return { refresh: (force) => Promise.all([maintenance, buffers, process, brokers, pg].map((p) => p.refresh(force))) };
  },
};
