// Plans list: every plan (GET /v1/plans, all pages) with its name (the one
// it was given, else its graph's), mesh (`data=2 x model=4`), strategy (read
// from the graph's logical_axis_rules),
// and cost (GET /v1/compare, four plans per request, loaded for the rows in
// view first). Filterable, sortable, virtualised.
import { getJson, listAll } from './api.js';
import { DASH, debounce, errorBox, fill, fmtBytes, fmtSeconds, fmtTime, h } from './util.js';
import { vtable } from './vtable.js';

// Strategy names of the templates (docs/graph-format.md), from the rules:
// dp when batch maps to a mesh axis, fsdp when embed maps to one of
// batch's axes too, tp when another logical name maps to an axis batch
// does not use.
export function strategyOf(graphDoc) {
  if (!graphDoc) return DASH;
  const rules = graphDoc.logical_axis_rules;
  if (!Array.isArray(rules) || rules.length === 0) return 'none';
  const axesOf = (r) => (r[1] === null ? [] : Array.isArray(r[1]) ? r[1] : [r[1]]);
  const batchAxes = new Set(rules.filter((r) => r[0] === 'batch').flatMap(axesOf));
  const dp = batchAxes.size > 0;
  const fsdp = rules.some((r) => r[0] === 'embed' && axesOf(r).some((a) => batchAxes.has(a)));
  const tp = rules.some((r) => r[0] !== 'batch' && axesOf(r).some((a) => !batchAxes.has(a)));
  if (fsdp) return tp ? 'fsdp+tp' : 'fsdp';
  if (dp && tp) return 'dp+tp';
  if (dp) return 'dp';
  if (tp) return 'tp';
  return 'custom';
}

// A plan's name: the one it was given or took from its input (options.name:
// ?name=, the graph document's name, `module @NAME`), else its graph's.
export function planName(p, graphName) {
  return (p.options && p.options.name) || graphName || `graph ${p.graph_id}`;
}

// A plan's mesh as a person reads it: `data=2 x model=4` (options.mesh_axes,
// what the plan ran on), else the stored mesh's name.
export function planMesh(p, storedName) {
  const o = p.options || {};
  if (o.mesh_axes) return o.mesh_axes;
  if (p.mesh_id) return storedName || o.mesh || `mesh ${p.mesh_id}`;
  return o.mesh || DASH;
}

function measuredOf(run) {
  const r = run && run.results;
  if (!r || typeof r !== 'object') return null;
  for (const k of ['step_s', 'measured_step_s', 'mean_step_s', 'step_time_s']) {
    if (typeof r[k] === 'number') return r[k];
  }
  return null;
}

export async function plansPage(main, ctx) {
  fill(main, h('h1', {}, 'Plans'), h('p', { class: 'muted' }, 'Loading\u2026'));
  let plans, graphs, meshes, runs;
  try {
    [plans, graphs, meshes, runs] = await Promise.all([
      listAll('plans'), listAll('graphs'), listAll('meshes'),
      listAll('benchmarks', 'status=succeeded').catch(() => []),
    ]);
  } catch (err) {
    fill(main, h('h1', {}, 'Plans'), errorBox(err));
    return;
  }
  const graphName = new Map(graphs.map((g) => [g.id, g.name || `graph ${g.id}`]));
  const graphFormat = new Map(graphs.map((g) => [g.id, g.format]));
  const meshName = new Map(meshes.map((m) => [m.id, m.name]));
  // Lists carry no results: read the newest succeeded benchmark of each plan
  // (results.step_s, the median measured step, docs/api.md).
  const newest = new Map(); // plan id -> run id
  for (const r of runs) {
    if (!newest.has(r.plan_id) || r.id > newest.get(r.plan_id)) newest.set(r.plan_id, r.id);
  }
  const details = await Promise.all([...newest.values()].map(
    (id) => getJson(`/v1/benchmarks/${id}`).catch(() => null)));
  const measured = new Map();
  for (const r of details) {
    const m = measuredOf(r);
    if (m !== null) measured.set(r.plan_id, m);
  }
  const strategy = new Map(); // graph id -> strategy (or a promise while loading)
  const cost = new Map();     // plan id -> cost object from /v1/compare
  const rows = plans.map((p) => ({
    id: p.id,
    graph: p.graph_id,
    model: planName(p, graphName.get(p.graph_id)),
    mesh: planMesh(p, p.mesh_id ? meshName.get(p.mesh_id) : null),
    pass: (p.options && p.options.pass) || '',
    created: p.created_at,
  }));
  const selected = new Set();

  const q = h('input', { type: 'search', placeholder: 'model contains\u2026', 'aria-label': 'filter by model', id: 'f-model' });
  const meshSel = h('select', { 'aria-label': 'filter by mesh', id: 'f-mesh' }, h('option', { value: '' }, 'any mesh'),
    [...new Set(rows.map((r) => r.mesh))].sort().map((m) => h('option', { value: m }, m)));
  const stratSel = h('select', { 'aria-label': 'filter by strategy', id: 'f-strategy' }, h('option', { value: '' }, 'any strategy'),
    ['dp', 'fsdp', 'tp', 'dp+tp', 'fsdp+tp', 'custom', 'none', DASH].map((s) => h('option', { value: s }, s)));
  const status = h('span', { class: 'muted', id: 'cost-status' });
  const cmpBtn = h('button', { type: 'button', id: 'compare-selected', disabled: true }, 'Compare selected');
  cmpBtn.addEventListener('click', () => { location.hash = `#/compare/${[...selected].join(',')}`; });

  let view = rows.slice();
  const value = (r, key) => {
    const c = cost.get(r.id);
    switch (key) {
      case 'id': return r.id;
      case 'memory': return c ? c.memory.peak_bytes : null;
      case 'comm': return c ? c.communication.bytes : null;
      case 'time': return c ? c.time.step_s : null;
      case 'measured': return measured.has(r.id) ? measured.get(r.id) : null;
      default: return r[key];
    }
  };
  const pending = (r) => (cost.has(r.id) ? 'n/a' : '\u2026');
  const stratOf = (r) => {
    const s = strategy.get(r.graph);
    return typeof s === 'string' ? s : DASH;
  };

  const table = vtable({
    class: 'plans-table',
    height: Math.max(300, window.innerHeight - 260),
    columns: [
      { key: 'sel', title: '', width: '2.2em' },
      { key: 'id', title: 'id', width: '4em', sort: true },
      { key: 'model', title: 'model', width: '2fr', sort: true },
      { key: 'mesh', title: 'mesh', width: '1fr', sort: true },
      { key: 'strategy', title: 'strategy', width: '6em' },
      { key: 'pass', title: 'pass', width: '1.5fr' },
      { key: 'memory', title: 'memory / device', width: '8em', sort: true },
      { key: 'comm', title: 'communication', width: '8em', sort: true },
      { key: 'time', title: 'predicted step', width: '8em', sort: true },
      { key: 'measured', title: 'measured', width: '6em', sort: true },
      { key: 'created', title: 'created (UTC)', width: '10em', sort: true },
    ],
    cell(i, col) {
      const r = view[i];
      const c = cost.get(r.id);
      switch (col.key) {
        case 'sel': {
          const cb = h('input', { type: 'checkbox', 'aria-label': `select plan ${r.id}`, 'data-plan': String(r.id) });
          cb.checked = selected.has(r.id);
          cb.addEventListener('click', (ev) => {
            ev.stopPropagation();
            if (cb.checked && selected.size >= 4) { cb.checked = false; return; }
            if (cb.checked) selected.add(r.id); else selected.delete(r.id);
            cmpBtn.disabled = selected.size < 2;
            cmpBtn.textContent = `Compare selected (${selected.size})`;
          });
          return cb;
        }
        case 'id': return h('a', { href: `#/plan/${r.id}` }, String(r.id));
        case 'strategy': return stratOf(r);
        case 'memory': return c ? fmtBytes(c.memory.peak_bytes) : pending(r);
        case 'comm': return c ? fmtBytes(c.communication.bytes) : pending(r);
        case 'time': return c ? fmtSeconds(c.time.step_s) : pending(r);
        case 'measured': return measured.has(r.id) ? fmtSeconds(measured.get(r.id)) : DASH;
        case 'created': return fmtTime(r.created);
        default: return String(r[col.key]);
      }
    },
    onRowClick(i, ev) {
      if (ev.target.closest('input,a')) return;
      location.hash = `#/plan/${view[i].id}`;
    },
    onSort: () => apply(),
    onRender(first, last) {
      for (let i = last - 1; i >= first; i--) want(view[i]);
      pump();
    },
  });

  function apply() {
    const m = q.value.trim().toLowerCase();
    const ms = meshSel.value;
    const ss = stratSel.value;
    view = rows.filter((r) => (!m || r.model.toLowerCase().includes(m)) && (!ms || r.mesh === ms) && (!ss || stratOf(r) === ss));
    const { key, dir } = table.sort;
    if (key) {
      view.sort((x, y) => {
        const a = value(x, key), b = value(y, key);
        if (a === null && b === null) return x.id - y.id;
        if (a === null) return 1; // not loaded or absent: last
        if (b === null) return -1;
        return (a < b ? -1 : a > b ? 1 : 0) * dir;
      });
    }
    table.setCount(view.length);
    countEl.textContent = `${view.length} of ${rows.length} plans`;
  }

  // Lazy loading of costs (4 plans per compare) and strategies (one graph
  // each): rows in view go to the front of the queues, the rest behind.
  const wantCost = [];
  const wantGraph = [];
  const inflight = new Set();
  function want(r, front = true) {
    if (!r) return;
    if (!cost.has(r.id)) front ? wantCost.unshift(r.id) : wantCost.push(r.id);
    if (!strategy.has(r.graph)) front ? wantGraph.unshift(r.graph) : wantGraph.push(r.graph);
  }
  const take = (queue, n, done) => {
    const out = [];
    while (queue.length && out.length < n) {
      const x = queue.shift();
      if (done.has(x) || inflight.has(`${n}:${x}`) || out.includes(x)) continue;
      inflight.add(`${n}:${x}`);
      out.push(x);
    }
    return out;
  };
  let busy = 0;
  let failed = 0;
  const redraw = debounce(() => {
    table.refresh();
    status.textContent = `costs loaded: ${cost.size} of ${rows.length}${failed ? `, ${failed} failed` : ''}`;
  }, 50);
  function pump() {
    while (busy < 2 && ctx.alive()) {
      const g = take(wantGraph, 1, strategy);
      const p = g.length ? [] : take(wantCost, 4, cost);
      if (!g.length && !p.length) return;
      busy++;
      (async () => {
        try {
          if (g.length) {
            if (graphFormat.get(g[0]) === 'mlir') strategy.set(g[0], DASH);
            else strategy.set(g[0], strategyOf((await getJson(`/v1/graphs/${g[0]}`)).graph));
          } else {
            const ids = p.length === 1 ? [p[0], p[0]] : p;
            const c = await getJson(`/v1/compare?plans=${ids.join(',')}`);
            p.forEach((id, k) => cost.set(id, c.plans[k].cost));
          }
        } catch {
          if (g.length) strategy.set(g[0], DASH);
          else {
            failed += p.length;
            for (const id of p) cost.set(id, null); /* not asked again */
          }
        } finally {
          for (const x of g) inflight.delete(`1:${x}`);
          for (const x of p) inflight.delete(`4:${x}`);
          busy--;
          redraw();
          pump();
        }
      })();
    }
  }

  const countEl = h('span', { class: 'muted', id: 'plan-count' });
  for (const el of [meshSel, stratSel]) el.addEventListener('change', apply);
  q.addEventListener('input', debounce(apply, 120));
  fill(main, 
    h('h1', {}, 'Plans'),
    h('div', { class: 'toolbar' }, q, meshSel, stratSel, cmpBtn, countEl, status),
    table.el,
  );
  for (const r of rows) want(r, false); // background: all, after the rows in view
  apply();
  pump();
}
