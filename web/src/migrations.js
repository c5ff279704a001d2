// GSPMD -> Shardy migration reports (docs/migration.md, issue 20).
// #/migrations lists the stored reports (GET /v1/migrations, all pages) and
// takes a new module (POST /v1/migrations: MLIR text as GSPMD left it, with
// mhlo.sharding on its ops). #/migration/ID shows one (GET
// /v1/migrations/{id}) side by side: every value GSPMD and Shardy shard
// differently (first first) with GSPMD's sharding, Shardy's and why Shardy
// took its path (its recorded origins); the cost per device of GSPMD's
// plan, Shardy's and Shardy's with the proposed constraints (peak memory
// and whether it fits the profile's, communication per mesh axis, predicted
// step time); and the constraints themselves as sdy and JAX lines.
import { api, getJson, listAll } from './api.js';
import { BUILTIN_PROFILES } from './plan.js';
import { DASH, errorBox, fill, fmtBytes, fmtSeconds, fmtTime, h } from './util.js';

export async function migrationsPage(main, ctx) {
  const text = h('textarea', { id: 'migration-text', rows: 8, cols: 80, placeholder: 'MLIR with mhlo.sharding (e.g. an XLA dump after GSPMD propagation)', 'aria-label': 'module' });
  const name = h('input', { id: 'migration-name', placeholder: 'name', 'aria-label': 'name' });
  const prof = h('select', { id: 'migration-profile', 'aria-label': 'device profile' }, BUILTIN_PROFILES.map((p) => h('option', { value: p }, p)));
  const status = h('div', { id: 'migration-status' });
  const submit = async (e) => {
    e.preventDefault();
    fill(status, h('p', { class: 'muted' }, 'Building the report\u2026'));
    const q = new URLSearchParams({ profile: prof.value });
    if (name.value.trim()) q.set('name', name.value.trim());
    try {
      const r = await api(`/v1/migrations?${q}`, { method: 'POST', body: text.value, contentType: 'text/plain' });
      fill(status, h('p', { id: 'migration-ok' }, `HTTP ${r.status}: report `,
        h('a', { href: `#/migration/${r.json.id}`, id: 'migration-link' }, String(r.json.id))));
    } catch (err) {
      fill(status, errorBox(err));
      return;
    }
    await loadList();
  };
  const form = h('form', { id: 'migration-form', onsubmit: submit },
    h('div', {}, text),
    h('div', { class: 'toolbar' }, h('label', {}, 'name ', name), h('label', {}, 'profile ', prof),
      h('button', { type: 'submit', id: 'migration-submit' }, 'Migrate')));
  const list = h('div', { id: 'migrations-list' }, h('p', { class: 'muted' }, 'Loading\u2026'));
  fill(main, h('h1', {}, 'GSPMD \u2192 Shardy migrations'), form, status, h('h2', {}, 'Stored reports'), list);
  await loadList();

  // the stored reports, newest first
  async function loadList() {
    const items = await listAll('migrations');
    if (!ctx.alive()) return;
    if (items.length === 0) {
      fill(list, h('p', { class: 'muted' }, 'No migration reports yet.'));
      return;
    }
    fill(list, h('table', { id: 'migrations-table' },
      h('thead', {}, h('tr', {}, ['id', 'name', 'profile', 'module', 'created'].map((c) => h('th', {}, c)))),
      h('tbody', {}, items.slice().reverse().map((m) => h('tr', { 'data-id': m.id },
        h('td', {}, h('a', { href: `#/migration/${m.id}` }, String(m.id))),
        h('td', {}, m.name), h('td', {}, m.profile), h('td', {}, fmtBytes(m.size)),
        h('td', {}, fmtTime(m.created_at)))))));
  }
}

// The cost rows of up to three sides (GSPMD, Shardy, Shardy with the fix).
function costTable(sides) {
  const cell = (c, f) => h('td', {}, c ? f(c) : DASH);
  const axes = [...new Set(sides.flatMap((s) => (s.cost ? s.cost.per_axis.map((a) => a.axes) : [])))];
  const axisBytes = (c, ax) => {
    const a = c.per_axis.find((x) => x.axes === ax);
    return a ? fmtBytes(a.bytes) : fmtBytes(0);
  };
  const row = (label, f, cls) => h('tr', { class: cls }, h('th', {}, label), sides.map((s) => cell(s.cost, f)));
  return h('table', { id: 'migration-cost' },
    h('thead', {}, h('tr', {}, h('th', {}, `per device (${sides[0].cost ? sides[0].cost.profile : DASH})`), sides.map((s) => h('th', {}, s.label)))),
    h('tbody', {},
      row('peak memory', (c) => `${fmtBytes(c.peak_bytes)}${c.fits ? '' : ' (OOM)'}`),
      row('fits the profile\u2019s memory', (c) => (c.fits ? 'yes' : 'no'), 'fits'),
      row('communication', (c) => fmtBytes(c.comm_bytes)),
      axes.map((ax) => row(`\u2003over ${ax}`, (c) => axisBytes(c, ax), 'axis')),
      row('predicted step time', (c) => fmtSeconds(c.step_s))));
}

function origins(o) {
  const e = Object.entries(o || {});
  return e.length === 0 ? DASH : e.map(([ax, from]) => `${ax} from ${from}`).join(', ');
}

export async function migrationPage(main, ctx, id) {
  fill(main, h('h1', {}, `Migration ${id}`), h('p', { class: 'muted' }, 'Loading\u2026'));
  const m = await getJson(`/v1/migrations/${encodeURIComponent(id)}`);
  if (!ctx.alive()) return;
  const r = m.report || {};
  const dv = r.divergences || [];
  const fix = r.fix;
  const head = h('p', { id: 'migration-head' }, `${m.name} \u00b7 profile ${m.profile} \u00b7 mesh ${r.mesh || DASH} \u00b7 `,
    h('a', { href: '#/migrations' }, 'all migrations'));
  const dvTable = dv.length === 0
    ? h('p', { id: 'migration-divergences' }, 'GSPMD and Shardy shard every value alike.')
    : h('table', { id: 'migration-divergences' },
      h('thead', {}, h('tr', {}, ['#', 'value', 'op', 'at', 'GSPMD', 'Shardy', 'why (Shardy\u2019s origins)'].map((c) => h('th', {}, c)))),
      h('tbody', {}, dv.map((d, i) => h('tr', { class: i === 0 ? 'first' : undefined },
        h('td', {}, String(i + 1)), h('td', {}, d.value || DASH), h('td', {}, d.op),
        h('td', {}, `${d.line}:${d.col}`),
        h('td', { class: 'gspmd' }, h('code', {}, d.gspmd || '(none)')),
        h('td', { class: 'shardy' }, h('code', {}, d.shardy || '(none)')),
        h('td', {}, origins(d.shardy_origins))))));
  const sides = [{ label: 'GSPMD', cost: r.cost && r.cost.gspmd }, { label: 'Shardy', cost: r.cost && r.cost.shardy }];
  if (fix) sides.push({ label: 'Shardy + constraints', cost: fix.cost });
  const fixPart = !fix ? h('p', { id: 'migration-fix', class: 'muted' }, 'No constraint to propose.')
    : h('div', { id: 'migration-fix' },
      h('p', {}, `GSPMD\u2019s choice is ${fix.gspmd_cheaper ? 'cheaper' : 'not cheaper'}. To make Shardy take it, add (first divergence first); re-planned with them, ${fix.divergences_after} value(s) still differ:`),
      h('ol', {}, fix.constraints.map((c) => h('li', {},
        `after ${c.op} at ${c.line}:${c.col}`,
        h('pre', { class: 'sdy' }, c.sdy),
        h('pre', { class: 'jax' }, c.jax),
        c.jax_spelled ? null : h('p', { class: 'muted' }, 'a sub-axis has no PartitionSpec spelling: name the mesh axes so it is whole')))));
  fill(main, h('h1', {}, `Migration ${m.id}: ${m.name}`), head,
    h('h2', {}, `${dv.length} value(s) sharded differently`), dvTable,
    h('h2', {}, 'Cost'), costTable(sides),
    h('h2', {}, 'Constraints'), fixPart);
}
