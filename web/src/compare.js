// Compare 2-4 plans, each headed by its name, strategy and mesh
// (`data=2 x model=4`): GET /v1/compare?plans=...: memory, communication,
// FLOPs and predicted step as bars, where the plans first diverge, and the
// tensors whose shardings differ (highlighted where they differ from the
// first plan); each plan's newest succeeded benchmark: its per-iteration
// min / median / max and measured vs predicted step ('\u2014' without one).
// "Benchmark these plans" queues one run of each (POST /v1/benchmarks) and
// shows them when they end: how a suggestion applied with "apply and
// compare" is checked by a real run.
import { api, getJson } from './api.js';
import { isFinal, newestSucceeded } from './bench.js';
import { barChart } from './charts.js';
import { BUILTIN_PROFILES } from './plan.js';
import { planMesh, planName, strategyOf } from './plans.js';
import { DASH, errorBox, fill, fmtBytes, fmtNum, fmtSeconds, h } from './util.js';
import { vtable } from './vtable.js';

// Each compared plan as a person names it: its name, strategy and mesh,
// from its list entry (GET /v1/plans?after=ID-1&limit=1) and its graph.
async function planHeads(ids) {
  const heads = await Promise.all(ids.map(async (id) => {
    let p = null;
    try {
      const l = await getJson(`/v1/plans?after=${Number(id) - 1}&limit=1`);
      p = (l.items || []).find((x) => String(x.id) === String(id)) || null;
    } catch { /* named by its id below */ }
    let graphName = null;
    let strategy = DASH;
    if (p) {
      try {
        const g = await getJson(`/v1/graphs/${p.graph_id}`);
        graphName = g.name;
        if (g.format === 'json') strategy = strategyOf(g.graph);
      } catch { /* no strategy */ }
    }
    return { id, name: p ? planName(p, graphName) : `plan ${id}`, strategy, mesh: p ? planMesh(p, null) : DASH };
  }));
  // two plans of one name are told apart by their ids
  for (const x of heads) {
    x.label = heads.filter((y) => y.name === x.name).length > 1 ? `${x.name} #${x.id}` : x.name;
  }
  return heads;
}

export async function comparePage(main, ctx, idsText) {
  const ids = (idsText || '').split(',').map((s) => s.trim()).filter(Boolean);
  const input = h('input', { id: 'compare-ids', value: ids.join(','), placeholder: 'plan ids, e.g. 2,3', 'aria-label': 'plan ids' });
  const prof = h('select', { id: 'compare-profile', 'aria-label': 'device profile' }, BUILTIN_PROFILES.map((p) => h('option', { value: p }, p)));
  const params = new URLSearchParams(location.hash.split('?')[1] || '');
  if (params.get('profile')) prof.value = params.get('profile');
  const go = () => { location.hash = `#/compare/${input.value.replace(/\s+/g, '')}?profile=${encodeURIComponent(prof.value)}`; };
  const form = h('form', { class: 'toolbar', onsubmit: (e) => { e.preventDefault(); go(); } },
    h('label', {}, 'plans ', input), h('label', {}, 'profile ', prof), h('button', { type: 'submit' }, 'Compare'));
  fill(main, h('h1', {}, 'Compare plans'), form);
  if (ids.length < 2) {
    main.append(h('p', { class: 'muted' }, 'Enter 2 to 4 plan ids, or tick them in the plans list.'));
    return;
  }
  const out = h('div', {}, h('p', { class: 'muted' }, 'Comparing\u2026'));
  main.append(out);
  let c;
  let heads;
  try {
    [c, heads] = await Promise.all([
      getJson(`/v1/compare?plans=${ids.map(encodeURIComponent).join(',')}&profile=${encodeURIComponent(prof.value)}`),
      planHeads(ids),
    ]);
  } catch (err) {
    fill(out, errorBox(err));
    return;
  }
  const labels = heads.map((x) => x.label);
  const costs = c.plans.map((p) => p.cost);
  const charts = [
    barChart({ title: 'Peak memory per device', labels, datasets: [{ label: 'bytes', data: costs.map((x) => x.memory.peak_bytes) }], format: fmtBytes, height: 200 }),
    barChart({ title: 'Communication', labels, datasets: [{ label: 'bytes', data: costs.map((x) => x.communication.bytes) }], format: fmtBytes, height: 200 }),
    barChart({ title: 'FLOPs per device', labels, datasets: [{ label: 'FLOPs', data: costs.map((x) => x.flops.total) }], format: fmtNum, height: 200 }),
    barChart({ title: 'Predicted step time', labels, datasets: [
      { label: 'compute', data: costs.map((x) => x.time.compute_s) },
      { label: 'communication', data: costs.map((x) => x.time.communication_s) },
    ], format: fmtSeconds, stacked: true, height: 200 }),
  ];
  ctx.onLeave(() => { for (const x of charts) x.chart.destroy(); });

  const summary = h('table', { class: 'summary-table', id: 'compare-summary' },
    h('thead', {}, h('tr', {}, h('th', {}, ''), heads.map((x) => h('th', { 'data-plan': String(x.id) },
      h('a', { href: `#/plan/${x.id}` }, x.label), h('br'),
      h('span', { class: 'muted plan-meta' }, `${x.strategy} \u00b7 ${x.mesh}`))))),
    h('tbody', {},
      [['peak / device', (x) => fmtBytes(x.memory.peak_bytes)], ['fits', (x) => (x.memory.fits ? 'yes' : `no ${x.memory.message}`)],
        ['communication', (x) => `${fmtBytes(x.communication.bytes)} (${x.communication.n_collectives} collectives)`],
        ['FLOPs / device', (x) => fmtNum(x.flops.total)], ['predicted step', (x) => fmtSeconds(x.time.step_s)], ['profile', (x) => x.profile]]
        .map(([k, f]) => h('tr', {}, h('th', {}, k), costs.map((x) => h('td', {}, f(x)))))));

  const fd = c.first_divergence;
  const diverge = h('section', { class: 'diverge', id: 'first-divergence' }, h('h2', {}, 'Where they first diverge'),
    fd ? [h('p', {}, h('code', {}, fd.tensor)), h('ul', {}, fd.plans.map((p, i) => h('li', {}, h('strong', {}, `${labels[i]}: `), h('code', {}, p.sharding), ` \u2014 ${p.origin}`)))]
      : h('p', {}, 'Nowhere: every compared tensor has the same sharding.'));

  const diffs = c.differences || [];
  const table = vtable({
    class: 'diff-table',
    height: Math.min(420, 40 + diffs.length * 26),
    columns: [{ key: 'tensor', title: 'tensor', width: '2fr' }, ...heads.map((x, i) => ({ key: `p${i}`, title: `${x.label} (${x.strategy}, ${x.mesh})`, width: '1.5fr' }))],
    cell(i, col) {
      const d = diffs[i];
      if (col.key === 'tensor') return d.tensor;
      const k = Number(col.key.slice(1));
      const s = d.shardings[k];
      return k > 0 && s !== d.shardings[0] ? h('span', { class: 'differs' }, s) : s === undefined ? DASH : s;
    },
  });
  table.setCount(diffs.length);
  const benchBox = h('section', { id: 'compare-bench' }, h('h2', {}, 'Benchmarks'), h('p', { class: 'muted' }, 'Loading benchmarks\u2026'));
  fill(out, 
    summary,
    h('div', { class: 'charts', id: 'compare-charts' }, charts.map((x) => x.el)),
    benchBox,
    diverge,
    h('h2', {}, `Sharding differences: ${diffs.length} of ${c.compared_tensors} tensors`),
    c.structure_differs ? h('p', { class: 'diag warning' }, 'The plans are of different modules: tensors are matched by position.') : null,
    table.el,
  );
  loadBenchmarks(ctx, benchBox, ids, labels, charts);
}

// Each plan's newest succeeded run: a box-like floating bar min..max with
// the median as a dash across it, and measured median vs predicted step.
const RUN_POLL_MS = 500;
const RUN_WAIT_MS = 15 * 60 * 1000;

// Queues one benchmark run of each plan and waits until all have ended,
// showing each run's status; then reloads the benchmark section.
async function benchmarkAll(ctx, box, ids, labels, charts, button) {
  button.disabled = true;
  const status = h('p', { id: 'compare-bench-status' });
  box.append(status);
  const runs = [];
  try {
    for (const id of ids) {
      const r = await api('/v1/benchmarks', { method: 'POST', body: JSON.stringify({ plan_id: Number(id) }) });
      runs.push(r.json);
    }
  } catch (err) {
    if (ctx.alive()) { box.append(errorBox(err)); button.disabled = false; }
    return;
  }
  const until = Date.now() + RUN_WAIT_MS;
  for (;;) {
    if (!ctx.alive()) return;
    fill(status, runs.map((r, i) => h('span', { class: 'run-state', 'data-status': r.status },
      `${labels[i]}: run ${r.id} ${r.status}${r.status === 'running' ? ` ${Math.round((Number(r.progress) || 0) * 100)}%` : ''}${r.error ? ` (${r.error})` : ''}`, i + 1 < runs.length ? '; ' : '')));
    if (runs.every(isFinal) || Date.now() > until) break;
    await new Promise((res) => setTimeout(res, RUN_POLL_MS));
    try {
      for (let i = 0; i < runs.length; i++) {
        if (!isFinal(runs[i])) runs[i] = await getJson(`/v1/benchmarks/${runs[i].id}`);
      }
    } catch (err) {
      if (ctx.alive()) box.append(errorBox(err));
      return;
    }
  }
  if (!ctx.alive()) return;
  const kept = status;
  await loadBenchmarks(ctx, box, ids, labels, charts);
  if (ctx.alive()) box.append(kept);
}

async function loadBenchmarks(ctx, box, ids, labels, charts) {
  let runs;
  try {
    runs = await Promise.all(ids.map((id) => newestSucceeded(id)));
  } catch (err) {
    if (ctx.alive()) fill(box, h('h2', {}, 'Benchmarks'), errorBox(err));
    return;
  }
  if (!ctx.alive()) return;
  const start = h('button', { type: 'button', id: 'compare-bench-start' }, 'Benchmark these plans');
  start.addEventListener('click', () => benchmarkAll(ctx, box, ids, labels, charts, start));
  const head = h('div', { class: 'toolbar' }, h('h2', {}, 'Benchmarks'), start);
  const res = runs.map((r) => (r && r.results) || null);
  const its = res.map((r) => (r && Array.isArray(r.iter_s) && r.iter_s.length ? r.iter_s : null));
  const table = h('table', { class: 'summary-table', id: 'compare-bench-table' },
    h('thead', {}, h('tr', {}, h('th', {}, ''), labels.map((l) => h('th', {}, l)))),
    h('tbody', {},
      [['benchmark', (r, i) => (runs[i] ? `run ${runs[i].id}` : DASH)],
        ['measured step (median)', (r) => (r ? fmtSeconds(r.step_s) : DASH)],
        ['min / max', (r, i) => (its[i] ? `${fmtSeconds(Math.min(...its[i]))} / ${fmtSeconds(Math.max(...its[i]))}` : DASH)],
        ['predicted step (run)', (r) => (r ? fmtSeconds(r.predicted_step_s) : DASH)],
        ['numerics', (r) => (r && r.numerics ? (r.numerics.match ? 'match' : 'MISMATCH') : DASH)]]
        .map(([k, f]) => h('tr', {}, h('th', {}, k), res.map((r, i) => h('td', {}, f(r, i)))))));
  if (!res.some(Boolean)) {
    fill(box, head, table, h('p', { class: 'muted' }, 'No succeeded benchmark of these plans yet (start them here or from a plan\'s page).'));
    return;
  }
  const dist = barChart({
    title: 'Measured per-iteration time: min..max, median',
    labels,
    datasets: [
      { label: 'min..max', data: its.map((x) => (x ? [Math.min(...x), Math.max(...x)] : null)), backgroundColor: '#b9c8ee' },
      // The median as a dash across the bar (a line dataset without its line).
      { type: 'line', label: 'median', data: res.map((r) => (r ? r.step_s : null)), showLine: false, pointStyle: 'line',
        pointRadius: 28, pointHoverRadius: 28, borderWidth: 3, borderColor: '#1d2330', backgroundColor: '#1d2330', order: -1 },
    ],
    format: (v) => (Array.isArray(v) ? `${fmtSeconds(v[0])} .. ${fmtSeconds(v[1])}` : fmtSeconds(v)),
    height: 220,
  });
  const mvp = barChart({
    title: 'Measured vs predicted step',
    labels,
    datasets: [
      { label: 'measured (median)', data: res.map((r) => (r ? r.step_s : null)) },
      { label: 'predicted', data: res.map((r) => (r ? r.predicted_step_s ?? null : null)) },
    ],
    format: fmtSeconds,
    height: 220,
  });
  charts.push(dist, mvp);
  fill(box, head, table, h('div', { class: 'charts', id: 'compare-bench-charts' }, dist.el, mvp.el));
}
