// Compare 2-4 plans, each headed by its name, strategy and mesh
// (`data=2 x model=4`): GET /v1/compare?plans=...: memory, communication,
// FLOPs and predicted step as bars, where the plans first diverge, and the
// tensors whose shardings differ (highlighted where they differ from the
// first plan); each plan's newest succeeded benchmark: its per-iteration
// min / median / max and measured vs predicted step ('\u2014' without one).
// "Benchmark these plans" queues one run of each (POST /v1/benchmarks) and
// shows them when they end: how a suggestion applied with "apply and
// compare" is checked by a real run. Each plan's column is headed with its
// model's name, strategy and mesh (GET /v1/plans/{id}, /v1/graphs/{id});
// every differing tensor shows its bytes per device in each plan and the
// change from the first, and, selected, the plans' device grids side by
// side; the collectives one plan adds or removes against the first are
// listed (GET /v1/plans/{id}/collectives).
import { api, getJson } from './api.js';
import { isFinal, newestSucceeded } from './bench.js';
import { barChart } from './charts.js';
import { BUILTIN_PROFILES, shardingText } from './plan.js';
import { planMesh, planName, strategyOf } from './plans.js';
import { meshLink } from './mesh.js';
import { blocksPerDim, deviceGrid } from './sharding.js';
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
  const info = await planInfos(ids, prof.value);
  if (!ctx.alive()) return;
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
    h('thead', {}, h('tr', {}, h('th', {}, ''), heads.map((x) => h('th', { class: 'plan-head', 'data-plan': String(x.id) },
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
      const text = k > 0 && s !== d.shardings[0] ? h('span', { class: 'differs' }, s) : s === undefined ? DASH : s;
      const b = bytesOf(matched[i][k]);
      const b0 = bytesOf(matched[i][0]);
      const delta = k > 0 && b !== null && b0 !== null && b !== b0 ? ` (${b > b0 ? '+' : '\u2212'}${fmtBytes(Math.abs(b - b0))})` : '';
      return h('span', {}, text, b !== null ? h('span', { class: `muted mem-cell${delta ? ' mem-changed' : ''}` }, ` \u00b7 ${fmtBytes(b)}${delta}`) : null);
    },
    onRowClick: (i) => showGrids(i),
  });
  table.setCount(diffs.length);
  // each difference's value in every plan's document (null when not found)
  const matched = diffs.map((d) => info.map((x) => findValue(x.plan, d.tensor)));
  const gridsBox = h('section', { id: 'compare-grids', class: 'detail' }, h('p', { class: 'muted' }, 'Select a tensor to see its device grid in each plan side by side.'));
  function showGrids(i) {
    const d = diffs[i];
    fill(gridsBox, h('h3', {}, `Device grids of ${d.tensor}`),
      h('div', { class: 'grids-side' }, info.map((x, k) => {
        const v = matched[i][k];
        const mesh = v && x.plan ? meshOf(x.plan, v) : null;
        const b = bytesOf(v);
        return h('div', { class: 'grid-col', 'data-plan': ids[k] },
          h('div', { class: 'grid-col-head' }, h('strong', {}, labels[k]), ` ${x.name} \u00b7 ${x.strategy} \u00b7 ${x.mesh}`),
          h('div', { class: 'mono' }, v ? shardingText(v.sharding) : d.shardings[k] ?? DASH),
          h('div', { class: 'muted' }, v && v.local_shape ? `per device [${v.local_shape.join('\u00d7')}], ${fmtBytes(b)}` : DASH),
          v && mesh ? gridOf(v, mesh) : h('p', { class: 'muted' }, 'not found in this plan\'s document'));
      })));
  }
  const collBox = collectiveChanges(info, labels);
  const memBox = memoryChanges(diffs, matched, labels);
  const benchBox = h('section', { id: 'compare-bench' }, h('h2', {}, 'Benchmarks'), h('p', { class: 'muted' }, 'Loading benchmarks\u2026'));
  fill(out, 
    summary,
    h('div', { class: 'charts', id: 'compare-charts' }, charts.map((x) => x.el)),
    benchBox,
    diverge,
    h('h2', {}, `Sharding differences: ${diffs.length} of ${c.compared_tensors} tensors`),
    c.structure_differs ? h('p', { class: 'diag warning' }, 'The plans are of different modules: tensors are matched by position.') : null,
    h('p', { class: 'muted' }, 'Each cell: the sharding, then the tensor\'s bytes per device and (other plans) the change from the first plan.'),
    table.el,
    gridsBox,
    memBox,
    collBox,
  );
  if (diffs.length) { table.select(0); showGrids(0); }
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

// ---- per plan: name, strategy, mesh, document, collectives -------------------

const ELEM_BYTES = { f64: 8, f32: 4, f16: 2, bf16: 2, i64: 8, ui64: 8, i32: 4, ui32: 4, i16: 2, ui16: 2, i8: 1, ui8: 1, i1: 1, f8E4M3FN: 1, f8E5M2: 1, c64: 8, c128: 16 };

// Bytes per device of plan value v (its local shape times its element
// size), or null.
export function bytesOf(v) {
  if (!v || !Array.isArray(v.local_shape)) return null;
  const m = /(?:<|x)([a-zA-Z][a-zA-Z0-9]*)>$/.exec(v.type || '');
  const e = m ? ELEM_BYTES[m[1]] : undefined;
  if (!e) return null;
  return v.local_shape.reduce((a, n) => a * Math.max(0, n), 1) * e;
}

// The value a compare label names in plan (GET /v1/plans/{id}'s "plan"):
// "@main input 3 ...", "@main output 0", or a result by its value name
// ("stablehlo.dot_general \"v0\"").
export function findValue(plan, label) {
  if (!plan) return null;
  const fns = plan.functions || [];
  let m = /^@(\S+) (input|output) (\d+)/.exec(label);
  if (m) {
    const f = fns.find((x) => x.name === m[1]);
    const xs = f ? (m[2] === 'input' ? f.inputs : f.outputs) : null;
    return (xs || []).find((v) => v.index === Number(m[3])) || null;
  }
  m = /"([^"]+)"$/.exec(label);
  if (!m) return null;
  for (const f of fns) for (const op of f.ops || []) for (const v of op.results || []) if (v.name === m[1]) return v;
  return null;
}

function meshOf(plan, v) {
  const ms = plan.meshes || [];
  return (v.sharding && ms.find((x) => x.name === v.sharding.mesh)) || ms[0] || null;
}

// The device grid of v over its two most sharded dims.
function gridOf(v, mesh) {
  const rank = (v.shape || []).length;
  const nb = blocksPerDim(v.sharding, mesh, rank);
  const order = [...Array(rank).keys()].sort((x, y) => nb[y] - nb[x] || x - y);
  const a = rank >= 1 ? Math.min(order[0], rank >= 2 ? order[1] : order[0]) : -1;
  const b = rank >= 2 ? Math.max(order[0], order[1]) : -1;
  return deviceGrid(v, mesh, { a, b });
}

// Each plan's document, its graph's name and strategy, its mesh text and
// its collectives (errors leave the parts out: the page still compares).
async function planInfos(ids, profile) {
  return Promise.all(ids.map(async (id) => {
    const out = { id, name: `plan ${id}`, strategy: DASH, mesh: DASH, plan: null, collectives: null };
    try {
      const doc = await getJson(`/v1/plans/${encodeURIComponent(id)}`);
      out.plan = doc.plan;
      out.mesh = (doc.plan.meshes || []).map((m) => `${m.name} ${(m.axes || []).map((x) => `${x.name}=${x.size}`).join(',')}`).join('; ') || DASH;
      if (doc.graph_id) {
        const g = await getJson(`/v1/graphs/${doc.graph_id}`);
        out.name = g.name || `graph ${doc.graph_id}`;
        out.strategy = g.graph ? strategyOf(g.graph) : DASH;
      }
    } catch { /* summary only */ }
    try {
      out.collectives = (await getJson(`/v1/plans/${encodeURIComponent(id)}/collectives?profile=${encodeURIComponent(profile)}`)).collectives || [];
    } catch { /* not listed */ }
    return out;
  }));
}

// Collectives counted by what they are: kind, axes and the op they serve.
function collKey(c) {
  return `${c.kind} over ${(c.axes || []).join(',') || '(none)'} for ${c.for_op || c.op}`;
}

function countColls(cs) {
  const m = new Map();
  for (const c of cs || []) {
    const k = collKey(c);
    const e = m.get(k) || { n: 0, bytes: 0, c };
    e.n += c.count || 1;
    e.bytes += (c.bytes || 0) * (c.count || 1);
    m.set(k, e);
  }
  return m;
}

// What each plan adds or removes against the first.
export function collectiveChanges(info, labels) {
  const box = h('section', { id: 'compare-collectives' }, h('h2', {}, 'Collectives added and removed'));
  if (!info[0].collectives) {
    box.append(h('p', { class: 'muted' }, 'The first plan\'s collectives could not be listed.'));
    return box;
  }
  const base = countColls(info[0].collectives);
  for (let k = 1; k < info.length; k++) {
    if (!info[k].collectives) { box.append(h('p', { class: 'muted' }, `${labels[k]}: collectives not listed.`)); continue; }
    const cur = countColls(info[k].collectives);
    const rows = [];
    for (const [key, e] of cur) {
      const b = base.get(key);
      if (!b || e.n > b.n) rows.push({ change: 'adds', key, n: e.n - (b ? b.n : 0), bytes: e.bytes - (b ? b.bytes : 0), plan: info[k].id, axes: e.c.axes });
    }
    for (const [key, b] of base) {
      const e = cur.get(key);
      if (!e || e.n < b.n) rows.push({ change: 'removes', key, n: b.n - (e ? e.n : 0), bytes: b.bytes - (e ? e.bytes : 0), plan: info[0].id, axes: b.c.axes });
    }
    box.append(h('h3', {}, `${labels[k]} against ${labels[0]}`), rows.length
      ? h('table', { class: 'summary-table coll-changes', 'data-plan': String(info[k].id) },
        h('thead', {}, h('tr', {}, ['change', 'collective', 'count', 'bytes / device'].map((t) => h('th', {}, t)))),
        h('tbody', {}, rows.map((r) => h('tr', { class: `coll-${r.change}` },
          h('td', {}, r.change === 'adds' ? '+ adds' : '\u2212 removes'), h('td', { class: 'mono' }, r.key, ' ', meshLink(r.plan, r.axes)),
          h('td', { class: 'num' }, String(r.n)), h('td', { class: 'num' }, `${r.change === 'adds' ? '+' : '\u2212'}${fmtBytes(Math.abs(r.bytes))}`)))))
      : h('p', { class: 'ok' }, 'The same collectives.'));
  }
  return box;
}

// Per differing tensor, bytes per device in each plan and the change from
// the first: the largest changes first.
function memoryChanges(diffs, matched, labels) {
  const box = h('section', { id: 'compare-memory' }, h('h2', {}, 'Memory change per tensor'));
  const rows = diffs.map((d, i) => ({ d, bytes: matched[i].map(bytesOf) }))
    .filter((r) => r.bytes[0] !== null && r.bytes.some((b) => b !== null && b !== r.bytes[0]));
  if (!rows.length) { box.append(h('p', { class: 'muted' }, 'No differing tensor changes its bytes per device.')); return box; }
  const change = (r) => Math.max(...r.bytes.slice(1).map((b) => (b === null ? 0 : Math.abs(b - r.bytes[0]))));
  rows.sort((x, y) => change(y) - change(x));
  const total = labels.map((_, k) => rows.reduce((a, r) => a + (r.bytes[k] ?? 0) - (r.bytes[0] ?? 0), 0));
  box.append(h('table', { class: 'summary-table', id: 'compare-memory-table' },
    h('caption', {}, `${rows.length} tensors change their bytes per device${labels.length > 1 ? `; in all: ${labels.slice(1).map((l, k) => `${l} ${total[k + 1] >= 0 ? '+' : '\u2212'}${fmtBytes(Math.abs(total[k + 1]))}`).join(', ')}` : ''}`),
    h('thead', {}, h('tr', {}, h('th', {}, 'tensor'), labels.map((l, k) => h('th', {}, k ? `${l} (change)` : l)))),
    h('tbody', {}, rows.slice(0, 25).map((r) => h('tr', {}, h('td', { class: 'mono' }, r.d.tensor),
      r.bytes.map((b, k) => h('td', { class: 'num' }, b === null ? DASH : k === 0 ? fmtBytes(b)
        : `${fmtBytes(b)} (${b >= r.bytes[0] ? '+' : '\u2212'}${fmtBytes(Math.abs(b - r.bytes[0]))})`)))))),
  );
  if (rows.length > 25) box.append(h('p', { class: 'muted' }, `The 25 largest changes of ${rows.length} shown.`));
  return box;
}
