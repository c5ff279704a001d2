// Submit a module (JSON graph or MLIR, pasted or uploaded) with a stored
// or ad-hoc mesh, to POST /v1/plans; shows the API's answer as it is.
import { api, listAll } from './api.js';
import { errorBox, fill, h } from './util.js';

const PASSES = ['sdy-propagation-pipeline', 'sdy-user-priority-propagate', 'sdy-op-priority-propagate',
  'sdy-aggressive-propagate', 'sdy-basic-propagate'];

// "data=2,model=4" -> {"axes":[{"name":"data","size":2},...]}; throws on bad text.
export function parseMesh(text) {
  const axes = text.split(',').map((s) => s.trim()).filter(Boolean).map((p) => {
    const m = /^([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(\d+)$/.exec(p);
    if (!m) throw new Error(`mesh axis "${p}": write name=size, e.g. data=2,model=4`);
    return { name: m[1], size: Number(m[2]) };
  });
  if (!axes.length) throw new Error('mesh: at least one axis');
  return { axes };
}

export async function submitPage(main) {
  const text = h('textarea', { id: 'module-text', rows: '16', spellcheck: 'false', placeholder: 'Paste a graph document (JSON) or StableHLO MLIR text here, or choose a file.' });
  const file = h('input', { type: 'file', id: 'module-file', accept: '.json,.mlir,.txt' });
  file.addEventListener('change', async () => { if (file.files[0]) text.value = await file.files[0].text(); });
  const name = h('input', { id: 'graph-name', placeholder: 'name for the stored graph (optional)' });
  const pass = h('select', { id: 'pass' }, PASSES.map((p) => h('option', { value: p }, p)));
  const meshMode = h('select', { id: 'mesh-mode' }, h('option', { value: 'doc' }, 'the module\u2019s own mesh'),
    h('option', { value: 'stored' }, 'a stored mesh'), h('option', { value: 'define' }, 'define a mesh'));
  const stored = h('select', { id: 'mesh-stored' });
  const define = h('input', { id: 'mesh-define', placeholder: 'data=2,model=4' });
  const rules = h('textarea', { id: 'axis-rules', rows: '3', spellcheck: 'false', placeholder: '[["batch", "data"], ["mlp", "model"]]' });
  const result = h('section', { id: 'submit-result', 'aria-live': 'polite' });
  const sync = () => {
    stored.hidden = meshMode.value !== 'stored';
    define.hidden = meshMode.value !== 'define';
  };
  meshMode.addEventListener('change', sync);
  sync();
  try {
    const ms = await listAll('meshes');
    fill(stored, ...ms.map((m) => h('option', { value: m.name }, m.name)));
    if (!ms.length) stored.append(h('option', { value: '' }, '(no stored meshes)'));
  } catch (err) {
    fill(stored, h('option', { value: '' }, '(cannot list meshes)'));
  }

  async function submit(ev) {
    ev.preventDefault();
    fill(result, h('p', { class: 'muted' }, 'Planning\u2026'));
    const src = text.value;
    const isJson = /^\s*[{[]/.test(src);
    const env = { options: { pass: pass.value } };
    try {
      if (isJson) {
        let g;
        try {
          g = JSON.parse(src);
        } catch (e) {
          throw new Error(`the pasted JSON does not parse: ${e.message}`);
        }
        if (rules.value.trim()) {
          // Logical axis rules are a member of the graph document (docs/graph-format.md).
          g.logical_axis_rules = JSON.parse(rules.value);
        }
        env.graph = g;
      } else {
        if (rules.value.trim()) throw new Error('logical axis rules apply to JSON graph documents only (MLIR carries its shardings)');
        env.mlir = src;
      }
      if (meshMode.value === 'stored' && stored.value) env.mesh = stored.value;
      if (meshMode.value === 'define') env.mesh = parseMesh(define.value);
      if (name.value.trim()) env.name = name.value.trim();
    } catch (err) {
      fill(result, errorBox(err));
      return;
    }
    try {
      const res = await api('/v1/plans', { method: 'POST', body: JSON.stringify(env) });
      const p = res.json;
      fill(result, 
        h('p', { class: 'ok', id: 'submit-ok' }, `HTTP ${res.status}: plan `, h('a', { href: `#/plan/${p.id}`, id: 'submitted-plan-link' }, String(p.id)),
          res.status === 200 ? ' (already stored: the same request was planned before)' : ' created'),
        h('details', {}, h('summary', {}, 'Response'), h('pre', { class: 'raw' }, res.text.length > 200000 ? `${res.text.slice(0, 200000)}\u2026` : res.text)));
    } catch (err) {
      fill(result, errorBox(err));
    }
  }

  fill(main, 
    h('h1', {}, 'Submit a module'),
    h('form', { id: 'submit-form', onsubmit: submit },
      h('div', { class: 'toolbar' }, file, name),
      text,
      h('div', { class: 'toolbar' }, h('label', {}, 'pass ', pass), h('label', {}, 'mesh ', meshMode), stored, define),
      h('label', { class: 'block' }, 'Logical axis rules (JSON graphs; replaces the document\u2019s logical_axis_rules) ', rules),
      h('button', { type: 'submit', id: 'submit-btn' }, 'Plan it')),
    result,
  );
}
