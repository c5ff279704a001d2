// The plan advisor on the plan view (docs/advisor.md): lint findings with
// their fixes (GET /v1/plans/{id}/lint), the collective inventory
// (GET /v1/plans/{id}/collectives), suggestions (GET /v1/plans/{id}/suggest)
// with "apply and compare", and a what-if box (POST /v1/plans/{id}/whatif).
// Each panel loads when opened, so a 100k-op plan view does not wait for it;
// routes a server does not have (404 "no resource at") show as unavailable.
import { ApiError, api, getJson } from './api.js';
import { meshLink } from './mesh.js';
import { DASH, errorBox, fill, fmtBytes, fmtSeconds, h } from './util.js';

const MAX_ROWS = 500; // table rows rendered at once (the counts cover them all)

// True when the server has no such route (it answers 404 "no resource at ...").
export function isMissingRoute(err) {
  return err instanceof ApiError && (err.status === 404 || err.status === 405) && err.body && err.body.error &&
    /no resource at|method/i.test(err.body.error.message || '');
}

function unavailable(what, path) {
  return h('p', { class: 'muted unavailable' }, `${what} is not available on this server (no ${path} in its API).`);
}

// Copies text to the clipboard; falls back to a selected text field.
export function copyButton(text, label = 'copy') {
  const b = h('button', { type: 'button', class: 'copy', title: `copy: ${text}` }, label);
  b.addEventListener('click', async () => {
    let ok = false;
    try {
      await navigator.clipboard.writeText(text);
      ok = true;
    } catch {
      const t = h('textarea', { style: { position: 'fixed', left: '-9999px' } }, text);
      document.body.append(t);
      t.select();
      try { ok = document.execCommand('copy'); } catch { ok = false; }
      t.remove();
    }
    b.dataset.copied = ok ? '1' : '0';
    b.textContent = ok ? 'copied' : 'copy failed';
    setTimeout(() => { b.textContent = label; }, 1500);
  });
  return b;
}

// A fix in both forms, each with a copy button.
function fixBlock(fix) {
  if (!fix) return DASH;
  return h('div', { class: 'fix' },
    fix.shardy ? h('div', {}, h('span', { class: 'muted' }, 'Shardy '), h('code', { class: 'fix-shardy' }, fix.shardy), ' ', copyButton(fix.shardy)) : null,
    fix.jax ? h('div', {}, h('span', { class: 'muted' }, 'JAX '), h('code', { class: 'fix-jax' }, fix.jax), ' ', copyButton(fix.jax)) : null);
}

// "OP line N loc(...)" of a finding, suggestion or collective (the op it serves).
function where(x) {
  return [x.for_op || x.op, x.line ? `line ${x.line}` : null, x.loc ? `loc(${x.loc})` : null].filter(Boolean).join(' ');
}

// A <details> panel whose body is loaded on first open and again by reload()
// (when open). open: start open (and load at once).
function lazyPanel({ id, title, open, load }) {
  const body = h('div', { class: 'panel-body' });
  const el = h('details', { class: 'panel', id, open }, h('summary', {}, h('h2', { class: 'inline' }, title)), body);
  let loaded = false;
  let seq = 0;
  const run = async () => {
    loaded = true;
    const my = ++seq;
    fill(body, h('p', { class: 'muted' }, 'Loading\u2026'));
    const parts = await load().catch((err) => errorBox(err));
    if (my === seq) {
      fill(body, parts);
      el.dataset.loaded = '1';
    }
  };
  el.addEventListener('toggle', () => { if (el.open && !loaded) run(); });
  if (open) queueMicrotask(run);
  return { el, reload: () => { if (el.open) run(); else loaded = false; } };
}

// A lazy panel showing render(answer) of GET /v1/plans/{id}/ROUTE?profile=.
function planRoutePanel(ctx, { id, title, open, planId, route, profile, render }) {
  return lazyPanel({
    id, title, open,
    async load() {
      const d = await getJson(`/v1/plans/${planId}/${route}?profile=${encodeURIComponent(profile())}`);
      return ctx.alive() ? render(d) : [];
    },
  });
}

// Lint: counts per kind (click to filter), findings with fixes.
export function lintPanel(ctx, planId, profile, open) {
  return planRoutePanel(ctx, {
    id: 'plan-lint', title: 'Lint', open, planId, route: 'lint', profile,
    render(d) {
      const fs = d.findings || [];
      let kind = '';
      const tbody = h('tbody');
      const note = h('p', { class: 'muted' });
      const draw = () => {
        const rows = fs.filter((f) => !kind || f.kind === kind);
        fill(tbody, rows.slice(0, MAX_ROWS).map((f) => h('tr', { class: `sev-${f.severity}`, 'data-kind': f.kind },
          h('td', { class: `diag ${f.severity}` }, f.severity), h('td', {}, f.kind), h('td', {}, where(f)),
          h('td', { class: 'mono' }, f.value || DASH), h('td', { class: 'num' }, fmtBytes(f.bytes)),
          h('td', { class: 'msg' }, f.message), h('td', {}, fixBlock(f.fix)))));
        note.textContent = rows.length > MAX_ROWS ? `First ${MAX_ROWS} of ${rows.length} findings shown.` : '';
      };
      const chips = h('div', { class: 'toolbar chips', id: 'lint-counts' });
      const drawChips = () => fill(chips,
        h('button', { type: 'button', class: kind ? '' : 'active', onclick: () => { kind = ''; drawChips(); draw(); } }, `all ${fs.length}`),
        Object.entries(d.counts || {}).map(([k, n]) => h('button', { type: 'button', 'data-kind': k, class: k === kind ? 'active' : '', disabled: n === 0,
          onclick: () => { kind = k; drawChips(); draw(); } }, `${k} ${n}`)));
      drawChips();
      draw();
      return [
        h('p', {}, `${fs.length} finding${fs.length === 1 ? '' : 's'} on ${d.profile}: peak ${fmtBytes(d.peak_bytes)} per device of ${fmtBytes(d.capacity_bytes)}.`),
        chips,
        fs.length ? h('table', { class: 'summary-table lint-table', id: 'lint-table' },
          h('thead', {}, h('tr', {}, ['severity', 'kind', 'where', 'value', 'bytes at stake', 'message', 'fix'].map((t) => h('th', {}, t)))), tbody)
          : h('p', { class: 'ok' }, 'Nothing to report.'),
        note,
      ];
    },
  });
}

// Every collective the partitioner inserts: bytes, axes, time and cause.
export function collectivesPanel(ctx, planId, profile, open) {
  return planRoutePanel(ctx, {
    id: 'plan-collectives', title: 'Collectives', open, planId, route: 'collectives', profile,
    render(d) {
      const cs = d.collectives || [];
      return [
        h('p', { id: 'collectives-total' }, `${d.n_collectives} collective${d.n_collectives === 1 ? '' : 's'}, ${fmtBytes(d.bytes)} per device, ${fmtSeconds(d.seconds)} on ${d.profile}.`),
        cs.length ? h('table', { class: 'summary-table collectives-table', id: 'collectives-table' },
          h('thead', {}, h('tr', {}, ['kind', 'axes', 'group', 'bytes / device', 'tensor', 'time', 'calls', 'for', 'cause', 'devices'].map((t) => h('th', {}, t)))),
          h('tbody', {}, cs.slice(0, MAX_ROWS).map((c) => h('tr', {},
            h('td', {}, c.kind), h('td', { class: 'mono' }, (c.axes || []).join(', ')), h('td', { class: 'num' }, String(c.group)),
            h('td', { class: 'num' }, fmtBytes(c.bytes)), h('td', { class: 'num' }, fmtBytes(c.tensor_bytes)), h('td', { class: 'num' }, fmtSeconds(c.seconds)),
            h('td', { class: 'num' }, String(c.count)), h('td', {}, where(c)), h('td', { class: 'msg' }, c.cause), h('td', {}, meshLink(planId, c.axes, null, 'groups'))))))
          : h('p', { class: 'ok' }, 'None: the plan needs no communication.'),
        cs.length > MAX_ROWS ? h('p', { class: 'muted' }, `First ${MAX_ROWS} of ${cs.length} shown.`) : null,
      ];
    },
  });
}

// A gain (baseline minus prediction) as the change it makes: "-1.2 ms (-30%)".
function signed(v, base, fmt) {
  if (v === null || v === undefined) return DASH;
  const pct = base ? ` (${v > 0 ? '\u2212' : '+'}${Math.abs((100 * v) / base).toFixed(Math.abs(v / base) < 0.1 ? 1 : 0)}%)` : '';
  return v > 0 ? `\u2212${fmt(v)}${pct}` : v < 0 ? `+${fmt(-v)}${pct}` : fmt(0);
}

function costCells(c) {
  return c ? [fmtSeconds(c.step_s), fmtBytes(c.peak_bytes), fmtBytes(c.comm_bytes), c.collectives ?? DASH] : [DASH, DASH, DASH, DASH];
}

// POST /v1/plans/{id}/whatif with save: the new plan's id.
async function saveWhatif(planId, edits, profile) {
  const res = await api(`/v1/plans/${planId}/whatif`, { method: 'POST', body: JSON.stringify({ edits, save: true, profile }) });
  if (!res.json || !res.json.plan_id) throw new Error('the what-if answer names no plan_id');
  return res.json;
}

// Suggestions: ranked edits with their predicted gain; "apply and compare"
// saves one as a new plan and opens the compare page on both.
export function suggestPanel(ctx, planId, profile) {
  const objective = h('select', { id: 'suggest-objective', 'aria-label': 'objective' }, h('option', { value: 'time' }, 'step time'), h('option', { value: 'memory' }, 'memory'));
  const k = h('input', { id: 'suggest-k', type: 'number', min: '1', max: '50', value: '5', style: { width: '4em' }, 'aria-label': 'how many' });
  const panel = lazyPanel({
    id: 'plan-suggest', title: 'Suggestions', open: false,
    async load() {
      const form = h('form', { class: 'toolbar', onsubmit: (e) => { e.preventDefault(); panel.reload(); } },
        h('label', {}, 'objective ', objective), h('label', {}, 'at most ', k), h('button', { type: 'submit', id: 'suggest-run' }, 'Suggest'));
      let d;
      try {
        d = await getJson(`/v1/plans/${planId}/suggest?objective=${objective.value}&k=${encodeURIComponent(k.value)}&profile=${encodeURIComponent(profile())}`);
      } catch (err) {
        if (isMissingRoute(err)) return [unavailable('Suggest', 'GET /v1/plans/{id}/suggest')];
        return [form, errorBox(err)];
      }
      if (!ctx.alive()) return [];
      const ss = d.suggestions || [];
      const b = d.baseline || {};
      const msg = h('div', { id: 'suggest-message', 'aria-live': 'polite' });
      const apply = async (s, btn) => {
        btn.disabled = true;
        fill(msg, h('p', { class: 'muted' }, `Applying suggestion ${s.rank}\u2026`));
        try {
          const w = await saveWhatif(planId, s.edits, profile());
          if (!ctx.alive()) return;
          location.hash = `#/compare/${planId},${w.plan_id}?profile=${encodeURIComponent(profile())}`;
        } catch (err) {
          btn.disabled = false;
          fill(msg, isMissingRoute(err) ? unavailable('What-if', 'POST /v1/plans/{id}/whatif') : errorBox(err));
        }
      };
      return [
        form,
        h('p', {}, `Baseline on ${d.profile}: step ${fmtSeconds(b.step_s)}, peak ${fmtBytes(b.peak_bytes)}, communication ${fmtBytes(b.comm_bytes)}. `,
          h('span', { class: 'muted' }, `${d.evaluated ?? DASH} of ${d.candidates ?? DASH} candidates evaluated in ${fmtSeconds(d.seconds)}.`)),
        ss.length ? h('table', { class: 'summary-table suggest-table', id: 'suggest-table' },
          h('thead', {}, h('tr', {}, ['#', 'constrain', 'where', 'fix', 'predicted step', 'predicted peak', 'gain: time', 'gain: memory', ''].map((t) => h('th', {}, t)))),
          h('tbody', {}, ss.map((s) => {
            const btn = h('button', { type: 'button', class: 'apply-compare' }, 'apply and compare');
            btn.addEventListener('click', () => apply(s, btn));
            const g = s.gain || {};
            const p = s.predicted || {};
            return h('tr', { 'data-rank': String(s.rank) },
              h('td', { class: 'num' }, String(s.rank)), h('td', { class: 'mono' }, s.label || DASH), h('td', {}, where(s)),
              h('td', {}, fixBlock(s.fix)), h('td', { class: 'num' }, fmtSeconds(p.step_s)), h('td', { class: 'num' }, fmtBytes(p.peak_bytes)),
              h('td', { class: `num ${g.step_s > 0 ? 'ok' : ''}` }, signed(g.step_s, b.step_s, fmtSeconds)),
              h('td', { class: `num ${g.peak_bytes > 0 ? 'ok' : ''}` }, signed(g.peak_bytes, b.peak_bytes, fmtBytes)), h('td', {}, btn));
          })))
          : h('p', { class: 'muted', id: 'suggest-none' }, 'No suggestion improves this plan.'),
        h('p', { class: 'muted' }, 'Gains are the baseline minus the prediction (\u2212 = less time or memory). "Apply and compare" stores the edited module as a new plan (POST /v1/plans/{id}/whatif with save) and compares it with this one.'),
        msg,
      ];
    },
  });
  return panel;
}

// The value reference of a plan-view row (docs: advisor contract, VREF).
export function vrefOf(r) {
  if (!r || !r.v) return null;
  const fn = r.f && r.f.name && r.f.name !== 'main' ? { function: r.f.name } : {};
  if (r.kind === 'input') return { input: r.v.index, ...fn };
  if (r.kind === 'output') return { output: r.v.index, ...fn };
  return { op: r.op.path, result: r.v.index };
}

// Parses the what-if text: an EDIT, a list of them, or {"edits": [...]}.
export function parseEdits(text) {
  let j;
  try {
    j = JSON.parse(text);
  } catch (e) {
    throw new Error(`the edits do not parse as JSON: ${e.message}`);
  }
  if (Array.isArray(j)) return j;
  if (j && Array.isArray(j.edits)) return j.edits;
  if (j && typeof j === 'object' && j.kind) return [j];
  throw new Error('give an edit ({"kind": ...}), a list of edits, or {"edits": [...]}');
}

// What-if: edits as JSON (or built from the selected value), preview the
// changed values and the cost before / after, then save as a new plan.
export function whatifPanel(ctx, planId, profile) {
  const text = h('textarea', { id: 'whatif-edits', rows: '4', spellcheck: 'false',
    placeholder: '[{"kind": "constrain", "value": {"input": 0}, "sharding": "<@mesh, [{\\"data\\"}, {}]>"}]' });
  const kind = h('select', { id: 'whatif-kind', 'aria-label': 'edit kind' }, h('option', { value: 'constrain' }, 'constrain'), h('option', { value: 'set_sharding' }, 'set_sharding'));
  const shard = h('input', { id: 'whatif-sharding', size: '40', placeholder: '<@mesh, [{"data"}, {}]>', 'aria-label': 'sharding' });
  const target = h('span', { class: 'mono', id: 'whatif-target' }, 'select a value in the table above');
  const out = h('div', { id: 'whatif-result', 'aria-live': 'polite' });
  let row = null;
  const add = () => {
    const v = vrefOf(row);
    if (!v) return;
    let edits = [];
    try {
      if (text.value.trim()) edits = parseEdits(text.value);
    } catch (err) {
      fill(out, errorBox(err)); // keep the text as typed
      return;
    }
    const s = shard.value.trim();
    const k = kind.value === 'constrain' && v.output !== undefined ? 'set_sharding' : kind.value;
    edits.push({ kind: k, value: v, sharding: s === '' && k === 'set_sharding' ? null : s });
    text.value = `[\n${edits.map((e) => ` ${JSON.stringify(e)}`).join(',\n')}\n]`;
  };
  const send = async (save) => {
    let edits;
    try {
      edits = parseEdits(text.value);
    } catch (err) {
      fill(out, errorBox(err));
      return;
    }
    fill(out, h('p', { class: 'muted' }, save ? 'Saving\u2026' : 'Previewing\u2026'));
    let res;
    try {
      res = await api(`/v1/plans/${planId}/whatif`, { method: 'POST', body: JSON.stringify({ edits, save, profile: profile() }) });
    } catch (err) {
      if (ctx.alive()) fill(out, isMissingRoute(err) ? unavailable('What-if', 'POST /v1/plans/{id}/whatif') : errorBox(err));
      return;
    }
    if (!ctx.alive()) return;
    const w = res.json;
    const ch = w.changed || [];
    const cb = w.cost && w.cost.before;
    const ca = w.cost && w.cost.after;
    fill(out,
      save && w.plan_id ? h('p', { class: 'ok', id: 'whatif-saved' }, `HTTP ${res.status}: plan `, h('a', { href: `#/plan/${w.plan_id}`, id: 'whatif-plan-link' }, String(w.plan_id)),
        ' saved; ', h('a', { href: `#/compare/${planId},${w.plan_id}?profile=${encodeURIComponent(profile())}`, id: 'whatif-compare-link' }, 'compare with this plan')) : null,
      h('p', { id: 'whatif-summary' }, `${w.edits} edit${w.edits === 1 ? '' : 's'}: ${w.n_changed} value${w.n_changed === 1 ? '' : 's'} change`,
        w.region ? `; ${w.region.ops} of ${w.region.total_ops} ops re-propagated${w.region.incremental === false && w.region.why_full ? ` (all: ${w.region.why_full})` : ''}` : '', w.seconds ? ` in ${fmtSeconds(w.seconds.incremental)}` : '', '.'),
      h('table', { class: 'summary-table', id: 'whatif-cost' },
        h('thead', {}, h('tr', {}, ['', 'step', 'peak / device', 'communication', 'collectives'].map((t) => h('th', {}, t)))),
        h('tbody', {}, [['before', cb], ['after', ca]].map(([l, c]) => h('tr', {}, h('th', {}, l), costCells(c).map((x) => h('td', { class: 'num' }, String(x))))))),
      ch.length ? h('table', { class: 'summary-table', id: 'whatif-changed' },
        h('thead', {}, h('tr', {}, ['value', 'before', 'after'].map((t) => h('th', {}, t)))),
        h('tbody', {}, ch.slice(0, MAX_ROWS).map((c) => h('tr', {}, h('td', {}, c.label || JSON.stringify(c.value)),
          h('td', { class: 'mono' }, c.before ?? 'replicated'), h('td', { class: 'mono differs-cell' }, c.after ?? 'replicated')))))
        : h('p', { class: 'muted' }, 'No sharding changes.'),
      ch.length > MAX_ROWS ? h('p', { class: 'muted' }, `First ${MAX_ROWS} of ${ch.length} shown.`) : null);
  };
  const el = h('details', { class: 'panel', id: 'plan-whatif' }, h('summary', {}, h('h2', { class: 'inline' }, 'What if')),
    h('p', { class: 'muted' }, 'Edits (docs/advisor.md): constrain, unconstrain, set_sharding, barrier, unbarrier, rule, custom_rule. Preview re-propagates without storing anything; save stores the edited module as a new plan.'),
    h('div', { class: 'toolbar' }, 'selected value: ', target),
    h('div', { class: 'toolbar' }, kind, shard, h('button', { type: 'button', id: 'whatif-add', onclick: add }, 'Add edit')),
    text,
    h('div', { class: 'toolbar' }, h('button', { type: 'button', id: 'whatif-preview', onclick: () => send(false) }, 'Preview'),
      h('button', { type: 'button', id: 'whatif-save', onclick: () => send(true) }, 'Save as a new plan')),
    out);
  return {
    el,
    select(r) {
      row = r;
      const v = vrefOf(r);
      target.textContent = v ? `${JSON.stringify(v)}${r.v.name !== undefined ? ` (${r.v.name})` : ''}` : 'this row has no value';
      shard.value = r && r.v && r.v.sharding ? r.v.sharding.text : '';
    },
  };
}
