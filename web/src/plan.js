// Plan view: GET /v1/plans/{id}. Every input, op result and output with its
// sharding in a virtualised table; for the selected value its device grid,
// its sharding origins and the op's propagation edges and rule ("why");
// per-device memory and communication (GET /v1/plans/{id}/cost); memory over
// program order with the peak's op and largest buffers (GET .../memory);
// benchmark runs of the plan (bench.js); the advisor's lint, collectives,
// suggestions and what-if (advise.js).
import { collectivesPanel, lintPanel, suggestPanel, whatifPanel } from './advise.js';
import { getJson, listAll } from './api.js';
import { benchPanel } from './bench.js';
import { areaChart, barChart } from './charts.js';
import { blocksPerDim, deviceGrid, refName } from './sharding.js';
import { whyPanel } from './why.js';
import { DASH, debounce, errorBox, fill, fmtBytes, fmtNum, fmtSeconds, h } from './util.js';
import { vtable } from './vtable.js';

export const BUILTIN_PROFILES = ['cpu-local', 'a100-80gb', 'h100-sxm', 'tpu-v4', 'tpu-v5e'];

// Plans with more ops than this open the advisor panels only on request.
const LAZY_OPS = 5000;

// The built-in profiles and the stored ones.
export async function profileNames() {
  const profiles = [...BUILTIN_PROFILES];
  try { for (const p of await listAll('profiles')) if (!profiles.includes(p.name)) profiles.push(p.name); } catch { /* listed built-ins only */ }
  return profiles;
}

export function shardingText(s) {
  if (!s) return 'replicated';
  const dims = s.dims.map((d) => `{${d.axes.map((a) => `"${refName(a)}"`).join(', ')}${d.closed ? '' : ', ?'}}`);
  const rep = s.replicated && s.replicated.length ? `, replicated={${s.replicated.map((a) => `"${refName(a)}"`).join(', ')}}` : '';
  return `@${s.mesh} [${dims.join(', ')}]${rep}`;
}

// The sharding as a JAX PartitionSpec (the plan's partition_spec); none:
// the note's first clause says why (sub-axes, open dims, ...).
export function pspecText(s) {
  if (!s) return 'P()';
  if (s.partition_spec) return s.partition_spec;
  if (s.partition_spec_note) return `none: ${s.partition_spec_note.split(';')[0]}`;
  return DASH;
}

// Flattens a plan into rows: {f, kind, op, v, path}.
export function planRows(plan) {
  const rows = [];
  for (const f of plan.functions || []) {
    for (const v of f.inputs || []) rows.push({ f, kind: 'input', op: null, v, path: `${f.path || ''}/inputs/${v.index}` });
    for (const op of f.ops || []) {
      if (!op.results || op.results.length === 0) rows.push({ f, kind: 'op', op, v: null, path: op.path });
      else for (const v of op.results) rows.push({ f, kind: 'op', op, v, path: op.path });
    }
    for (const v of f.outputs || []) rows.push({ f, kind: 'output', op: null, v, path: `${f.path || ''}/outputs/${v.index}` });
  }
  return rows;
}

function originText(o) {
  if (!o) return '';
  return Object.entries(o).map(([k, v]) => `${k}\u2190${v}`).join(' ');
}

export async function planPage(main, ctx, id) {
  fill(main, h('h1', {}, `Plan ${id}`), h('p', { class: 'muted' }, 'Loading\u2026'));
  let doc;
  const t0 = performance.now();
  try {
    doc = await getJson(`/v1/plans/${encodeURIComponent(id)}`);
  } catch (err) {
    fill(main, h('h1', {}, `Plan ${id}`), errorBox(err));
    return;
  }
  const tFetched = performance.now();
  const plan = doc.plan;
  const meshes = new Map((plan.meshes || []).map((m) => [m.name, m]));
  const all = planRows(plan);
  const nOps = (plan.functions || []).reduce((n, f) => n + (f.ops ? f.ops.length : 0), 0);
  const diagByPath = new Map();
  for (const d of plan.diagnostics || []) {
    if (!diagByPath.has(d.path)) diagByPath.set(d.path, []);
    diagByPath.get(d.path).push(d);
  }
  let view = all;

  const detail = h('section', { class: 'detail', id: 'value-detail' }, h('p', { class: 'muted' }, 'Select a row to see its device grid and where its sharding came from.'));
  const table = vtable({
    class: 'ops-table',
    height: 420,
    rowHeight: 24,
    columns: [
      { key: 'n', title: '#', width: '4.5em' },
      { key: 'kind', title: 'kind', width: '4.5em' },
      { key: 'path', title: 'path', width: '8em' },
      { key: 'op', title: 'op', width: '1.4fr' },
      { key: 'value', title: 'value', width: '1fr' },
      { key: 'type', title: 'type', width: '1.3fr' },
      { key: 'sharding', title: 'sharding', width: '1.8fr' },
      { key: 'pspec', title: 'PartitionSpec', width: '1.3fr' },
      { key: 'local', title: 'per device', width: '8em' },
      { key: 'origin', title: 'origin', width: '1.2fr' },
    ],
    rowClass: (i) => (view[i].v && view[i].v.sharding ? 'sharded' : ''),
    cell(i, col) {
      const r = view[i];
      const v = r.v;
      switch (col.key) {
        case 'n': return String(i);
        case 'kind': return r.kind;
        case 'path': return r.path || '';
        case 'op': return r.op ? r.op.op : r.kind === 'input' ? '(argument)' : '(return)';
        case 'value': return v ? (v.name !== undefined ? v.name : `#${v.index}`) : DASH;
        case 'type': return v ? v.type : '';
        case 'sharding': return v ? shardingText(v.sharding) : '';
        case 'pspec': return v ? pspecText(v.sharding) : '';
        case 'local': return v && v.local_shape ? `[${v.local_shape.join('\u00d7')}]` : '';
        case 'origin': return v ? originText(v.origin) : '';
        default: return '';
      }
    },
    onRowClick: (i) => showDetail(view[i]),
  });

  const search = h('input', { type: 'search', id: 'op-filter', placeholder: 'filter: op, value name, axis\u2026', 'aria-label': 'filter ops' });
  const shardedOnly = h('input', { type: 'checkbox', id: 'sharded-only' });
  const count = h('span', { class: 'muted', id: 'op-count' });
  const apply = () => {
    const s = search.value.trim().toLowerCase();
    const so = shardedOnly.checked;
    view = all.filter((r) => {
      if (so && !(r.v && r.v.sharding)) return false;
      if (!s) return true;
      const v = r.v;
      return (r.op && r.op.op.toLowerCase().includes(s)) || (v && v.name && String(v.name).toLowerCase().includes(s)) ||
        (v && v.sharding && v.sharding.text.toLowerCase().includes(s)) || (r.path && r.path.includes(s));
    });
    table.setCount(view.length);
    count.textContent = `${view.length} of ${all.length} values (${nOps} ops)`;
  };
  search.addEventListener('input', debounce(apply, 150));
  shardedOnly.addEventListener('change', apply);

  // The graph document's ops (graph input), for the operands' names.
  let graphOps = null;
  if (doc.graph_id) {
    getJson(`/v1/graphs/${doc.graph_id}`).then((g) => {
      graphOps = g && g.graph && Array.isArray(g.graph.ops) ? g.graph.ops : null;
      if (graphOps && shown && shown.op && shown.op.edges && ctx.alive()) showDetail(shown);
    }).catch(() => { /* operands are named by position */ });
  }
  const operandNames = (r) => {
    const m = r.op && /^\/ops\/(\d+)$/.exec(r.op.path || '');
    const g = m && graphOps ? graphOps[Number(m[1])] : null;
    return g && g.op === r.op.op && Array.isArray(g.operands) ? g.operands : null;
  };
  let shown = null;
  let whatif = null;
  function showDetail(r) {
    shown = r;
    if (whatif) whatif.select(r);
    const v = r.v;
    const parts = [h('h2', {}, v ? `${r.kind} ${v.name !== undefined ? `"${v.name}"` : `#${v.index}`} ${r.op ? `of ${r.op.op}` : ''}` : r.op.op)];
    if (v) {
      parts.push(h('dl', { class: 'kv' },
        h('dt', {}, 'path'), h('dd', {}, r.path || DASH),
        h('dt', {}, 'type'), h('dd', {}, v.type),
        h('dt', {}, 'sharding'), h('dd', { class: 'mono' }, v.sharding ? v.sharding.text : 'replicated (no sharding)'),
        h('dt', {}, 'PartitionSpec'), h('dd', { class: 'mono', id: 'value-pspec' }, pspecText(v.sharding)),
        v.sharding && v.sharding.partition_spec_note ? [h('dt', {}, 'in JAX'), h('dd', {}, v.sharding.partition_spec_note)] : null,
        v.logical_axes ? [h('dt', {}, 'Flax logical axes'), h('dd', { class: 'mono' }, `(${v.logical_axes.map((x) => (x === null ? 'None' : `'${x}'`)).join(', ')}${v.logical_axes.length === 1 ? ',' : ''})`)] : null,
        h('dt', {}, 'per-device shape'), h('dd', {}, v.local_shape ? `[${v.local_shape.join(', ')}]` : DASH)));
      const mesh = v.sharding ? meshes.get(v.sharding.mesh) : plan.meshes && plan.meshes[0];
      if (mesh) parts.push(gridPanel(v, mesh));
    }
    // Why: origins and edges in words, the rule (why.js).
    const why = whyPanel(r, diagByPath.get(r.path), operandNames(r));
    parts.push(why);
    fill(detail, ...parts);
  }

  function gridPanel(v, mesh) {
    const rank = (v.shape || []).length;
    const nb = blocksPerDim(v.sharding, mesh, rank);
    // Default view: the two most-sharded dims (ties: the leading ones), in order.
    const order = [...Array(rank).keys()].sort((x, y) => nb[y] - nb[x] || x - y);
    let a = rank >= 1 ? Math.min(order[0], rank >= 2 ? order[1] : order[0]) : -1;
    let b = rank >= 2 ? Math.max(order[0], order[1]) : -1;
    const fixed = {};
    const box = h('div', { class: 'grid-box', id: 'device-grid' });
    const mk = (cur, other, onSel, label) => h('label', {}, `${label} `, h('select', { onchange: (e) => { onSel(Number(e.target.value)); draw(); } },
      [...Array(rank).keys()].map((d) => h('option', { value: String(d), selected: d === cur }, `dim ${d} (${v.shape[d]}, ${nb[d]} blocks)`))));
    const controls = h('div', { class: 'toolbar' });
    const draw = () => {
      const others = [...Array(rank).keys()].filter((d) => d !== a && d !== b && nb[d] > 1);
      fill(controls, 
        rank >= 2 ? mk(a, b, (x) => { a = x; if (a === b) b = [...Array(rank).keys()].find((d) => d !== a); }, 'rows:') : null,
        rank >= 2 ? mk(b, a, (x) => { b = x; if (a === b) a = [...Array(rank).keys()].find((d) => d !== b); }, 'columns:') : null,
        others.map((d) => h('label', {}, ` dim ${d} block `, h('input', { type: 'number', min: '0', max: String(nb[d] - 1), value: String(fixed[d] || 0), style: { width: '4em' },
          onchange: (e) => { fixed[d] = Math.max(0, Math.min(nb[d] - 1, Number(e.target.value) || 0)); draw(); } }))),
      );
      const title = rank === 0 ? 'scalar: every device holds it' : rank === 1 ? `dim 0 in ${nb[0]} blocks` : `rows = dim ${a}, columns = dim ${b}${others.length ? `; other sharded dims at the chosen block` : ''}`;
      fill(box, h('p', { class: 'muted' }, `Device grid (mesh "${mesh.name}": ${(mesh.axes || []).map((x) => `${x.name}=${x.size}`).join(', ')}): ${title}`),
        deviceGrid(v, mesh, { a: rank >= 1 ? a : -1, b: rank >= 2 ? b : -1, fixed }));
    };
    draw();
    return h('div', {}, controls, box);
  }

  // Cost: memory per device vs capacity, communication per axis and kind.
  const profiles = await profileNames();
  const profSel = h('select', { id: 'profile', 'aria-label': 'device profile' }, profiles.map((p) => h('option', { value: p }, p)));
  const costBox = h('section', { class: 'cost', id: 'plan-cost' });
  const charts = [];
  async function loadCost() {
    fill(costBox, h('p', { class: 'muted' }, 'Loading cost\u2026'));
    for (const c of charts.splice(0)) c.destroy();
    let c;
    try {
      c = await getJson(`/v1/plans/${doc.id}/cost?profile=${encodeURIComponent(profSel.value)}`);
    } catch (err) {
      fill(costBox, errorBox(err));
      return;
    }
    const m = c.memory;
    const nDev = Math.min(c.devices || 1, 64);
    const devLabels = Array.from({ length: nDev }, (_, i) => `D${i}`);
    const pct = m.capacity_bytes ? (100 * m.peak_bytes) / m.capacity_bytes : 0;
    // Scaled to the peak (the capacity is in the title), so the peak shows.
    const mem = barChart({
      title: `Memory per device at the peak: ${fmtBytes(m.peak_bytes)} = ${pct.toFixed(pct < 10 ? 2 : 0)}% of the ${c.profile} capacity (${fmtBytes(m.capacity_bytes)})`,
      labels: devLabels,
      datasets: [
        { label: 'parameters', data: devLabels.map(() => m.parameter_bytes) },
        { label: 'inputs', data: devLabels.map(() => m.input_bytes) },
        { label: 'activations', data: devLabels.map(() => m.peak_activation_bytes) },
      ],
      format: fmtBytes,
      stacked: true,
    });
    const comm = c.communication;
    const axisChart = barChart({
      title: 'Communication per mesh axis',
      labels: comm.per_axis.length ? comm.per_axis.map((x) => x.axes) : ['(none)'],
      datasets: [{ label: 'bytes', data: comm.per_axis.length ? comm.per_axis.map((x) => x.bytes) : [0] }],
      format: fmtBytes,
    });
    // per_kind sums every run (a loop body's collectives once per trip), as per_axis does
    const kinds = new Map();
    for (const x of comm.per_kind || []) kinds.set(x.kind, x.bytes);
    const kindChart = barChart({
      title: 'Communication per collective kind',
      labels: kinds.size ? [...kinds.keys()] : ['(none)'],
      datasets: [{ label: 'bytes', data: kinds.size ? [...kinds.values()] : [0] }],
      format: fmtBytes,
    });
    charts.push(mem.chart, axisChart.chart, kindChart.chart);
    fill(costBox, 
      h('dl', { class: 'kv' },
        h('dt', {}, 'devices'), h('dd', {}, String(c.devices)),
        h('dt', {}, 'peak / device'), h('dd', { id: 'peak-bytes' }, `${fmtBytes(m.peak_bytes)} of ${fmtBytes(m.capacity_bytes)} ${m.fits ? '(fits)' : '(does not fit)'} ${m.message || ''}`),
        h('dt', {}, 'parameters / inputs / outputs / activations'), h('dd', {}, [m.parameter_bytes, m.input_bytes, m.output_bytes, m.peak_activation_bytes].map(fmtBytes).join(' / ')),
        h('dt', {}, 'FLOPs / device'), h('dd', {}, fmtNum(c.flops.total)),
        h('dt', {}, 'communication'), h('dd', {}, `${fmtBytes(comm.bytes)} in ${comm.n_collectives} collectives, ${fmtSeconds(comm.seconds)}`),
        h('dt', {}, 'predicted step'), h('dd', {}, fmtSeconds(c.time.step_s)),
        h('dt', {}, 'mode'), h('dd', {}, `${c.mode}${c.note ? ` \u2014 ${c.note}` : ''}`)),
      nDev < c.devices ? h('p', { class: 'muted' }, `First ${nDev} of ${c.devices} devices shown.`) : null,
      h('p', { class: 'muted' }, 'The cost model gives one figure per device (every device holds blocks of the same per-device shape).'),
      h('div', { class: 'charts' }, mem.el, axisChart.el, kindChart.el));
  }
  // Memory over program order (GET /v1/plans/{id}/memory): live bytes per
  // device by kind, the peak and its op, the largest buffers live there.
  const memBox = h('section', { class: 'memory', id: 'plan-memory' });
  const memCharts = [];
  let memResident = null; // draw parameters and inputs (null: decide from the data)
  function selectTensor(b) {
    let i = -1;
    if (b.argument !== undefined) i = all.findIndex((r) => r.kind === 'input' && r.v && r.v.index === b.argument);
    if (i < 0 && b.name) i = all.findIndex((r) => r.v && r.v.name === b.name);
    if (i < 0) return;
    search.value = '';
    shardedOnly.checked = false;
    apply();
    table.select(i);
    showDetail(all[i]);
    detail.scrollIntoView({ block: 'nearest' });
  }
  async function loadMemory() {
    fill(memBox, h('p', { class: 'muted' }, 'Loading memory\u2026'));
    for (const c of memCharts.splice(0)) c.destroy();
    let mm;
    try {
      mm = await getJson(`/v1/plans/${doc.id}/memory?profile=${encodeURIComponent(profSel.value)}&points=1000`);
    } catch (err) {
      fill(memBox, errorBox(err));
      return;
    }
    const pts = mm.points || [];
    const pk = mm.peak || {};
    const where = (x) => [x.op, x.name ? `"${x.name}"` : null, x.source, x.line ? `line ${x.line}` : null].filter(Boolean).join(' ');
    const peakAt = pts.findIndex((p) => p.index === pk.index);
    const cap = mm.capacity_bytes || 0;
    const capShown = cap > 0 && cap <= 3 * pk.bytes;
    const refs = [];
    if (capShown) refs.push({ label: 'capacity', data: pts.map(() => cap), flat: true });
    refs.push({ label: `peak: ${pk.op || ''}`, data: pts.map((p, i) => (i === peakAt ? pk.bytes : null)), marker: true });
    // Resident arguments can dwarf what changes: drawn when activations matter.
    const moving = Math.max(0, ...pts.map((p) => p.activation_bytes + p.temporary_bytes));
    if (memResident === null) memResident = moving >= 0.1 * (pk.bytes || 1);
    const resident = memResident;
    const residentBox = h('input', { type: 'checkbox', id: 'memory-resident', checked: resident,
      onchange: (e) => { memResident = e.target.checked; loadMemory(); } });
    const chart = areaChart({
      title: `Live memory per device over program order: peak ${fmtBytes(pk.bytes)} at op ${pk.index} (${where(pk)})${resident && cap && !capShown ? `; capacity ${fmtBytes(cap)} is off the scale` : ''}${resident ? '' : `; parameters ${fmtBytes(mm.parameter_bytes)} and inputs ${fmtBytes(mm.input_bytes)} resident, not drawn`}`,
      labels: pts.map((p) => String(p.index)),
      datasets: [
        { label: 'parameters', data: pts.map(() => (resident ? mm.parameter_bytes : 0)) },
        { label: 'inputs', data: pts.map(() => (resident ? mm.input_bytes : 0)) },
        { label: 'activations', data: pts.map((p) => p.activation_bytes) },
        { label: 'temporaries', data: pts.map((p) => p.temporary_bytes) },
      ],
      refs: resident ? refs : refs.filter((r) => !r.flat).map((r) => ({ ...r, data: r.data.map((v) => (v === null ? null : v - mm.parameter_bytes - mm.input_bytes)) })),
      format: fmtBytes,
      xTitle: mm.stride > 1 ? `op (each point the largest of ${mm.stride} ops)` : 'op',
    });
    memCharts.push(chart.chart);
    const bufs = mm.largest_buffers || [];
    fill(memBox,
      h('div', { class: 'toolbar' }, h('label', {}, residentBox, ' draw parameters and inputs')),
      chart.el,
      h('p', { id: 'memory-peak' }, `Peak ${fmtBytes(pk.bytes)} per device at op ${pk.index}: ${where(pk)}${pk.inner ? `, inside it at ${where(pk.inner)}` : ''} (activations ${fmtBytes(pk.activation_bytes || 0)}, temporaries ${fmtBytes(pk.temporary_bytes || 0)}, parameters ${fmtBytes(mm.parameter_bytes)}, inputs ${fmtBytes(mm.input_bytes)}).`),
      h('h3', {}, 'Largest buffers live at the peak'),
      h('ol', { id: 'peak-buffers' }, bufs.map((b) => {
        const what = b.argument !== undefined ? `argument ${b.argument}${b.name ? ` "${b.name}"` : ''}` : where(b);
        const text = `${fmtBytes(b.bytes)} ${b.kind} ${b.dtype || ''}[${(b.shape || []).join('\u00d7')}] \u2014 ${what}`;
        return h('li', {}, h('a', { href: '#', onclick: (e) => { e.preventDefault(); selectTensor(b); } }, text));
      })),
      h('p', { class: 'muted' }, mm.same_on_every_device ? 'Every device holds blocks of the same per-device shape, so one series stands for each device.' : ''));
  }
  ctx.onLeave(() => { for (const c of memCharts) c.destroy(); });

  const profile = () => profSel.value;
  const small = nOps <= LAZY_OPS;
  const lint = lintPanel(ctx, doc.id, profile, small);
  const colls = collectivesPanel(ctx, doc.id, profile, small);
  const sugg = suggestPanel(ctx, doc.id, profile);
  whatif = whatifPanel(ctx, doc.id, profile);
  profSel.addEventListener('change', () => { loadCost(); loadMemory(); lint.reload(); colls.reload(); sugg.reload(); });
  ctx.onLeave(() => { for (const c of charts) c.destroy(); });

  const opts = doc.options || {};
  // the jax.jit shardings of each function, to paste
  const jaxBox = (plan.functions || []).some((f) => f.in_shardings)
    ? h('details', { id: 'jax-shardings' }, h('summary', {}, 'In JAX: in_shardings / out_shardings'),
      (plan.functions || []).map((f) => h('div', {},
        (plan.functions || []).length > 1 ? h('h3', {}, `@${f.name}`) : null,
        h('pre', { class: 'mono jax-code' }, 'from jax.sharding import NamedSharding, PartitionSpec as P\n\n',
          f.in_shardings || '', '\n', f.out_shardings || ''))))
    : null;
  const meshText = (plan.meshes || []).map((m) => `${m.name} [${(m.axes || []).map((x) => `${x.name}=${x.size}`).join(', ')}] (${m.devices} devices)`).join('; ');
  fill(main, 
    h('h1', {}, opts.name ? `${opts.name} (plan ${doc.id})` : `Plan ${doc.id}`),
    h('dl', { class: 'kv summary' },
      h('dt', {}, 'hash'), h('dd', { class: 'mono' }, doc.hash),
      h('dt', {}, 'graph'), h('dd', {}, String(doc.graph_id)),
      h('dt', {}, 'pass'), h('dd', {}, plan.pass || DASH),
      h('dt', {}, 'meshes'), h('dd', {}, meshText || DASH,
        (plan.meshes || []).length ? [' ', h('a', { href: `#/sweep?plan=${doc.id}`, id: 'plan-sweep-link' }, 'sweep other meshes')] : null,
        // a Flax graph (inputs with logical axis names): its rules can be swept too
        (plan.functions || []).some((f) => (f.inputs || []).some((v) => v.logical_axes))
          ? [' \u00b7 ', h('a', { href: `#/sweep?plan=${doc.id}&logical_rules=true`, id: 'plan-sweep-rules-link' }, 'sweep logical-axis rules')] : null),
      h('dt', {}, 'diagnostics'), h('dd', {}, String((plan.diagnostics || []).length))),
    jaxBox,
    (plan.diagnostics || []).length ? h('details', {}, h('summary', {}, 'Diagnostics'), h('ul', {}, plan.diagnostics.map((d) => h('li', {}, `${d.severity} ${d.kind} at ${d.path}: ${d.message}`)))) : null,
    h('div', { class: 'toolbar' }, search, h('label', {}, shardedOnly, ' sharded only'), count),
    table.el,
    detail,
    whatif.el,
    h('h2', {}, 'Cost'),
    h('div', { class: 'toolbar' }, h('label', { title: 'for the cost, lint, collectives, suggestions and what-if' }, 'profile ', profSel)),
    costBox,
    h('h2', {}, 'Memory over program order'),
    memBox,
    small ? null : h('p', { class: 'muted' }, `${nOps} ops: open a panel to run it.`),
    lint.el,
    colls.el,
    sugg.el,
    h('h2', {}, 'Benchmark'),
    h('p', { class: 'muted' }, 'Runs this plan on this machine\'s executor (POST /v1/benchmarks): devices default to the mesh\'s device count.'),
    benchPanel(ctx, doc.id, plan.meshes && plan.meshes[0] ? plan.meshes[0].devices : 0),
  );
  apply();
  const first = all.findIndex((r) => r.v && r.v.sharding);
  if (first >= 0) { table.select(first); showDetail(all[first]); }
  main.dataset.fetchMs = String(Math.round(tFetched - t0)); // download + JSON.parse
  main.dataset.renderMs = String(Math.round(performance.now() - tFetched)); // rows, table, detail
  loadCost();
  loadMemory();
}
