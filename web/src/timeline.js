// A benchmark run's timeline (results.timeline, docs/api.md "Benchmark
// timeline"): one lane per device, every op of the last timed run as a bar
// from its start to its end, compute ops grey, collectives coloured by kind
// with the time they waited at their first barrier for the last member
// hatched. The member that waited least at a collective arrived last: the
// straggler the others waited for; its bar is outlined red, and the device
// that is the straggler most often is named beside its lane. The trace
// itself, in the Chrome trace event format, downloads from
// GET /v1/benchmarks/{id}/trace for Perfetto or chrome://tracing. A
// collective's bar opens the mesh view of its axes' groups (mesh.js).
import { api } from './api.js';
import { meshHref } from './mesh.js';
import { DASH, errorBox, fill, fmtSeconds, h } from './util.js';

const SVG = 'http://www.w3.org/2000/svg';
const LANE = 22; // px per device lane
const GAP = 4;
const LABEL = 150; // px of lane labels on the left
const AXIS = 22; // px of the time axis on top
const WIDTH = 1000; // px of the drawing at zoom 1

export const COLL_COLOURS = {
  all_reduce: '#e07b39',
  all_gather: '#3aa676',
  reduce_scatter: '#b04fc2',
  all_to_all: '#d9a400',
  collective_permute: '#4fb0c2',
  all_slice: '#3b6fd8',
};
const COMPUTE = '#9aa4b5';
const OTHER_COLL = '#d24f5f';

function svg(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) if (v !== undefined && v !== null) el.setAttribute(k, String(v));
  for (const c of children.flat()) if (c !== null && c !== undefined) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return el;
}

// The timeline's events by device and each collective's instances across
// the devices (the k-th time a device ran op X is its k-th instance), with
// the member that arrived last at each (the least wait). Malformed events
// are skipped. Exported for the tests' sake as well.
export function analyse(tl) {
  const n = Math.max(0, Math.min(4096, Number(tl?.devices) || 0));
  const ops = Array.isArray(tl?.ops) ? tl.ops : [];
  const lanes = Array.from({ length: n }, () => []);
  let end = 0;
  for (const e of Array.isArray(tl?.events) ? tl.events : []) {
    if (!Array.isArray(e) || e.length < 5) continue;
    const [d, ref, ts, dur, wait] = e;
    if (!(d >= 0 && d < n) || !ops[ref] || !(ts >= 0) || !(dur >= 0)) continue;
    const op = ops[ref];
    lanes[d].push({ d, op, ts, dur, wait: op.collective ? Math.min(Math.max(0, wait || 0), dur) : 0 });
    end = Math.max(end, ts + dur);
  }
  const instances = new Map(); // "ref#k" -> events
  for (const lane of lanes) {
    lane.sort((a, b) => a.ts - b.ts);
    const seen = new Map();
    for (const ev of lane) {
      if (!ev.op.collective) continue;
      const k = seen.get(ev.op) || 0;
      seen.set(ev.op, k + 1);
      const key = `${ev.op.op}#${k}`;
      if (!instances.has(key)) instances.set(key, []);
      instances.get(key).push(ev);
    }
  }
  const lastCount = new Array(n).fill(0);
  let collectives = 0;
  for (const evs of instances.values()) {
    if (evs.length < 2) continue;
    collectives++;
    let last = evs[0];
    for (const ev of evs) if (ev.wait < last.wait) last = ev;
    last.last = true;
    lastCount[last.d]++;
  }
  let straggler = -1;
  for (let d = 0; d < n; d++) if (lastCount[d] > 0 && (straggler < 0 || lastCount[d] > lastCount[straggler])) straggler = d;
  const busy = lanes.map((lane) => lane.reduce((a, ev) => a + ev.dur - ev.wait, 0));
  const waited = lanes.map((lane) => lane.reduce((a, ev) => a + ev.wait, 0));
  return { n, lanes, end, collectives, lastCount, straggler, busy, waited };
}

function tickStep(span) {
  const raw = span / 8;
  const p = 10 ** Math.floor(Math.log10(raw || 1));
  for (const m of [1, 2, 5, 10]) if (raw <= m * p) return m * p;
  return 10 * p;
}

function draw(a, zoom, planId) {
  const width = WIDTH * zoom;
  const span = a.end > 0 ? a.end : 1;
  const x = (us) => LABEL + ((width - LABEL - 30) * us) / span;
  const height = AXIS + a.n * (LANE + GAP) + 4;
  const root = svg('svg', { width, height, viewBox: `0 0 ${width} ${height}`, class: 'timeline-svg', role: 'img',
    'aria-label': `timeline of ${a.n} devices over ${fmtSeconds(span * 1e-6)}${a.straggler >= 0 ? `; device ${a.straggler} arrived last at ${a.lastCount[a.straggler]} of ${a.collectives} collectives` : ''}` });
  root.append(svg('defs', {}, svg('pattern', { id: 'tl-hatch', width: 6, height: 6, patternUnits: 'userSpaceOnUse', patternTransform: 'rotate(45)' },
    svg('rect', { width: 6, height: 6, fill: '#ffffff', 'fill-opacity': 0.55 }), svg('line', { x1: 0, y1: 0, x2: 0, y2: 6, stroke: '#1d2330', 'stroke-width': 1.5, 'stroke-opacity': 0.5 }))));
  const step = tickStep(span);
  for (let t = 0; t <= span + 1e-9; t += step) {
    root.append(svg('line', { x1: x(t), x2: x(t), y1: AXIS - 4, y2: height, class: 'tl-grid' }),
      svg('text', { x: x(t), y: AXIS - 8, class: 'tl-tick', 'text-anchor': 'middle' }, fmtSeconds(t * 1e-6)));
  }
  for (let d = 0; d < a.n; d++) {
    const y = AXIS + d * (LANE + GAP);
    const strag = d === a.straggler;
    root.append(svg('rect', { x: 0, y, width, height: LANE, class: `tl-lane${strag ? ' tl-lane-straggler' : ''}` }),
      svg('text', { x: 6, y: y + LANE / 2 + 4, class: `tl-label${strag ? ' tl-straggler-label' : ''}`, 'data-device': d },
        `device ${d}${a.lastCount[d] ? ` \u00b7 last \u00d7${a.lastCount[d]}` : ''}`));
    const g = svg('g', { 'data-device': d });
    for (const ev of a.lanes[d]) {
      const x0 = x(ev.ts);
      const w = Math.max(0.6, x(ev.ts + ev.dur) - x0);
      const coll = ev.op.collective;
      const colour = coll ? COLL_COLOURS[coll] || OTHER_COLL : COMPUTE;
      const title = `device ${d}: ${ev.op.name}\n${ev.op.kind}${coll ? ` over ${(ev.op.axes || []).join(', ') || DASH}` : ''}\nstart ${fmtSeconds(ev.ts * 1e-6)}, ${fmtSeconds(ev.dur * 1e-6)}${coll ? `, waited ${fmtSeconds(ev.wait * 1e-6)} for the last member${ev.last ? ' (this device arrived last)' : ''}` : ''}`;
      const bar = svg('rect', { x: x0, y: y + 2, width: w, height: LANE - 4, fill: colour,
        class: `tl-ev${coll ? ' tl-coll' : ''}${ev.last ? ' tl-last' : ''}`, 'data-kind': coll || 'compute', 'data-name': ev.op.name },
      svg('title', {}, title));
      if (coll && planId) {
        // a collective opens the mesh view with its groups
        bar.addEventListener('click', () => { location.hash = meshHref(planId, ev.op.axes || []); });
      }
      g.append(bar);
      if (coll && ev.wait > 0) {
        g.append(svg('rect', { x: x0, y: y + 2, width: Math.max(0.5, x(ev.ts + ev.wait) - x0), height: LANE - 4, fill: 'url(#tl-hatch)', class: 'tl-wait' },
          svg('title', {}, title)));
      }
    }
    root.append(g);
  }
  return root;
}

// The timeline section for run (its results.timeline), or a note when
// the run has none.
export function timelineSection(run) {
  const box = h('section', { class: 'bench-breakdown timeline', id: 'bench-timeline' }, h('h3', {}, 'Timeline'));
  const tl = run?.results?.timeline;
  if (!tl || !Array.isArray(tl.events)) {
    box.append(h('p', { class: 'muted', id: 'bench-timeline-none' }, 'No timeline was recorded for this run (runs measured before timelines, or with too many devices).'));
    return box;
  }
  const a = analyse(tl);
  const kinds = [...new Set(a.lanes.flat().filter((e) => e.op.collective).map((e) => e.op.collective))];
  const msg = h('div', {});
  const download = h('button', { type: 'button', id: 'bench-trace-download' }, 'Download trace (Chrome trace format)');
  download.addEventListener('click', async () => {
    fill(msg);
    try {
      const r = await api(`/v1/benchmarks/${run.id}/trace`);
      const url = URL.createObjectURL(new Blob([r.text], { type: 'application/json' }));
      const link = h('a', { href: url, download: `shardplan-run-${run.id}.trace.json` });
      document.body.append(link);
      link.click();
      link.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10000);
    } catch (err) {
      fill(msg, errorBox(err));
    }
  });
  let zoom = 1;
  const frame = h('div', { class: 'timeline-frame', id: 'timeline-frame' });
  const zooms = h('span', { class: 'chips' }, 'zoom ', [1, 2, 4, 8].map((z) => h('button', { type: 'button', 'data-zoom': String(z), class: z === 1 ? 'active' : '',
    onclick: (e) => { zoom = z; for (const b of zooms.querySelectorAll('button')) b.classList.toggle('active', b === e.target); fill(frame, draw(a, zoom, run.plan_id)); } }, `\u00d7${z}`)));
  fill(frame, draw(a, zoom, run.plan_id));
  const busiest = a.busy.length ? Math.max(...a.busy) : 0;
  box.append(
    h('p', { id: 'timeline-summary' },
      `Run ${tl.run + 1} of ${tl.run + 1} (the last timed one; warmup runs count) on ${a.n} devices: ${fmtSeconds(a.end * 1e-6)} from the first device's start to the last op's end. `,
      a.collectives ? (a.straggler >= 0
        ? h('span', { id: 'timeline-straggler', 'data-device': String(a.straggler) }, `Device ${a.straggler} arrived last at ${a.lastCount[a.straggler]} of ${a.collectives} collectives (the straggler: the others waited for it). `)
        : null) : 'No collectives ran. ',
      `Busiest device: ${fmtSeconds(busiest * 1e-6)} of work; most waiting: ${fmtSeconds((a.waited.length ? Math.max(...a.waited) : 0) * 1e-6)}.`,
      tl.dropped ? ` ${tl.dropped} events beyond the recording limit are not shown.` : ''),
    h('div', { class: 'toolbar' }, zooms, download, h('span', { class: 'muted' }, 'opens in ui.perfetto.dev or chrome://tracing')),
    msg, frame,
    h('div', { class: 'timeline-legend', id: 'timeline-legend' },
      h('span', {}, h('i', { style: { background: COMPUTE } }), 'compute'),
      kinds.map((k) => h('span', { 'data-kind': k }, h('i', { style: { background: COLL_COLOURS[k] || OTHER_COLL } }), k)),
      h('span', {}, h('i', { class: 'hatch' }), 'waiting for the last member'),
      h('span', {}, h('i', { class: 'last' }), 'arrived last (straggler)')));
  return box;
}
