// Migration: copy this broker's queen schema to another PostgreSQL with
// pg_dump | pg_restore (run by the broker), watch it, compare row counts.
// The form lives outside the panels so a refresh never clears what was typed.

import { api } from '../api.js';
import { h, panel, num, chip, table, link, confirm, act, errorState, loading } from '../ui.js';

// Tables whose rows may be left behind (their definitions are always
// copied); the broker honours only these (handlers/migration).
const groups = [
  ['messages', 'Messages', 'Payloads and dead letters. Skip them to start the new database with empty queues.', ['messages', 'dead_letter_queue']],
  ['traces', 'Traces', 'Trace events of messages. Nothing stops working without them.', ['message_traces', 'message_trace_names']],
  ['history', 'Consumption history', 'The log of consumed messages.', ['messages_consumed']],
  ['metrics', 'Metrics', 'Time series behind the charts; they start again on the new database.',
    ['stats', 'stats_history', 'system_metrics', 'worker_metrics', 'worker_metrics_summary', 'queue_lag_metrics', 'retention_history']],
];

const running = (s) => s === 'dumping' || s === 'restoring';
const progress = { idle: 0, dumping: 10, restoring: 60, complete: 100, error: 100 };

export default {
  title: 'Migration',
  mount(el, ctx) {
    const admin = ctx.can('admin');
    const state = { status: 'idle', timer: 0 }; // the last migration status seen
    const field = (name, label, attrs = {}) => h('label', { class: 'field' }, h('span', {}, label),
      h('input', { name, autocomplete: 'off', spellcheck: 'false', ...attrs }));
    const form = h('form', { class: 'target-form', onsubmit: (ev) => ev.preventDefault() },
      field('host', 'Host', { placeholder: 'db.example.com', required: true }),
      field('port', 'Port', { value: '5432', inputmode: 'numeric', class: 'narrow' }),
      field('database', 'Database', { placeholder: 'queen', required: true }),
      field('user', 'User', { placeholder: 'postgres', required: true }),
      field('password', 'Password', { type: 'password' }),
      h('label', { class: 'field check' }, h('input', { type: 'checkbox', name: 'ssl' }), h('span', {}, 'SSL (sslmode=require)')));
    const value = (name) => form.elements[name].value.trim();
    const target = () => ({
      host: value('host'), port: value('port') || '5432', database: value('database'), user: value('user'),
      password: form.elements.password.value, ssl: form.elements.ssl.checked,
    });
    const complete = () => value('host') && value('database') && value('user');

    // Test connection: the outcome stays until the form changes.
    let tested = null; // the target JSON that connected
    const testOut = h('div', { class: 'test-result', dataset: { result: '' } });
    const testBtn = h('button', { type: 'button', class: 'primary', disabled: !admin, dataset: { action: 'test' } }, 'Test connection');
    const startBtn = h('button', { type: 'button', class: 'primary', disabled: true, dataset: { action: 'start' } }, 'Start migration');
    const validateBtn = h('button', { type: 'button', disabled: true, dataset: { action: 'validate' } }, 'Compare row counts');
    const sync = () => {
      const ok = admin && tested === JSON.stringify(target());
      startBtn.disabled = !ok || running(state.status);
      validateBtn.disabled = !ok;
      testBtn.disabled = !admin || !complete();
    };
    form.addEventListener('input', () => {
      if (tested !== null && tested !== JSON.stringify(target())) { tested = null; testOut.replaceChildren(); }
      sync();
    });
    testBtn.addEventListener('click', async () => {
      testOut.replaceChildren(loading('Connecting…'));
      const t = target();
      const r = await act(testBtn, () => api.migrationTestConnection(t), (x) => (x.success ? `Connected to ${t.host}.` : `Connection to ${t.host} failed.`));
      if (!r) { testOut.replaceChildren(); sync(); return; }
      tested = r.success ? JSON.stringify(t) : null;
      testOut.replaceChildren(r.success
        ? h('p', { class: 'ok-text' }, chip('connected', 'ok'), ' ', h('span', { class: 'mono' }, r.version || ''))
        : h('p', { class: 'error-text' }, chip('failed', 'dead'), ' ', r.error || r.message));
      sync();
    });

    const boxes = groups.map(([key, label, help, tables]) => h('label', { class: 'group-choice' },
      h('input', { type: 'checkbox', checked: true, dataset: { group: key } }),
      h('span', {}, h('strong', {}, label), ' ', h('span', { class: 'muted' }, help), h('br'), h('code', {}, tables.join(', ')))));
    const excluded = () => groups.filter((_, i) => !boxes[i].querySelector('input').checked).flatMap((g) => g[3]);

    startBtn.addEventListener('click', async () => {
      const t = target();
      const skip = excluded();
      const ok = await confirm({
        title: `Copy the queen schema to ${t.database} on ${t.host}?`,
        text: `The target's queen schema is dropped and re-created, then filled by pg_dump | pg_restore from this broker's database${skip.length ? `, without the rows of ${skip.join(', ')}` : ''}. Writes that land here during the copy are not in it: turn both maintenance switches on first.`,
        ok: 'Start migration',
      });
      if (!ok) return;
      const r = await act(startBtn, () => api.migrationStart({ ...t, excludeTableData: skip }), (x) => x.message);
      if (r) { state.status = 'dumping'; sync(); watch(); }
    });

    // Status: at the refresh loop's pace, and every second while it runs.
    const watch = () => {
      clearTimeout(state.timer);
      state.timer = setTimeout(async () => {
        if (!el.isConnected) return; // the view was left
        await status.refresh();
        if (running(state.status)) watch();
      }, 1000);
    };
    const reset = async (btn) => {
      const r = await act(btn, api.migrationReset, (x) => x.message);
      if (r) status.refresh(true);
    };
    const status = panel('Progress', api.migrationStatus, (s) => {
      const was = state.status;
      state.status = s.status;
      sync();
      if (running(s.status) && !running(was)) watch();
      if (s.status === 'idle') return 'No migration has run on this broker since it started. Test a target, then start one.';
      const kind = { complete: 'ok', error: 'dead', dumping: 'warn', restoring: 'warn' }[s.status];
      return h('div', { dataset: { status: s.status } },
        h('p', { class: 'progress-line' }, chip(s.status, kind), ' ', h('strong', {}, s.currentStep), ' ', h('span', { class: 'muted' }, `${s.elapsedSeconds} s`)),
        h('div', { class: `bar bar-${s.status}` }, h('span', { style: `width: ${progress[s.status] || 0}%` })),
        s.error ? h('pre', { class: 'error-box' }, s.error) : null,
        s.dumpOutput || s.restoreOutput ? h('details', {}, h('summary', {}, 'Output of pg_dump and pg_restore'),
          s.dumpOutput ? h('pre', { class: 'json' }, s.dumpOutput) : null,
          s.restoreOutput ? h('pre', { class: 'json' }, s.restoreOutput) : null) : null,
        !running(s.status) && admin ? h('div', { class: 'actions' }, h('button', { onclick: (ev) => reset(ev.target) }, 'Reset')) : null);
    });

    const validation = h('div', { dataset: { validation: '' } });
    validateBtn.addEventListener('click', async () => {
      validation.replaceChildren(loading('Counting rows on both sides…'));
      try {
        const r = await api.migrationValidate(target());
        if (!r.success) { validation.replaceChildren(h('p', { class: 'error-text' }, r.error || 'Validation failed.')); return; }
        validation.replaceChildren(
          h('p', {}, r.allMatch ? chip('all tables match', 'ok') : chip('some tables differ', 'dead')),
          table([
            ['Table', (x) => h('code', {}, x.table)],
            ['Here', (x) => (x.sourceCount < 0 ? '–' : num(x.sourceCount)), { class: 'n' }],
            ['Target', (x) => (x.targetCount < 0 ? '–' : num(x.targetCount)), { class: 'n' }],
            ['', (x) => (x.match ? '✓' : chip('differs', 'dead'))],
          ], r.tables || [], { rowAttrs: (x) => ({ dataset: { table: x.table, match: String(x.match) } }) }));
      } catch (e) {
        validation.replaceChildren(errorState(e));
      }
    });

    const maintenance = panel('Before you start', api.getMaintenance, (m) => h('div', {},
      h('p', {}, 'Push maintenance ', chip(m.maintenanceMode ? 'ON' : 'off', m.maintenanceMode ? 'ok' : 'warn'),
        ' · Pop maintenance ', chip(m.popMaintenanceMode ? 'ON' : 'off', m.popMaintenanceMode ? 'ok' : 'warn'),
        m.bufferedMessages ? ` · ${num(m.bufferedMessages)} buffered` : ''),
      h('p', { class: 'hint' }, m.maintenanceMode && m.popMaintenanceMode
        ? 'Ready: pushes wait in the disk buffer and pops answer empty, so the copy is consistent.'
        : ['Turn both switches on in ', link('/system', null, 'System'), ' first: pushes then wait in the disk buffer and pops answer empty, so nothing changes during the copy.']),
      h('p', { class: 'hint' }, 'The broker runs pg_dump and pg_restore itself: the PostgreSQL client tools must be installed where it runs. Afterwards point the brokers at the new database (PG_HOST, PG_DB, …), restart them and turn maintenance off.')));

    const section = (title, ...body) => h('section', { class: 'panel', dataset: { panel: title } },
      h('div', { class: 'panel-head' }, h('h2', {}, title)), h('div', { class: 'panel-body' }, body));
    const steps = section('Target database',
      admin ? null : h('p', { class: 'hint' }, 'Migrations need an admin token.'),
      form, h('div', { class: 'actions' }, testBtn), testOut,
      h('h3', {}, 'Rows to copy'), h('p', { class: 'hint' }, 'Every table is created on the target; unchecked groups are created empty.'),
      h('div', { class: 'group-choices' }, boxes),
      h('div', { class: 'actions start' }, startBtn));
    const check = section('Validate',
      h('p', { class: 'hint' }, 'Counts the rows of every queen table here and on the target.'),
      h('div', { class: 'actions' }, validateBtn), validation);

    el.append(h('div', { class: 'grid-2' }, steps, h('div', { class: 'stack' }, maintenance.el, status.el, check)));
    sync();
    return { refresh: (force) => Promise.all([maintenance.refresh(force), status.refresh(force)]) };
  },
};
