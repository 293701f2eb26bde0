// Time-series charts with uPlot (vendored, MIT). chart() returns an element
// that sizes itself to its container.

import uPlot from './vendor/uPlot.esm.js';
import { h, empty } from './ui.js';

const palette = ['#5b4fd6', '#e0883a', '#2e9e6a', '#d04a5a', '#3a8fd0', '#a05bc4', '#8a8a3a', '#4ab0b0'];

// chart({title, points, x, series, height}):
//   points: array of rows; x(row) -> Date or ISO string;
//   series: [{label, value(row) -> number|null}].
// Rows are sorted by time; an empty array shows the empty state.
export function chart({ title, points, x, series, height = 180, unit = '' }) {
  const box = h('figure', { class: 'chart', dataset: { chart: title } }, h('figcaption', {}, title));
  if (!points || points.length === 0) {
    box.append(empty('No data in this range yet.'));
    return box;
  }
  const rows = [...points].sort((a, b) => toSec(x(a)) - toSec(x(b)));
  const data = [rows.map((r) => toSec(x(r))), ...series.map((s) => rows.map((r) => nullable(s.value(r))))];
  const opts = {
    width: 600,
    height,
    legend: { live: true },
    cursor: { drag: { x: false, y: false } },
    scales: { x: { time: true } },
    axes: [{}, { size: 56, values: (u, ticks) => ticks.map((v) => `${compact(v, ticks.length > 1 ? ticks[1] - ticks[0] : 1)}${unit}`) }],
    series: [{}, ...series.map((s, i) => ({
      label: s.label, stroke: s.color || palette[i % palette.length], width: 1.5,
      points: { show: rows.length < 3 },
    }))],
  };
  const holder = h('div', { class: 'chart-plot' });
  box.append(holder);
  // uPlot needs a width: take the container's once attached, then follow it.
  requestAnimationFrame(() => {
    const plot = new uPlot({ ...opts, width: Math.max(240, holder.clientWidth || 600) }, data, holder);
    const ro = new ResizeObserver(() => {
      if (!holder.isConnected) { ro.disconnect(); plot.destroy(); return; }
      plot.setSize({ width: Math.max(240, holder.clientWidth), height });
    });
    ro.observe(holder);
  });
  return box;
}

function toSec(t) {
  return (t instanceof Date ? t.getTime() : Date.parse(t)) / 1000;
}

function nullable(v) {
  return v === undefined || v === null || Number.isNaN(Number(v)) ? null : Number(v);
}

// compact formats an axis value with as many decimals as the tick step needs.
function compact(v, step) {
  const a = Math.abs(v);
  if (a >= 1e9) return `${+(v / 1e9).toFixed(1)}G`;
  if (a >= 1e6) return `${+(v / 1e6).toFixed(1)}M`;
  if (a >= 1e4) return `${+(v / 1e3).toFixed(1)}k`;
  const decimals = step > 0 && step < 1 ? Math.min(6, Math.ceil(-Math.log10(step) - 1e-9)) : 0;
  return v.toFixed(decimals);
}

// pivot turns rows of (time, key, value), e.g. one per bucket and queue,
// into one point per time with a series per key (the first `limit` keys).
export function pivot(rows, x, key, value, limit = 8) {
  const byTime = new Map();
  const keys = [];
  for (const r of rows) {
    const k = key(r);
    if (!keys.includes(k)) keys.push(k);
    const t = x(r);
    if (!byTime.has(t)) byTime.set(t, { t, v: {} });
    byTime.get(t).v[k] = (byTime.get(t).v[k] || 0) + Number(value(r) || 0);
  }
  return {
    points: [...byTime.values()],
    x: (p) => p.t,
    series: keys.slice(0, limit).map((k) => ({ label: k, value: (p) => p.v[k] ?? 0 })),
  };
}
