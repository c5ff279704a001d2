// Which device holds which block of a tensor, from a plan's sharding
// ({"mesh", "dims": [{"axes": [name | {name, pre_size, size}]}]}) and the
// mesh ({"axes": [{name, size}], "device_ids"?}), as
// jax.debug.visualize_array_sharding draws it.
import { h } from './util.js';

function axisSizes(mesh) {
  const m = new Map();
  for (const a of mesh.axes || []) m.set(a.name, a.size);
  return m;
}

export function meshDevices(mesh) {
  let n = 1;
  for (const a of mesh.axes || []) n *= a.size;
  return n;
}

// Coordinates of device position d over the mesh axes (row-major).
function coordsOf(mesh, d) {
  const axes = mesh.axes || [];
  const c = new Map();
  for (let i = axes.length - 1; i >= 0; i--) {
    c.set(axes[i].name, d % axes[i].size);
    d = Math.floor(d / axes[i].size);
  }
  return c;
}

function refSize(ref, sizes) {
  return typeof ref === 'string' ? sizes.get(ref) || 1 : ref.size;
}

function refCoord(ref, coords) {
  if (typeof ref === 'string') return coords.get(ref) || 0;
  return Math.floor((coords.get(ref.name) || 0) / ref.pre_size) % ref.size;
}

export function refName(ref) {
  return typeof ref === 'string' ? ref : `${ref.name}:(${ref.pre_size})${ref.size}`;
}

// Number of blocks of each dim (product of its axes' sizes).
export function blocksPerDim(sharding, mesh, rank) {
  const sizes = axisSizes(mesh);
  const out = [];
  for (let i = 0; i < rank; i++) {
    const d = sharding && sharding.dims ? sharding.dims[i] : null;
    out.push(d ? d.axes.reduce((p, r) => p * refSize(r, sizes), 1) : 1);
  }
  return out;
}

// For every device position: its id and the block index along each dim.
export function deviceBlocks(sharding, mesh, rank) {
  const sizes = axisSizes(mesh);
  const n = meshDevices(mesh);
  const ids = mesh.device_ids && mesh.device_ids.length === n ? mesh.device_ids : null;
  const out = [];
  for (let d = 0; d < n; d++) {
    const coords = coordsOf(mesh, d);
    const blocks = [];
    for (let i = 0; i < rank; i++) {
      const dim = sharding && sharding.dims ? sharding.dims[i] : null;
      let idx = 0;
      for (const r of dim ? dim.axes : []) idx = idx * refSize(r, sizes) + refCoord(r, coords);
      blocks.push(idx);
    }
    out.push({ id: ids ? ids[d] : d, blocks });
  }
  return out;
}

const COLOURS = ['#dbe7fb', '#fde2cf', '#d5f0e1', '#efd9f3', '#fbefc4', '#f7d4d9', '#d3eef3', '#e6e6e6',
  '#c3d6f7', '#f9cda9', '#b9e5cc', '#e3c2ea', '#f6e39b', '#f0b7c0', '#b5e2ea', '#d4d4d4'];

// The device-grid picture of value v (a plan VALUE) on mesh, showing dims
// a (rows) and b (columns); fixed[i] is the block shown of any other dim.
export function deviceGrid(v, mesh, { a, b, fixed = {} }) {
  const shape = v.shape || [];
  const rank = shape.length;
  const nb = blocksPerDim(v.sharding, mesh, rank);
  const devs = deviceBlocks(v.sharding, mesh, rank);
  const rows = a >= 0 ? nb[a] : 1;
  const cols = b >= 0 ? nb[b] : 1;
  const cells = Array.from({ length: rows * cols }, () => []);
  for (const d of devs) {
    let ok = true;
    for (let i = 0; i < rank; i++) {
      if (i !== a && i !== b && nb[i] > 1 && d.blocks[i] !== (fixed[i] || 0)) ok = false;
    }
    if (!ok) continue;
    const r = a >= 0 ? d.blocks[a] : 0;
    const c = b >= 0 ? d.blocks[b] : 0;
    cells[r * cols + c].push(d.id);
  }
  const extent = (dim, k, n) => {
    if (dim < 0) return '';
    const size = shape[dim];
    if (size === null || size === undefined || size < 0) return `block ${k}`;
    const step = Math.ceil(size / n);
    return `${Math.min(size, k * step)}:${Math.min(size, (k + 1) * step)}`;
  };
  const colourOf = new Map();
  const grid = h('div', {
    class: 'device-grid',
    'data-rows': String(rows),
    'data-cols': String(cols),
    style: { gridTemplateColumns: `repeat(${cols}, minmax(4.5em, 1fr))` },
  });
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < cols; c++) {
      const ids = cells[r * cols + c];
      const key = ids.join(',');
      if (!colourOf.has(key)) colourOf.set(key, COLOURS[colourOf.size % COLOURS.length]);
      const where = [extent(a, r, rows), extent(b, c, cols)].filter(Boolean).join(', ');
      grid.append(h('div', { class: 'cell', style: { background: colourOf.get(key) }, title: where ? `[${where}]` : 'whole tensor' },
        h('div', { class: 'devs' }, ids.length ? (ids.length > 16 ? `${ids.slice(0, 16).map((x) => `D${x}`).join(' ')} \u2026 (${ids.length})` : ids.map((x) => `D${x}`).join(' ')) : '(none)'),
        where ? h('div', { class: 'extent' }, `[${where}]`) : null));
    }
  }
  return grid;
}
