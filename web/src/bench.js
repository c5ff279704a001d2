// Benchmark runs of a plan (docs/api.md, "Benchmark runs"): start one with
// POST /v1/benchmarks, poll GET /v1/benchmarks/{id} until it ends (interval
// 250 ms growing to 2 s), then chart its per-iteration times against the
// measured median and the predicted step; earlier runs of the plan listed
// from GET /v1/benchmarks?plan_id=ID. A live run has a Cancel button
// (POST /v1/benchmarks/{id}/cancel).
import { api, getJson, listAll } from './api.js';
import { lineChart } from './charts.js';
import { DASH, errorBox, fill, fmtNum, fmtSeconds, fmtTime, h } from './util.js';

const POLL_MIN_MS = 250;
const POLL_MAX_MS = 2000;

export function isFinal(run) {
  return run.status === 'succeeded' || run.status === 'failed' || run.status === 'canceled';
}

// The newest succeeded run of a plan with its results, or null.
export async function newestSucceeded(planId) {
  const items = await listAll('benchmarks', `plan_id=${encodeURIComponent(planId)}&status=succeeded`);
  if (!items.length) return null;
  const id = Math.max(...items.map((r) => r.id));
  return getJson(`/v1/benchmarks/${id}`);
}

export function numericsText(n) {
  if (!n) return DASH;
  if (n.match) return `match (max abs diff ${n.max_abs_diff})`;
  const mm = n.mismatch ? ` \u2014 first mismatch ${JSON.stringify(n.mismatch)}` : '';
  return `MISMATCH (max abs diff ${n.max_abs_diff})${mm}`;
}

// The panel for the plan view. devices: the mesh's device count (default).
export function benchPanel(ctx, planId, devices) {
  const box = h('section', { class: 'bench', id: 'plan-bench' });
  const num = (id, value, min, max, label) => h('label', {}, `${label} `,
    h('input', { type: 'number', id, value: String(value), min: String(min), max: String(max), style: { width: '6em' } }));
  const start = h('button', { type: 'submit', id: 'bench-start' }, 'Start benchmark');
  const form = h('form', { class: 'toolbar', id: 'bench-form', novalidate: true }, // the API checks the values
    num('bench-devices', devices || 0, 0, 256, 'devices'), num('bench-warmup', 1, 0, 1000, 'warmup'),
    num('bench-iters', 5, 1, 100000, 'iters'), start);
  const msg = h('div', { id: 'bench-message' });
  const status = h('div', { id: 'bench-status' });
  const result = h('div', { id: 'bench-result' });
  const history = h('div', { id: 'bench-history' });
  box.append(form, msg, status, result, h('h3', {}, 'Benchmarks of this plan'), history);

  let chart = null;
  let timer = 0;
  let watching = 0; // id of the run being polled
  ctx.onLeave(() => { clearTimeout(timer); watching = 0; if (chart) chart.destroy(); });

  const intVal = (id) => {
    const v = form.querySelector(`#${id}`).value.trim();
    return /^-?\d+$/.test(v) ? Number(v) : v; // anything else goes as is: the API names it
  };

  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    fill(msg);
    start.disabled = true;
    try {
      const body = { plan_id: Number(planId), devices: intVal('bench-devices'), warmup: intVal('bench-warmup'), iters: intVal('bench-iters') };
      const r = await api('/v1/benchmarks', { method: 'POST', body: JSON.stringify(body) });
      if (!ctx.alive()) return;
      fill(msg, h('p', { class: 'muted', id: 'bench-accepted' }, `HTTP ${r.status}: benchmark ${r.json.id} ${r.json.status}`));
      watch(r.json);
      loadHistory();
    } catch (err) {
      if (ctx.alive()) fill(msg, errorBox(err));
    } finally {
      start.disabled = false;
    }
  });

  async function cancel(run, button) {
    button.disabled = true;
    try {
      const r = await api(`/v1/benchmarks/${run.id}/cancel`, { method: 'POST' });
      if (!ctx.alive()) return;
      watch(r.json);
      loadHistory();
    } catch (err) {
      if (ctx.alive()) fill(msg, errorBox(err));
      button.disabled = false;
    }
  }

  function showStatus(run) {
    const p = Math.max(0, Math.min(1, Number(run.progress) || 0));
    const stop = isFinal(run) ? null : h('button', { type: 'button', id: 'bench-cancel' }, 'Cancel');
    if (stop) stop.addEventListener('click', () => cancel(run, stop));
    fill(status, h('p', {},
      h('strong', {}, `Benchmark ${run.id}: `), h('span', { id: 'bench-state', 'data-status': run.status }, run.status), ' ',
      h('progress', { id: 'bench-progress', max: '1', value: String(p) }), ` ${Math.round(p * 100)}%`,
      run.spec ? h('span', { class: 'muted' }, ` (devices ${run.spec.devices ?? DASH}, warmup ${run.spec.warmup ?? DASH}, iters ${run.spec.iters ?? DASH})`) : null,
      stop ? ' ' : null, stop));
  }

  function showResult(run) {
    if (chart) { chart.destroy(); chart = null; }
    if (run.status === 'failed' || run.status === 'canceled') {
      fill(result, h('div', { class: 'error', role: 'alert', id: 'bench-error' }, h('strong', {}, `Benchmark ${run.id} ${run.status}: `), run.error || DASH));
      return;
    }
    const r = run.results;
    if (!r) { fill(result); return; }
    const its = Array.isArray(r.iter_s) ? r.iter_s : [];
    const labels = its.map((_, i) => String(i + 1));
    const c = lineChart({
      title: `Benchmark ${run.id}: time of each timed run`,
      labels,
      datasets: [
        { label: 'iteration', data: its },
        { label: `measured median ${fmtSeconds(r.step_s)}`, data: its.map(() => r.step_s), flat: true },
        { label: `predicted ${fmtSeconds(r.predicted_step_s)}`, data: its.map(() => r.predicted_step_s ?? null), flat: true },
      ],
      format: fmtSeconds,
    });
    chart = c.chart;
    const n = r.numerics;
    fill(result,
      h('dl', { class: 'kv' },
        h('dt', {}, 'measured step (median)'), h('dd', { id: 'bench-measured' }, fmtSeconds(r.step_s)),
        h('dt', {}, 'predicted step'), h('dd', { id: 'bench-predicted' }, fmtSeconds(r.predicted_step_s)),
        h('dt', {}, 'min / max'), h('dd', {}, its.length ? `${fmtSeconds(Math.min(...its))} / ${fmtSeconds(Math.max(...its))}` : DASH),
        h('dt', {}, 'FLOPs, FLOP/s'), h('dd', {}, `${fmtNum(r.flops)}, ${fmtNum(r.flop_per_s)}/s`),
        h('dt', {}, 'one-device reference'), h('dd', {}, fmtSeconds(r.reference_s)),
        h('dt', {}, 'numerics'), h('dd', { id: 'bench-numerics', class: n && !n.match ? 'diag error' : '' }, numericsText(n)),
        h('dt', {}, 'ran'), h('dd', {}, `devices ${r.devices}, warmup ${r.warmup}, iters ${r.iters}, seed ${r.seed}`)),
      h('div', { class: 'charts', id: 'bench-chart' }, c.el));
  }

  async function poll(id, delay) {
    if (!ctx.alive() || watching !== id) return;
    let run;
    try {
      run = await getJson(`/v1/benchmarks/${id}`);
    } catch (err) {
      if (ctx.alive() && watching === id) { fill(status, errorBox(err)); watching = 0; }
      return;
    }
    if (!ctx.alive() || watching !== id) return;
    showStatus(run);
    if (isFinal(run)) {
      watching = 0;
      showResult(run);
      loadHistory();
      return;
    }
    timer = setTimeout(() => poll(id, Math.min(POLL_MAX_MS, delay * 1.5)), delay);
  }

  function watch(run) {
    clearTimeout(timer);
    watching = run.id;
    showStatus(run);
    if (isFinal(run)) { watching = 0; showResult(run); return; }
    fill(result);
    timer = setTimeout(() => poll(run.id, POLL_MIN_MS), POLL_MIN_MS);
  }

  async function open(id, initial = false) {
    try {
      const run = await getJson(`/v1/benchmarks/${id}`);
      if (ctx.alive() && !(initial && watching)) watch(run);
    } catch (err) {
      if (ctx.alive()) fill(msg, errorBox(err));
    }
  }

  async function loadHistory() {
    let runs;
    try {
      runs = await listAll('benchmarks', `plan_id=${encodeURIComponent(planId)}`);
    } catch (err) {
      if (ctx.alive()) fill(history, errorBox(err));
      return;
    }
    if (!ctx.alive()) return;
    runs.sort((a, b) => b.id - a.id);
    if (!runs.length) { fill(history, h('p', { class: 'muted' }, 'None yet.')); return null; }
    fill(history, h('table', { class: 'summary-table' },
      h('thead', {}, h('tr', {}, ['run', 'status', 'progress', 'devices', 'warmup', 'iters', 'created', 'updated'].map((t) => h('th', {}, t)))),
      h('tbody', {}, runs.map((r) => h('tr', { 'data-id': String(r.id) },
        h('td', {}, h('a', { href: '#', onclick: (e) => { e.preventDefault(); open(r.id); } }, String(r.id))),
        h('td', {}, r.status), h('td', {}, `${Math.round((Number(r.progress) || 0) * 100)}%`),
        h('td', {}, String(r.spec?.devices ?? DASH)), h('td', {}, String(r.spec?.warmup ?? DASH)), h('td', {}, String(r.spec?.iters ?? DASH)),
        h('td', {}, fmtTime(r.created_at)), h('td', {}, fmtTime(r.updated_at)))))));
    return runs;
  }

  // On open: list the runs and show the newest (watching it if still going).
  loadHistory().then((runs) => { if (runs && runs.length && ctx.alive() && !watching) open(runs[0].id, true); });
  return box;
}
