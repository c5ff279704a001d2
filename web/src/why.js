// The plan view's "why this sharding" panel in words: each axis's origin
// ("input: 0" -> function input 0, named as the model names it,
// `layer0.Wv`), and the op's sdy.propagation_edges (which operand or result
// each axis came through, per propagation step) as sentences naming the
// operands and results, instead of the raw `#sdy.propagation_edges<...>`
// text (kept under "raw" for reference). Operand names come from the
// stored graph document (graph input: its ops' "operands"); for MLIR input
// an operand is named by position.
import { DASH, h } from './util.js';

// Parses both spellings Shardy has printed:
//   [{step-0 = [{"b" = result-0 -> [operand-0]}]}, ...]
//   [{step_index = 2, axis_entries = [{axis_name = "a", source = operand-0, targets = [result-0]}]}]
// into [{step, axis, source, targets: [...]}] ("operand-0", "result-1"); []
// for text it does not recognise.
export function parseEdges(text) {
  const out = [];
  if (typeof text !== 'string') return out;
  // In text order: a step marker sets the step of the entries after it.
  const re = /step-(\d+)|step_index\s*=\s*(\d+)|\{\s*"([^"]+)"\s*=\s*((?:operand|result)-\d+)\s*->\s*\[([^\]]*)\]|\{\s*axis_name\s*=\s*"([^"]+)"\s*,\s*source\s*=\s*((?:operand|result)-\d+)\s*,\s*targets\s*=\s*\[([^\]]*)\]/g;
  let step = null;
  for (const m of text.matchAll(re)) {
    if (m[1] !== undefined || m[2] !== undefined) { step = Number(m[1] ?? m[2]); continue; }
    if (step === null) continue;
    const axis = m[3] ?? m[6];
    const source = m[4] ?? m[7];
    const targets = (m[5] ?? m[8]).split(',').map((x) => x.trim()).filter(Boolean);
    out.push({ step, axis, source, targets });
  }
  return out;
}

// Edges with the same step, source and targets merged over their axes, in
// step order: [{step, axes: [...], source, targets}].
export function groupEdges(edges) {
  // first each axis's targets from one source in one step, then the axes
  // that went the same way together
  const byAxis = new Map();
  for (const e of edges) {
    const key = `${e.step}|${e.source}|${e.axis}`;
    if (!byAxis.has(key)) byAxis.set(key, { ...e, targets: [] });
    for (const t of e.targets) if (!byAxis.get(key).targets.includes(t)) byAxis.get(key).targets.push(t);
  }
  const m = new Map();
  for (const e of byAxis.values()) {
    const key = `${e.step}|${e.source}|${[...e.targets].sort().join(',')}`;
    if (!m.has(key)) m.set(key, { step: e.step, axes: [], source: e.source, targets: new Set() });
    const g = m.get(key);
    if (!g.axes.includes(e.axis)) g.axes.push(e.axis);
    for (const t of e.targets) g.targets.add(t);
  }
  return [...m.values()].map((g) => ({ ...g, targets: [...g.targets] })).sort((a, b) => a.step - b.step);
}

// "operand 0 (layer0.Wv)" / "result 0 (l0.h)" for a ref of op, with the
// operand names given (graph input) and the op's result values.
function refWords(ref, op, operandNames) {
  const m = /^(operand|result)-(\d+)$/.exec(ref);
  if (!m) return h('span', {}, ref);
  const i = Number(m[2]);
  const name = m[1] === 'operand' ? operandNames?.[i] : op?.results?.[i]?.name;
  return h('span', { class: 'why-ref', 'data-ref': ref }, `${m[1]} ${i}`, name !== undefined && name !== null ? [' ', h('code', {}, String(name))] : null);
}

const list = (parts) => parts.flatMap((p, i) => (i === 0 ? [p] : [i === parts.length - 1 ? ' and ' : ', ', p]));

// One sentence per origin entry: axis <- where it was set.
export function originWords(src, fn) {
  const named = (xs, i, what) => {
    const v = xs && xs[i];
    return v && v.name !== undefined && v.name !== null ? [`${what} ${i}, `, h('code', {}, String(v.name))] : [`${what} ${i}`];
  };
  if (src === 'self') return ['set on this tensor itself (a user sharding or constraint)'];
  let m = /^input: (\d+)$/.exec(src);
  if (m) return ['came from ', ...named(fn?.inputs, Number(m[1]), 'function input')];
  m = /^output: (\d+)$/.exec(src);
  if (m) return ['came from ', ...named(fn?.outputs, Number(m[1]), 'function output')];
  m = /^constraint_(\d+)$/.exec(src);
  if (m) return [`came from sharding constraint ${m[1]}`];
  m = /^mc_(\d+)_(input|output): (\d+)$/.exec(src);
  if (m) return [`came from ${m[2]} ${m[3]} of manual computation ${m[1]}`];
  return [`came from ${src}`];
}

// The panel for row r ({f, op, v}) of a plan; operandNames: the op's
// operands by name (graph input) or null.
export function whyPanel(r, diags, operandNames) {
  const v = r.v;
  const why = h('div', { class: 'why', id: 'why' }, h('h3', {}, 'Why this sharding'));
  if (v && v.origin && Object.keys(v.origin).length) {
    why.append(h('ul', { id: 'why-origins' }, Object.entries(v.origin).map(([axis, src]) =>
      h('li', {}, 'Axis ', h('code', {}, axis), ' ', originWords(src, r.f), h('span', { class: 'muted' }, ` (${src})`), '.'))));
  } else if (v) {
    why.append(h('p', {}, v.sharding ? 'The plan records no origin for this sharding.' : 'No sharding reached this value: it is replicated.'));
  }
  if (r.op && r.op.edges) {
    const groups = groupEdges(parseEdges(r.op.edges));
    if (groups.length) {
      why.append(h('p', {}, `How propagation moved axes through this ${r.op.op}:`),
        h('ol', { id: 'why-edges' }, groups.map((g) => h('li', {},
          `Step ${g.step}: ${g.axes.length > 1 ? 'axes' : 'axis'} `, list(g.axes.map((a) => h('code', {}, a))),
          ' went from ', refWords(g.source, r.op, operandNames), ' to ', list(g.targets.map((t) => refWords(t, r.op, operandNames))), '.'))));
    }
    why.append(h('details', { class: 'why-raw' }, h('summary', {}, groups.length ? 'raw propagation edges' : 'propagation edges (not understood; raw)'),
      h('pre', { class: 'mono wrap' }, r.op.edges)));
  }
  if (r.op && r.op.rule) why.append(h('p', {}, 'Sharding rule:'), h('pre', { class: 'mono wrap' }, r.op.rule));
  for (const d of diags || []) why.append(h('p', { class: `diag ${d.severity}` }, `${d.severity} ${d.kind}: ${d.message}`));
  if (!why.childNodes.length) why.append(h('p', {}, DASH));
  return why;
}
