// The device mesh, N-D (#/mesh/PLAN?mesh=NAME&axes=a,b): the plan's mesh
// (GET /v1/plans/{id}) drawn as nested grids, the last axis across, the one
// before it down, any axes before those as a row of tiles (one per
// coordinate, labelled), each cell a device (its id from device_ids). Pick
// axes to see their groups: the devices a collective over those axes
// talks among are the ones that differ only along them (same coordinates
// on every other axis), so each group gets its colour and a number.
// Sub-axes ("x:(2)2": the size-2 slice of x after its first 2) are
// understood. Every collective in the dashboard links here with its axes.
import { getJson } from './api.js';
import { errorBox, fill, h } from './util.js';

const GROUP_COLOURS = ['#dbe7fb', '#fde2cf', '#d5f0e1', '#efd9f3', '#fbefc4', '#f7d4d9', '#d3eef3', '#e6e6e6',
  '#c3d6f7', '#f9cda9', '#b9e5cc', '#e3c2ea', '#f6e39b', '#f0b7c0', '#b5e2ea', '#d4d4d4'];

// "x" or "x:(2)2" -> {name, pre, size} (size null: the whole axis).
export function parseAxis(text) {
  const m = /^([^:]+):\((\d+)\)(\d+)$/.exec(String(text).trim());
  return m ? { name: m[1], pre: Number(m[2]), size: Number(m[3]) } : { name: String(text).trim(), pre: 1, size: null };
}

// The link to the mesh view of plan id for a collective over axes.
export function meshHref(planId, axes, meshName) {
  const q = new URLSearchParams();
  if (meshName) q.set('mesh', meshName);
  if (axes && axes.length) q.set('axes', axes.join(','));
  return `#/mesh/${planId}${q.toString() ? `?${q}` : ''}`;
}

export function meshLink(planId, axes, meshName, text = 'mesh') {
  return h('a', { href: meshHref(planId, axes, meshName), class: 'mesh-link', title: `the devices of each ${(axes || []).join(', ') || 'whole-mesh'} group` }, text);
}

// Each device position's coordinates (row-major over mesh.axes), its id,
// and its group over the selected axes: the key of its coordinates on
// everything else (a sub-axis leaves the rest of its axis outside).
export function meshGroups(mesh, selected) {
  const axes = mesh.axes || [];
  const n = axes.reduce((p, a) => p * a.size, 1);
  const ids = Array.isArray(mesh.device_ids) && mesh.device_ids.length === n ? mesh.device_ids : null;
  const sel = selected.map(parseAxis);
  const devs = [];
  const groups = new Map();
  for (let d = 0; d < n; d++) {
    const coords = [];
    let r = d;
    for (let i = axes.length - 1; i >= 0; i--) { coords[i] = r % axes[i].size; r = Math.floor(r / axes[i].size); }
    const key = axes.map((a, i) => {
      const s = sel.filter((x) => x.name === a.name);
      if (!s.length) return coords[i];
      // drop the selected sub-axes' digits of this coordinate
      let c = coords[i];
      for (const x of s) {
        if (x.size === null) return '*';
        const digit = Math.floor(c / x.pre) % x.size;
        c -= digit * x.pre;
      }
      return c;
    }).join(',');
    if (!groups.has(key)) groups.set(key, groups.size);
    devs.push({ pos: d, id: ids ? ids[d] : d, coords, group: groups.get(key) });
  }
  return { devs, n_groups: groups.size, group_size: groups.size ? n / groups.size : 0 };
}

// The drawing: tiles over the leading axes, rows x columns over the last two.
export function meshDrawing(mesh, selected) {
  const axes = mesh.axes || [];
  const g = meshGroups(mesh, selected);
  const k = axes.length;
  const rowsAxis = k >= 2 ? k - 2 : -1;
  const colsAxis = k >= 1 ? k - 1 : -1;
  const tiles = new Map();
  for (const d of g.devs) {
    const tkey = d.coords.slice(0, Math.max(0, k - 2)).join(',');
    if (!tiles.has(tkey)) tiles.set(tkey, []);
    tiles.get(tkey).push(d);
  }
  const cols = colsAxis >= 0 ? axes[colsAxis].size : 1;
  const coloured = selected.length > 0;
  const box = h('div', { class: 'mesh-tiles', 'data-groups': String(g.n_groups) });
  for (const [tkey, ds] of tiles) {
    const label = k > 2 ? tkey.split(',').map((c, i) => `${axes[i].name}=${c}`).join(', ') : null;
    const grid = h('div', { class: 'mesh-grid', style: { gridTemplateColumns: `auto repeat(${cols}, minmax(3.6em, 1fr))` } });
    grid.append(h('div', { class: 'mesh-corner' }, rowsAxis >= 0 ? `${axes[rowsAxis].name} \u2193 ${axes[colsAxis].name} \u2192` : colsAxis >= 0 ? `${axes[colsAxis].name} \u2192` : ''));
    for (let c = 0; c < cols; c++) grid.append(h('div', { class: 'mesh-colhead' }, String(c)));
    const rows = rowsAxis >= 0 ? axes[rowsAxis].size : 1;
    for (let r = 0; r < rows; r++) {
      grid.append(h('div', { class: 'mesh-rowhead' }, rowsAxis >= 0 ? String(r) : ''));
      for (let c = 0; c < cols; c++) {
        const d = ds.find((x) => (rowsAxis < 0 || x.coords[rowsAxis] === r) && (colsAxis < 0 || x.coords[colsAxis] === c));
        if (!d) { grid.append(h('div', {})); continue; }
        grid.append(h('div', {
          class: 'mesh-dev', 'data-device': String(d.id), 'data-group': String(d.group),
          style: coloured ? { background: GROUP_COLOURS[d.group % GROUP_COLOURS.length] } : {},
          title: `device ${d.id}: ${axes.map((a, i) => `${a.name}=${d.coords[i]}`).join(', ')}${coloured ? `; group ${d.group}` : ''}`,
        }, h('div', { class: 'mesh-dev-id' }, `D${d.id}`), coloured ? h('div', { class: 'mesh-dev-group' }, `g${d.group}`) : null));
      }
    }
    box.append(h('div', { class: 'mesh-tile' }, label ? h('div', { class: 'mesh-tile-label' }, label) : null, grid));
  }
  return { el: box, groups: g };
}

// #/mesh/ID: the plan's meshes, axes to pick, the drawing and its groups.
export async function meshPage(main, ctx, id) {
  const params = new URLSearchParams(location.hash.split('?')[1] || '');
  fill(main, h('h1', {}, `Mesh of plan ${id}`), h('p', { class: 'muted' }, 'Loading\u2026'));
  let doc;
  try {
    doc = await getJson(`/v1/plans/${encodeURIComponent(id)}`);
  } catch (err) {
    fill(main, h('h1', {}, `Mesh of plan ${id}`), errorBox(err));
    return;
  }
  if (!ctx.alive()) return;
  const meshes = doc.plan.meshes || [];
  if (!meshes.length) {
    fill(main, h('h1', {}, `Mesh of plan ${id}`), h('p', {}, 'This plan has no mesh: it runs on one device.'));
    return;
  }
  let mesh = meshes.find((m) => m.name === params.get('mesh')) || meshes[0];
  let selected = (params.get('axes') || '').split(',').map((s) => s.trim()).filter(Boolean);
  const known = (a) => (mesh.axes || []).some((x) => x.name === parseAxis(a).name);
  const unknown = selected.filter((a) => !known(a));
  selected = selected.filter(known);
  const chips = h('div', { class: 'toolbar chips', id: 'mesh-axes' });
  const summary = h('p', { id: 'mesh-summary' });
  const drawing = h('div', { id: 'mesh-drawing' });
  const meshSel = meshes.length > 1 ? h('select', { id: 'mesh-select', 'aria-label': 'mesh' }, meshes.map((m) => h('option', { value: m.name, selected: m === mesh }, m.name))) : null;
  if (meshSel) meshSel.addEventListener('change', () => { mesh = meshes.find((m) => m.name === meshSel.value) || mesh; selected = []; draw(); });
  const draw = () => {
    const extra = selected.filter((a) => parseAxis(a).size !== null);
    fill(chips, 'groups over ', (mesh.axes || []).map((a) => h('button', {
      type: 'button', 'data-axis': a.name, class: selected.includes(a.name) ? 'active' : '', 'aria-pressed': String(selected.includes(a.name)),
      onclick: () => { selected = selected.includes(a.name) ? selected.filter((x) => x !== a.name) : [...selected.filter((x) => parseAxis(x).name !== a.name), a.name]; draw(); },
    }, `${a.name} (${a.size})`)), extra.map((a) => h('button', { type: 'button', class: 'active', 'data-axis': a, onclick: () => { selected = selected.filter((x) => x !== a); draw(); } }, a)));
    const d = meshDrawing(mesh, selected);
    fill(drawing, d.el);
    const total = (mesh.axes || []).reduce((p, a) => p * a.size, 1);
    summary.textContent = selected.length
      ? `A collective over ${selected.join(', ')} runs in ${d.groups.n_groups} group${d.groups.n_groups === 1 ? '' : 's'} of ${d.groups.group_size} devices (same colour = same group; g0, g1, \u2026 number them): the devices of a group differ only along ${selected.join(', ')}.`
      : `${total} devices over ${(mesh.axes || []).map((a) => `${a.name}=${a.size}`).join(' \u00d7 ')}. Pick axes to see the groups a collective over them forms.`;
    history.replaceState(null, '', `#/mesh/${id}?${new URLSearchParams({ mesh: mesh.name, ...(selected.length ? { axes: selected.join(',') } : {}) })}`);
  };
  fill(main, h('h1', {}, `Mesh "${mesh.name}" of `, h('a', { href: `#/plan/${id}` }, `plan ${id}`)),
    meshSel ? h('label', {}, 'mesh ', meshSel) : null,
    unknown.length ? h('p', { class: 'diag warning' }, `Not an axis of this mesh: ${unknown.join(', ')}.`) : null,
    chips, summary, drawing);
  draw();
}
