// Sweep (#/sweep?devices=8&layers=1...): GET /v1/sweep plans the transformer
// template over every data x model mesh and strategy (docs/advisor.md);
// #/sweep?plan=ID&devices=N sweeps a stored plan's own model over every mesh
// of N devices (GET /v1/plans/ID/sweep: its mesh's axis names kept), and
// &logical_rules=true a Flax graph's logical-axis-rule variants. A
// scatter of peak memory per device against predicted step time with the
// Pareto front as a line, variants that do not fit marked, the profile's
// capacity as a dashed level; and the ranked table. The parameters live in
// the address, so a sweep can be bookmarked.
import { api, getJson } from './api.js';
import { scatterChart } from './charts.js';
import { profileNames } from './plan.js';
import { DASH, errorBox, fill, fmtBytes, fmtNum, fmtSeconds, h } from './util.js';

const STRATEGIES = ['dp', 'fsdp', 'tp', 'dp+tp'];
// Form fields: [query key, label, default (the API's), CLI flag of `shardplan example`].
const NUMS = [['devices', 'devices', 8, null], ['layers', 'layers', 4, '--layers'], ['d_model', 'd_model', 1024, '--d-model'],
  ['heads', 'heads', 8, '--heads'], ['seq', 'seq', 128, '--seq'], ['batch', 'batch', 8, '--batch']];

const meshName = (r) => `${r.mesh.data}x${r.mesh.model}`;
// A module sweep's mesh: every axis in the mesh's order.
const axesName = (r) => Object.entries(r.mesh).map(([k, v]) => `${k}=${v}`).join(',');
// A rules sweep's variant: each logical name with its mesh axis (axes a+b, none -).
const rulesName = (r) => `${r.own ? '(own) ' : ''}${(r.rules || []).map(([n, t]) => `${n}=${t === null ? '-' : Array.isArray(t) ? t.join('+') : t}`).join(' ')}`;

export async function sweepPage(main, ctx) {
  const q = new URLSearchParams(location.hash.split('?')[1] || '');
  if (q.has('plan')) return planSweepPage(main, ctx, q);
  const inputs = Object.fromEntries(NUMS.map(([k, label, def]) => [k,
    h('input', { id: `sw-${k}`, name: k, type: 'number', min: '1', value: q.get(k) || String(def), style: { width: '6em' }, 'aria-label': label })]));
  const train = h('input', { id: 'sw-train', type: 'checkbox', checked: q.get('train') !== 'false' });
  const chosen = q.get('strategies') ? q.get('strategies').split(',') : STRATEGIES;
  const strats = STRATEGIES.map((s) => h('input', { type: 'checkbox', value: s, 'data-strategy': s, checked: chosen.includes(s) }));
  const prof = h('select', { id: 'sw-profile', 'aria-label': 'device profile' }, (await profileNames()).map((p) => h('option', { value: p }, p)));
  if (q.get('profile')) prof.value = q.get('profile');
  const query = () => {
    const p = new URLSearchParams();
    for (const [k] of NUMS) p.set(k, inputs[k].value.trim());
    p.set('train', train.checked ? 'true' : 'false');
    p.set('strategies', strats.filter((c) => c.checked).map((c) => c.value).join(','));
    p.set('profile', prof.value);
    return p.toString();
  };
  const form = h('form', { id: 'sweep-form', class: 'toolbar', onsubmit: (e) => { e.preventDefault(); location.hash = `#/sweep?${query()}`; } },
    NUMS.map(([k, label]) => h('label', {}, `${label} `, inputs[k])),
    h('label', {}, train, ' training step'),
    h('span', {}, 'strategies ', strats.map((c) => h('label', {}, c, ` ${c.value} `))),
    h('label', {}, 'profile ', prof),
    h('button', { type: 'submit', id: 'sweep-run' }, 'Sweep'));
  const out = h('div', { id: 'sweep-out' });
  fill(main, h('h1', {}, 'Sweep meshes and strategies'),
    h('p', { class: 'muted' }, 'The transformer template (shardplan example transformer) on every data x model mesh of the devices and every strategy, planned and costed (GET /v1/sweep).'),
    form, out);
  if (!q.has('devices')) {
    out.append(h('p', { class: 'muted' }, 'Set the model and press Sweep.'));
    return;
  }
  fill(out, h('p', { class: 'muted' }, 'Sweeping\u2026'));
  let d;
  try {
    d = await getJson(`/v1/sweep?${query()}`);
  } catch (err) {
    fill(out, errorBox(err));
    return;
  }
  if (!ctx.alive()) return;
  const rows = d.rows || [];
  const { ok, front, chart, detail } = sweepChart(ctx, d, prof.value, (r) => `${meshName(r)} ${r.strategy}`, (r) => show(r));

  const opts = Object.fromEntries(NUMS.map(([k]) => [k, inputs[k].value.trim()]));
  function show(r) {
    chosenRow = r;
    planBtn.disabled = false;
    fill(planMsg);
    for (const tr of tbody.children) tr.classList.toggle('selected', tr.row === r);
    const flags = NUMS.filter(([, , , f]) => f).map(([k, , , f]) => `${f} ${opts[k]}`).join(' ');
    const cmd = `shardplan example transformer ${flags} --mesh data=${r.mesh.data},model=${r.mesh.model} --strategy ${r.strategy}${train.checked ? ' --train' : ''}`;
    fill(detail, h('h2', {}, `${meshName(r)} ${r.strategy}`),
      rowFigures(r),
      h('p', {}, planBtn, ' ', planMsg),
      h('p', {}, 'or from the command line:'),
      h('pre', { class: 'mono wrap', id: 'sweep-command' }, `${cmd} | shardplan client --server ${location.origin} plan -`));
  }
  // POST /v1/plans {"example": ...}: the server generates the variant's
  // template (as `shardplan example` does), plans and stores it.
  const planBtn = h('button', { type: 'button', id: 'sweep-plan' }, 'Plan this variant');
  const planMsg = h('span', { id: 'sweep-plan-message' });
  let chosenRow = null;
  planBtn.addEventListener('click', async () => {
    const r = chosenRow;
    if (!r) return;
    planBtn.disabled = true;
    fill(planMsg, 'planning\u2026');
    const ex = { model: 'transformer', strategy: r.strategy, train: train.checked, mesh: { data: r.mesh.data, model: r.mesh.model } };
    for (const [k] of NUMS) if (k !== 'devices') ex[k] = Number(opts[k]);
    try {
      const res = await api('/v1/plans', { method: 'POST', body: JSON.stringify({ example: ex, name: `sweep ${meshName(r)} ${r.strategy}` }) });
      if (ctx.alive()) location.hash = `#/plan/${res.json.id}`;
    } catch (err) {
      if (ctx.alive()) { fill(planMsg, errorBox(err)); planBtn.disabled = false; }
    }
  });
  const tbody = h('tbody');
  for (const r of rows) {
    const tr = h('tr', { class: `${r.ok && !r.fits ? 'nofit' : ''} ${r.pareto ? 'pareto' : ''}`, onclick: () => show(r) },
      h('td', { class: 'num' }, r.ok && r.rank ? String(r.rank) : DASH), h('td', {}, meshName(r)), h('td', {}, r.strategy),
      h('td', { class: 'num' }, r.ok ? fmtSeconds(r.step_s) : DASH), h('td', { class: 'num' }, r.ok ? fmtBytes(r.peak_bytes) : DASH),
      h('td', { class: 'num' }, r.ok ? fmtBytes(r.comm_bytes) : DASH), h('td', { class: 'num' }, r.ok ? fmtNum(r.flops) : DASH),
      h('td', {}, r.ok ? (r.fits ? 'yes' : 'no') : `failed: ${r.error}`), h('td', {}, r.pareto ? '\u2605' : ''));
    tr.row = r;
    tbody.append(tr);
  }
  fill(out,
    h('p', { id: 'sweep-summary' }, `${d.variants} variants of ${d.ops_per_variant} ops, ${ok.length} planned, ${ok.filter((r) => r.fits).length} fit, ${front.length} on the Pareto front; ${fmtSeconds(d.seconds)}.`),
    chart.el,
    h('table', { class: 'summary-table sweep-table', id: 'sweep-table' },
      h('thead', {}, h('tr', {}, ['rank', 'mesh (data x model)', 'strategy', 'step', 'peak / device', 'comm / device', 'FLOPs / device', 'fits', 'Pareto'].map((t) => h('th', {}, t)))),
      tbody),
    detail);
}

// A row's figures (or its error) for the detail section.
function rowFigures(r) {
  if (!r.ok) return errorBox(new Error(r.error));
  return h('dl', { class: 'kv' },
    h('dt', {}, 'rank'), h('dd', {}, r.rank ? String(r.rank) : 'does not fit'),
    h('dt', {}, 'predicted step'), h('dd', {}, fmtSeconds(r.step_s)),
    h('dt', {}, 'peak / device'), h('dd', {}, `${fmtBytes(r.peak_bytes)}${r.capacity_bytes ? ` of ${fmtBytes(r.capacity_bytes)}` : ''} (${r.fits ? 'fits' : 'does not fit'})`),
    h('dt', {}, 'communication / device'), h('dd', {}, fmtBytes(r.comm_bytes)),
    h('dt', {}, 'FLOPs / device'), h('dd', {}, fmtNum(r.flops)),
    h('dt', {}, 'Pareto front'), h('dd', {}, r.pareto ? 'yes' : 'no'));
}

// The scatter of a sweep's rows (peak per device against predicted step,
// the Pareto front, the capacity) and the detail section its clicks fill.
function sweepChart(ctx, d, profile, label, onPick) {
  const rows = d.rows || [];
  const ok = rows.filter((r) => r.ok);
  const pt = (r) => ({ x: r.step_s, y: r.peak_bytes, r });
  const front = ok.filter((r) => r.pareto).sort((a, b) => a.step_s - b.step_s || b.peak_bytes - a.peak_bytes).map(pt);
  const cap = ok.map((r) => r.capacity_bytes).find((c) => c > 0);
  const xMax = Math.max(0, ...ok.map((r) => r.step_s)) * 1.05 || 1;
  // A capacity far above every variant would flatten them on a linear axis.
  const yMax = Math.max(0, ...ok.map((r) => r.peak_bytes));
  const yLog = !!cap && cap > 4 * yMax;
  const detail = h('section', { id: 'sweep-detail', class: 'detail' }, h('p', { class: 'muted' }, 'Click a point or a row for the variant\u2019s details and how to plan it.'));
  const datasets = [
    { label: 'fits', data: ok.filter((r) => r.fits).map(pt) },
    { label: 'does not fit', data: ok.filter((r) => !r.fits).map(pt), pointStyle: 'crossRot', pointRadius: 7, borderWidth: 2, borderColor: '#d24f5f', backgroundColor: '#d24f5f' },
    { label: 'Pareto front', data: front, line: true, borderColor: '#3aa676', backgroundColor: '#3aa676', pointRadius: 5, order: -1 },
  ];
  if (cap) datasets.push({ label: `capacity (${fmtBytes(cap)})`, data: [{ x: 0, y: cap }, { x: xMax, y: cap }], flat: true, borderColor: '#7a7a7a', backgroundColor: '#7a7a7a' });
  const chart = scatterChart({
    title: `Peak memory per device vs predicted step (${d.profile || profile})`,
    datasets, xTitle: 'predicted step time', yTitle: `peak memory per device${yLog ? ' (log scale)' : ''}`, yLog, xFormat: fmtSeconds, yFormat: fmtBytes,
    label: (p) => (p.r ? label(p.r) : ''),
    height: 360,
    onClick: (p) => { if (p.r) onPick(p.r); },
  });
  ctx.onLeave(() => chart.chart.destroy());
  chart.el.id = 'sweep-chart';
  chart.el.dataset.points = String(ok.length);
  chart.el.dataset.pareto = String(front.length);
  chart.el.dataset.capacity = cap ? String(cap) : '';
  chart.el.dataset.nofit = String(ok.filter((r) => !r.fits).length);
  return { ok, front, chart, detail };
}

// #/sweep?plan=ID&devices=N&profile=P: the plan's own model over the meshes
// of N devices (default: its mesh's own count), ranked; with
// &logical_rules=true (a Flax graph) over its logical-axis-rule variants
// instead, the mesh kept.
async function planSweepPage(main, ctx, q) {
  const id = q.get('plan');
  const logical = q.get('logical_rules') === 'true';
  const devices = h('input', { id: 'sw-devices', name: 'devices', type: 'number', min: '1', max: '4096', value: q.get('devices') || '', placeholder: 'its own', style: { width: '6em' }, 'aria-label': 'devices', disabled: logical });
  const vary = h('select', { id: 'sw-vary', 'aria-label': 'what to vary' },
    h('option', { value: 'meshes' }, 'meshes'), h('option', { value: 'rules' }, 'logical-axis rules (Flax graphs)'));
  vary.value = logical ? 'rules' : 'meshes';
  vary.addEventListener('change', () => { devices.disabled = vary.value === 'rules'; });
  const prof = h('select', { id: 'sw-profile', 'aria-label': 'device profile' }, (await profileNames()).map((p) => h('option', { value: p }, p)));
  if (q.get('profile')) prof.value = q.get('profile');
  const query = () => {
    const p = new URLSearchParams();
    p.set('plan', id);
    if (vary.value === 'rules') p.set('logical_rules', 'true');
    else if (devices.value.trim()) p.set('devices', devices.value.trim());
    p.set('profile', prof.value);
    return p;
  };
  const form = h('form', { id: 'sweep-form', class: 'toolbar', onsubmit: (e) => { e.preventDefault(); location.hash = `#/sweep?${query()}`; } },
    h('label', {}, 'vary ', vary), h('label', {}, 'devices ', devices), h('label', {}, 'profile ', prof),
    h('button', { type: 'submit', id: 'sweep-run' }, 'Sweep'));
  const out = h('div', { id: 'sweep-out' });
  fill(main, h('h1', {}, logical ? `Sweep the logical-axis rules of plan ${id}` : `Sweep the meshes of plan ${id}`),
    h('p', { class: 'muted' }, h('a', { href: `#/plan/${id}` }, `Plan ${id}`), logical
      ? '’s own model with each logical axis name on each mesh axis or none (flax.linen.logical_to_mesh_axes rules), its mesh kept; each planned with the plan’s pass and rules, partitioned and costed (GET /v1/plans/ID/sweep?logical_rules=true).'
      : '’s own model on every mesh of the devices: its mesh’s axis names and order kept, sizes redistributed; each planned with the plan’s pass and rules, partitioned and costed (GET /v1/plans/ID/sweep).'),
    form, out);
  fill(out, h('p', { class: 'muted' }, 'Sweeping…'));
  const api = query();
  api.delete('plan');
  let d;
  try {
    d = await getJson(`/v1/plans/${encodeURIComponent(id)}/sweep?${api}`);
  } catch (err) {
    fill(out, errorBox(err));
    return;
  }
  if (!ctx.alive()) return;
  const rows = d.rows || [];
  const tbody = h('tbody');
  const name = logical ? rulesName : axesName;
  const show = (r) => {
    for (const tr of tbody.children) tr.classList.toggle('selected', tr.row === r);
    fill(detail, h('h2', {}, name(r)),
      rowFigures(r),
      logical
        ? h('p', {}, r.own ? 'These are the graph’s own rules.' : 'To plan this variant, give the graph document these rules:')
        : h('p', {}, 'To plan this variant, give the module this mesh line:'),
      h('pre', { class: 'mono wrap', id: 'sweep-command' }, logical
        ? `"logical_axis_rules": ${JSON.stringify(r.rules)}`
        : `sdy.mesh @${d.mesh_name} = <[${Object.entries(r.mesh).map(([k, v]) => `"${k}"=${v}`).join(', ')}]>`));
  };
  const { ok, front, chart, detail } = sweepChart(ctx, d, prof.value, name, show);
  for (const r of rows) {
    const tr = h('tr', { class: `${r.ok && !r.fits ? 'nofit' : ''} ${r.pareto ? 'pareto' : ''} ${r.own ? 'own' : ''}`, onclick: () => show(r) },
      h('td', { class: 'num' }, r.ok && r.rank ? String(r.rank) : DASH), h('td', { class: logical ? 'mono' : '' }, name(r)),
      h('td', { class: 'num' }, r.ok ? fmtSeconds(r.step_s) : DASH), h('td', { class: 'num' }, r.ok ? fmtBytes(r.peak_bytes) : DASH),
      h('td', { class: 'num' }, r.ok ? fmtBytes(r.comm_bytes) : DASH), h('td', { class: 'num' }, r.ok ? fmtNum(r.flops) : DASH),
      h('td', {}, r.ok ? (r.fits ? 'yes' : 'no') : `failed: ${r.error}`), h('td', {}, r.pareto ? '\u2605' : ''));
    tr.row = r;
    tbody.append(tr);
  }
  fill(out,
    h('p', { id: 'sweep-summary' }, logical
      ? `${d.variants} logical-axis-rule variants (${d.variants_of} of ${d.logical_names} names over @${d.mesh_name}’s axes or none), ${d.ops_per_variant} ops each, ${ok.length} planned, ${ok.filter((r) => r.fits).length} fit, ${front.length} on the Pareto front; the graph’s own rules rank ${rows.find((r) => r.own)?.rank || DASH}; ${fmtSeconds(d.seconds)}.`
      : `${d.variants} meshes of @${d.mesh_name}${d.device_ids_dropped ? ' (its device_ids dropped)' : ''}, ${d.ops_per_variant} ops each, ${ok.length} planned, ${ok.filter((r) => r.fits).length} fit, ${front.length} on the Pareto front; ${fmtSeconds(d.seconds)}.`),
    chart.el,
    h('table', { class: 'summary-table sweep-table', id: 'sweep-table' },
      h('thead', {}, h('tr', {}, ['rank', logical ? 'logical_axis_rules' : 'mesh', 'step', 'peak / device', 'comm / device', 'FLOPs / device', 'fits', 'Pareto'].map((t) => h('th', {}, t)))),
      tbody),
    detail);
}
