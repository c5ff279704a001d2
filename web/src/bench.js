// Benchmark runs of a plan (docs/api.md, "Benchmark runs"): start one with
// POST /v1/benchmarks, poll GET /v1/benchmarks/{id} until it ends (interval
// 250 ms growing to 2 s), then chart its per-iteration times against the
// measured median and the predicted step; earlier runs of the plan listed
// from GET /v1/benchmarks?plan_id=ID. A live run has a Cancel button
// (POST /v1/benchmarks/{id}/cancel).
import { api, getJson, listAll } from './api.js';
import { lineChart } from './charts.js';
import { meshLink } from './mesh.js';
import { timelineSection } from './timeline.js';
import { DASH, errorBox, fill, fmtBytes, fmtNum, fmtSeconds, fmtTime, h } from './util.js';

const POLL_MIN_MS = 250;
const POLL_MAX_MS = 2000;
const TOP_OPS = 15; // ops shown before "show all"
const RATIO_HIGH = 2; // measured / predicted flagged above this...
const RATIO_LOW = 0.5; // ...and below this

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

// Per-device seconds -> {mean, min, max, argmin, argmax}, or null without any.
function spread(xs) {
  const v = Array.isArray(xs) ? xs.filter((x) => typeof x === 'number' && Number.isFinite(x)) : [];
  if (!v.length) return null;
  let lo = 0;
  let hi = 0;
  for (let i = 1; i < v.length; i++) {
    if (v[i] < v[lo]) lo = i;
    if (v[i] > v[hi]) hi = i;
  }
  return { mean: v.reduce((a, b) => a + b, 0) / v.length, min: v[lo], max: v[hi], argmin: lo, argmax: hi };
}

// Where an op or collective is: line:col (MLIR input), or the value it
// makes ("result") or takes ("operand", a collective the partitioner
// inserted) for graph input; then its loc.
function whereCell(x) {
  const at = x.line ? `${x.line}:${x.col ?? 0}` : x.result ? x.result : x.operand ? `operand ${x.operand}` : DASH;
  return h('td', { class: 'mono' }, at, x.loc ? h('span', { class: 'muted' }, ` loc(${x.loc})`) : null);
}

const headRow = (titles) => h('thead', {}, h('tr', {}, titles.map((t) => h('th', { scope: 'col' }, t))));
const numCell = (text, attrs = {}) => h('td', { class: 'num', ...attrs }, text);

// measured / predicted, flagged beyond RATIO_HIGH or RATIO_LOW (a marker as
// well as a colour).
function ratioCell(measured, predicted) {
  if (!(predicted > 0) || measured === undefined) return numCell(DASH);
  const r = measured / predicted;
  const flag = r > RATIO_HIGH ? 'high' : r < RATIO_LOW ? 'low' : null;
  return numCell([`${r.toFixed(2)}\u00d7`, flag ? h('span', { class: 'flag' }, flag === 'high' ? ' \u25b2' : ' \u25bc') : null],
    { 'data-flag': flag, class: `num${flag ? ` ratio-${flag}` : ''}` });
}

const RATIO_NOTE = `\u25b2 measured over ${RATIO_HIGH}\u00d7 the prediction, \u25bc under ${RATIO_LOW}\u00d7.`;

// "Where the time goes" for results r: the slowest compute ops (TOP_OPS, or
// all the API listed), and the sum of their mean times (plus the
// collectives') against the measured median step.
export function opsSection(r) {
  const box = h('section', { class: 'bench-breakdown', id: 'bench-ops-section' }, h('h3', {}, 'Where the time goes'));
  if (!Array.isArray(r.ops)) {
    box.append(h('p', { class: 'muted', id: 'bench-ops-none' }, 'Per-op times were not recorded for this run.'));
    return box;
  }
  const ops = r.ops.map((o) => ({ o, s: spread(o.measured_s) }));
  const timed = Number.isFinite(r.ops_timed) ? r.ops_timed : ops.length;
  if (!ops.length) {
    box.append(h('p', { class: 'muted', id: 'bench-ops-none' }, 'No compute op took measurable time in this run.'));
    return box;
  }
  const sum = (xs) => xs.reduce((a, x) => a + (x.s ? x.s.mean : 0), 0);
  const opsSum = sum(ops);
  const colls = Array.isArray(r.collectives) ? r.collectives.map((c) => ({ s: spread(c.measured_s) })) : [];
  const collSum = sum(colls);
  // Per-op times are means over the timed runs, so they add up against the
  // mean run; the median (step_s) is shown beside it.
  const its = Array.isArray(r.iter_s) && r.iter_s.length ? r.iter_s : null;
  const run = its ? its.reduce((x, y) => x + y, 0) / its.length : r.step_s;
  const inOps = opsSum + collSum;
  const rest = run - inOps;
  box.append(h('p', { id: 'bench-ops-total' },
    `Sum of per-op mean times: ${fmtSeconds(opsSum)} in ${ops.length < timed ? `the ${ops.length} listed of ${timed}` : `${timed}`} compute ops`,
    colls.length ? ` + ${fmtSeconds(collSum)} in ${colls.length} collective${colls.length === 1 ? '' : 's'} = ${fmtSeconds(inOps)}` : '',
    ` of the ${its ? 'mean timed run' : 'median step'} ${fmtSeconds(run)}`,
    run > 0 ? ` (${((100 * inOps) / run).toFixed(0)}%${its ? `; median step ${fmtSeconds(r.step_s)}` : ''})` : '',
    run > 0 ? (rest >= 0 ? `; ${fmtSeconds(rest)} outside them (freeing buffers between ops, waiting at the end of the run for the slowest device).`
      : `; ${fmtSeconds(-rest)} more than the run.`) : '.'));

  let all = false;
  const tbody = h('tbody', {});
  const caption = h('caption', {});
  const toggle = ops.length > TOP_OPS ? h('button', { type: 'button', id: 'bench-ops-toggle', 'aria-controls': 'bench-ops' }) : null;
  const draw = () => {
    const shown = all ? ops : ops.slice(0, TOP_OPS);
    caption.textContent = `Slowest compute ops: ${shown.length} of ${timed} timed${ops.length < timed ? ` (the API lists the slowest ${ops.length})` : ''}`;
    if (toggle) {
      toggle.textContent = all ? `Show the top ${TOP_OPS}` : `Show all ${ops.length}`;
      toggle.setAttribute('aria-expanded', String(all));
    }
    fill(tbody, shown.map(({ o, s }) => h('tr', {},
      h('th', { scope: 'row', class: 'mono' }, o.op), whereCell(o),
      numCell(fmtSeconds(s?.mean)), numCell(s ? `${fmtSeconds(s.max)} (D${s.argmax})` : DASH),
      numCell(fmtSeconds(o.predicted_s)), ratioCell(s?.mean, o.predicted_s),
      numCell(o.flops > 0 && s && s.mean > 0 ? (o.flops / s.mean / 1e9).toFixed(2) : DASH))));
  };
  if (toggle) toggle.addEventListener('click', () => { all = !all; draw(); });
  draw();
  box.append(
    h('table', { class: 'summary-table bench-ops', id: 'bench-ops' }, caption,
      headRow(['op', 'where', 'measured (mean of devices)', 'max (device)', 'predicted', 'measured / predicted', 'GFLOP/s']), tbody),
    h('p', { class: 'muted' }, `Times per run on one device. ${RATIO_NOTE}`, toggle ? ' ' : null, toggle));
  return box;
}

// One bar per device, as high as its share of the longest time. A
// collective's time runs from before its first barrier (all devices) to after
// its second, so the devices that came early wait and show tall bars; the
// shortest bar is the last to arrive, the straggler the others waited for
// (marked).
function deviceBars(xs, s) {
  const label = xs.map((x, d) => `D${d} ${fmtSeconds(x)}`).join(', ');
  return h('div', { class: 'dev-bars', role: 'img', 'aria-label': `per device: ${label}; last to arrive D${s ? s.argmin : '?'}` },
    xs.map((x, d) => h('div', {
      class: `dev-bar${s && xs.length > 1 && d === s.argmin ? ' straggler' : ''}`,
      title: `D${d}: ${fmtSeconds(x)}${s && xs.length > 1 && d === s.argmin ? ' (last to arrive)' : ''}`,
      style: { height: `${s && s.max > 0 ? Math.max(4, (100 * x) / s.max) : 0}%` },
    })));
}

// Each collective of results r in program order, its time on every device.
export function collectivesSection(r, planId = 0) {
  const box = h('section', { class: 'bench-breakdown', id: 'bench-colls-section' }, h('h3', {}, 'Collectives'));
  if (!Array.isArray(r.collectives)) {
    box.append(h('p', { class: 'muted', id: 'bench-colls-none' }, 'Collective times were not recorded for this run.'));
    return box;
  }
  const cs = r.collectives;
  if (!cs.length) {
    box.append(h('p', { class: 'muted', id: 'bench-colls-none' }, 'None: this plan ran no collectives.'));
    return box;
  }
  box.append(
    h('table', { class: 'summary-table bench-colls', id: 'bench-colls' },
      h('caption', {}, `${cs.length} collective${cs.length === 1 ? '' : 's'} in program order`),
      headRow(['kind', 'axes', 'group', 'bytes / device', 'measured min / mean / max', 'per device', 'predicted', 'measured / predicted', 'bandwidth', 'where', 'devices']),
      h('tbody', {}, cs.map((c) => {
        const xs = Array.isArray(c.measured_s) ? c.measured_s : [];
        const s = spread(xs);
        return h('tr', {},
          h('th', { scope: 'row' }, c.kind || c.op || DASH), h('td', { class: 'mono' }, (c.axes || []).join(', ') || DASH),
          numCell(String(c.group ?? DASH)), numCell(fmtBytes(c.bytes)),
          numCell(s ? `${fmtSeconds(s.min)} / ${fmtSeconds(s.mean)} / ${fmtSeconds(s.max)}` : DASH),
          h('td', {}, deviceBars(xs, s)),
          numCell(fmtSeconds(c.predicted_s)), ratioCell(s?.mean, c.predicted_s),
          numCell(c.bytes > 0 && s && s.mean > 0 ? `${fmtBytes(c.bytes / s.mean)}/s` : DASH), whereCell(c),
          h('td', {}, planId ? meshLink(planId, c.axes, null, 'groups') : DASH));
      }))),
    h('p', { class: 'muted' }, 'Times per run on one device, from before the collective\'s first barrier (all devices) to after its second: ',
      'a device that arrives early waits for the last one, so the tall bars waited and the short red one arrived last (the straggler: look at what it ran before). ',
      'The minimum is closest to the transfer itself; the mean, and the bandwidth from it, include the waiting. ', RATIO_NOTE));
  return box;
}

// Under the predicted step: which profile the prediction used and, unless
// it was calibrated on this machine, that it is stale (this machine's speed
// moves 2-4x with its load) and how to recalibrate.
export function profileNote(p) {
  if (!p || typeof p.name !== 'string') return null;
  if (p.calibrated) {
    return h('p', { class: 'muted', id: 'bench-profile' }, `Predicted with the profile ${p.name}, calibrated on this machine.`);
  }
  return h('p', { class: 'diag warning', id: 'bench-profile', role: 'note' },
    h('strong', {}, 'Stale profile: '),
    `the prediction uses the ${p.name} profile, not calibrated beside this run; this machine's speed changes with its load (2-4\u00d7 under load), so measured and predicted can part by that much. `,
    'Recalibrate with ', h('code', {}, 'shardplan calibrate --out cpu-calibrated.json --rank'),
    ' (it calibrates beside each measured run of the suite and checks every prediction is within 15%), then cost the plan with ',
    h('code', {}, 'shardplan cost --profile cpu-calibrated.json'), '.');
}

// What a final run shows: its error, or its figures, the chart of its
// timed runs, its timeline, where the time went and its collectives.
// Returns {el, chart} (chart: destroy it when the view goes, or null).
export function resultView(run) {
  if (run.status === 'failed' || run.status === 'canceled') {
    return { el: h('div', { class: 'error', role: 'alert', id: 'bench-error' }, h('strong', {}, `Benchmark ${run.id} ${run.status}: `), run.error || DASH), chart: null };
  }
  const r = run.results;
  if (!r) return { el: null, chart: null };
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
  const n = r.numerics;
  const el = h('div', {},
    h('dl', { class: 'kv' },
      h('dt', {}, 'measured step (median)'), h('dd', { id: 'bench-measured' }, fmtSeconds(r.step_s)),
      h('dt', {}, 'predicted step'), h('dd', { id: 'bench-predicted' }, fmtSeconds(r.predicted_step_s)),
      h('dt', {}, 'min / max'), h('dd', {}, its.length ? `${fmtSeconds(Math.min(...its))} / ${fmtSeconds(Math.max(...its))}` : DASH),
      h('dt', {}, 'FLOPs, FLOP/s'), h('dd', {}, `${fmtNum(r.flops)}, ${fmtNum(r.flop_per_s)}/s`),
      h('dt', {}, 'one-device reference'), h('dd', {}, fmtSeconds(r.reference_s)),
      h('dt', {}, 'numerics'), h('dd', { id: 'bench-numerics', class: n && !n.match ? 'diag error' : '' }, numericsText(n)),
      h('dt', {}, 'ran'), h('dd', {}, `devices ${r.devices}, warmup ${r.warmup}, iters ${r.iters}, seed ${r.seed}`),
      h('dt', {}, 'page'), h('dd', {}, h('a', { href: `#/run/${run.id}`, id: 'bench-run-link' }, `run ${run.id}`))),
    profileNote(r.predicted_profile),
    h('div', { class: 'charts', id: 'bench-chart' }, c.el),
    timelineSection(run), opsSection(r), collectivesSection(r, run.plan_id));
  return { el, chart: c.chart };
}

// #/run/ID: one benchmark run, polled while it goes (its progress after
// every iteration), then its figures and its per-device timeline.
export async function runPage(main, ctx, id) {
  const head = h('h1', {}, `Benchmark run ${id}`);
  const status = h('div', { id: 'bench-status' });
  const result = h('div', { id: 'bench-result' });
  fill(main, head, status, result);
  let chart = null;
  let timer = 0;
  ctx.onLeave(() => { clearTimeout(timer); if (chart) chart.destroy(); });
  const show = (run) => {
    const p = Math.max(0, Math.min(1, Number(run.progress) || 0));
    fill(status, h('p', {},
      run.plan_id ? h('a', { href: `#/plan/${run.plan_id}`, id: 'run-plan-link' }, `plan ${run.plan_id}`) : 'no plan', ' \u00b7 ',
      h('span', { id: 'bench-state', 'data-status': run.status }, run.status), ' ',
      h('progress', { id: 'bench-progress', max: '1', value: String(p) }), ` ${Math.round(p * 100)}%`,
      h('span', { class: 'muted' }, ` created ${fmtTime(run.created_at)}, updated ${fmtTime(run.updated_at)}`)));
  };
  const poll = async (delay) => {
    const run = await getJson(`/v1/benchmarks/${encodeURIComponent(id)}`);
    if (!ctx.alive()) return;
    show(run);
    if (!isFinal(run)) {
      timer = setTimeout(() => poll(Math.min(POLL_MAX_MS, delay * 1.5)).catch((err) => { if (ctx.alive()) fill(status, errorBox(err)); }), delay);
      return;
    }
    if (chart) chart.destroy();
    const v = resultView(run);
    chart = v.chart;
    fill(result, v.el);
  };
  await poll(POLL_MIN_MS);
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
    const v = resultView(run);
    chart = v.chart;
    fill(result, v.el);
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
