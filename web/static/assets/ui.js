// DOM helpers, formatters and the loading / empty / error states every view
// shares. No framework: views build elements with h() and replace them on
// each refresh.

import { Kind } from './api.js';

// h('a', {href: '#/', class: 'x', onclick: fn}, 'text', child, [more]) builds an element.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k === 'value') el.value = v;
    else el.setAttribute(k, v === true ? '' : v);
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : String(c));
  }
}

// Formatters.
const nf = new Intl.NumberFormat();
export const num = (n) => (n === null || n === undefined || Number.isNaN(n) ? '–' : nf.format(n));
export const dec = (n, d = 2) => (n === null || n === undefined ? '–' : Number(n).toFixed(d));
export function bytes(n) {
  if (n === null || n === undefined) return '–';
  const units = ['B', 'KB', 'MB', 'GB', 'TB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return `${n.toFixed(i ? 1 : 0)} ${units[i]}`;
}
export function seconds(s) {
  if (s === null || s === undefined) return '–';
  if (s < 60) return `${Math.round(s)} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ${Math.round((s % 3600) / 60)} min`;
  return `${Math.floor(s / 86400)} d ${Math.round((s % 86400) / 3600)} h`;
}
export function ago(iso) {
  if (!iso) return '–';
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return iso;
  return `${seconds(Math.max(0, (Date.now() - t) / 1000))} ago`;
}
export function time(iso) {
  if (!iso) return '–';
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : d.toLocaleString();
}
export const short = (id) => (id && id.length > 13 ? `${id.slice(0, 8)}…` : id || '–');

// Links inside the app (hash routes).
export function href(path, query) {
  const qs = new URLSearchParams(Object.entries(query || {}).filter(([, v]) => v !== undefined && v !== null && v !== ''));
  const s = qs.toString();
  return `#${path}${s ? `?${s}` : ''}`;
}
export const link = (path, query, text) => h('a', { href: href(path, query) }, text);

// States.
export const loading = (what = 'Loading…') => h('div', { class: 'state loading' }, h('span', { class: 'spinner' }), what);
export const empty = (what) => h('div', { class: 'state empty' }, what);

export function errorState(err) {
  const kind = err && err.kind;
  const lines = {
    [Kind.network]: ['Broker unreachable', `${err.message} Is queen running? The view retries on the next refresh.`],
    [Kind.auth]: ['Authentication required', `The broker answered 401 (${err.message}). Paste a bearer token with “Token” above.`],
    [Kind.forbidden]: ['Not permitted', `The broker answered 403 (${err.message}): your token's role may not read or do this.`],
    [Kind.unavailable]: ['Not available', 'This broker does not serve this part of the API yet.'],
    [Kind.notFound]: ['Not found', err && err.message],
  }[kind] || ['Error', `${err && err.status ? `HTTP ${err.status}: ` : ''}${(err && err.message) || err}`];
  return h('div', { class: `state error kind-${kind || 'other'}`, role: 'alert' }, h('strong', {}, lines[0]), h('span', {}, lines[1]));
}

// panel(title, load, render) is a card whose body shows loading, then what
// render(data) returns (or an empty state when it returns a string), or the
// error. refresh() reloads it and re-renders only when the data changed (or
// every 30 s, for the relative times), so an idle view keeps its DOM, its
// selection and its chart cursors; refresh(true) always re-renders.
export function panel(title, load, render, { actions, className } = {}) {
  const body = h('div', { class: 'panel-body' }, loading());
  const head = h('div', { class: 'panel-head' }, h('h2', {}, title), actions || null);
  const el = h('section', { class: `panel ${className || ''}`, dataset: { panel: title } }, head, body);
  let seq = 0;
  let last = null;
  async function refresh(force = false) {
    const mine = ++seq;
    let content;
    try {
      const data = await load();
      const key = `${Math.floor(Date.now() / 30000)}|${JSON.stringify(data)}`;
      if (!force && key === last) {
        if (mine === seq) el.dataset.state = 'ready';
        return;
      }
      last = key;
      const out = render(data);
      content = typeof out === 'string' ? empty(out) : out;
    } catch (e) {
      if (!(e && e.kind)) console.error(e);
      last = null;
      content = errorState(e);
    }
    if (mine !== seq) return;
    body.replaceChildren(content);
    el.dataset.state = content.classList && content.classList.contains('error') ? 'error' : 'ready';
  }
  return { el, refresh };
}

// table(columns, rows): columns are [header, cell(row), {class}?].
export function table(columns, rows, { rowAttrs } = {}) {
  return h('div', { class: 'table-wrap' }, h('table', {},
    h('thead', {}, h('tr', {}, columns.map(([title, , opt]) => h('th', { class: opt && opt.class }, title)))),
    h('tbody', {}, rows.map((r) => h('tr', rowAttrs ? rowAttrs(r) : {},
      columns.map(([, cell, opt]) => h('td', { class: opt && opt.class }, cell(r))))))));
}

// stats([[label, value, hint?]]) is a strip of big numbers.
export function stats(items) {
  return h('div', { class: 'stats' }, items.map(([label, value, hint]) =>
    h('div', { class: 'stat', dataset: { stat: label } }, h('div', { class: 'stat-value' }, value), h('div', { class: 'stat-label' }, label),
      hint ? h('div', { class: 'stat-hint' }, hint) : null)));
}

export const chip = (text, kind) => h('span', { class: `chip chip-${kind || text}` }, text);

export function json(value) {
  let text;
  try { text = JSON.stringify(value, null, 2); } catch { text = String(value); }
  return h('pre', { class: 'json' }, text === undefined ? 'undefined' : text);
}

// confirm({title, text, ok, typeToConfirm, extra, canConfirm}) asks before
// a destructive action. extra is an element shown under the text (e.g. an
// input the caller reads afterwards); while canConfirm() is false the
// button stays disabled.
export function confirm({ title, text, ok = 'Confirm', typeToConfirm, extra: more, canConfirm }) {
  const dlg = document.getElementById('confirm');
  if (dlg.open) return Promise.resolve(false); // one question at a time
  document.getElementById('confirm-title').textContent = title;
  document.getElementById('confirm-text').textContent = text;
  const okBtn = document.getElementById('confirm-ok');
  okBtn.textContent = ok;
  const extra = document.getElementById('confirm-extra');
  extra.replaceChildren();
  okBtn.disabled = false;
  if (typeToConfirm) {
    const input = h('input', { type: 'text', 'aria-label': 'confirmation', placeholder: typeToConfirm, autocomplete: 'off' });
    okBtn.disabled = true;
    input.addEventListener('input', () => { okBtn.disabled = input.value !== typeToConfirm; });
    extra.append(h('label', {}, `Type “${typeToConfirm}” to confirm:`), input);
  }
  if (more) {
    extra.append(more);
    if (canConfirm) {
      const check = () => { okBtn.disabled = !canConfirm(); };
      more.addEventListener('input', check);
      check();
    }
  }
  return new Promise((resolve) => {
    dlg.addEventListener('close', () => resolve(dlg.returnValue === 'ok'), { once: true });
    dlg.returnValue = '';
    dlg.showModal();
  });
}

// notify shows a toast with the result of an action.
export function notify(text, kind = 'ok') {
  const t = h('div', { class: `toast toast-${kind}`, role: kind === 'error' ? 'alert' : 'status' }, text);
  document.getElementById('toasts').append(t);
  setTimeout(() => t.remove(), kind === 'error' ? 10000 : 6000);
}

// act runs a write with a busy button and reports the outcome.
export async function act(button, fn, describe) {
  if (button) button.disabled = true;
  try {
    const res = await fn();
    notify(describe(res), 'ok');
    return res;
  } catch (e) {
    notify(`${e.status ? `HTTP ${e.status}: ` : ''}${e.message}`, 'error');
    return undefined;
  } finally {
    if (button) button.disabled = false;
  }
}

// select(options, value, onchange): options are [value, label] or strings.
export function select(options, value, onchange, attrs = {}) {
  const el = h('select', { ...attrs, onchange: () => onchange(el.value) },
    options.map((o) => {
      const [v, label] = Array.isArray(o) ? o : [o, o];
      return h('option', { value: v, selected: v === value }, label);
    }));
  return el;
}
