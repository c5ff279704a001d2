// Browser tests of the dashboard in headless Chromium (Debian's package,
// driven by playwright-core) against the real server, started here on
// 127.0.0.1 with an ephemeral port and a temporary SQLite file, stopped at
// the end. Usage (the Makefile's web-test target):
//   node test/run.mjs SHARDPLAN_BINARY WEB_DIR OUT_DIR [--perf]
// Screenshots go to OUT_DIR; with UPDATE_DOCS_IMG=1 the compare page's also
// to docs/img/compare.png (the README's picture).
// --perf adds 1,000 plans (PERF_PLANS=N) and a 100k-op module and prints render times.
import { spawn, spawnSync } from 'node:child_process';
import http from 'node:http';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const here = dirname(fileURLToPath(import.meta.url));
const repo = resolve(here, '..', '..');
const [binArg, webArg, outArg] = process.argv.slice(2);
const perf = process.argv.includes('--perf');
if (!binArg || !webArg || !outArg) {
  console.error('usage: node test/run.mjs SHARDPLAN WEB_DIR OUT_DIR [--perf]');
  process.exit(2);
}
const bin = resolve(binArg);
const webDir = resolve(webArg);
const outDir = resolve(outArg);
mkdirSync(outDir, { recursive: true });
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const WAIT = 15000; // ms: every single wait is bounded by this
const TOTAL = perf ? 900000 : 240000; // ms: the whole run

const tmp = mkdtempSync(join(tmpdir(), 'shardplan-web-'));
let server = null;
let browser = null;
let failures = 0;
let passes = 0;

const killer = setTimeout(() => {
  console.error(`web-test: FAILED: took over ${TOTAL / 1000} s`);
  cleanup().finally(() => process.exit(1));
}, TOTAL);

async function cleanup() {
  clearTimeout(killer);
  if (browser) await browser.close().catch(() => {});
  browser = null;
  if (server && server.exitCode === null) {
    server.kill('SIGTERM');
    await new Promise((r) => { const t = setTimeout(() => { server.kill('SIGKILL'); r(); }, 5000); server.once('exit', () => { clearTimeout(t); r(); }); });
  }
  rmSync(tmp, { recursive: true, force: true });
}

function check(cond, what) {
  if (cond) { passes++; console.log(`  ok   ${what}`); } else { failures++; console.log(`  FAIL ${what}`); }
}

async function step(name, fn) {
  console.log(`== ${name}`);
  const t0 = Date.now();
  try {
    await fn();
  } catch (err) {
    failures++;
    console.log(`  FAIL ${name}: ${err.stack || err}`);
  }
  console.log(`   (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
}

function startServer(extra = []) {
  return new Promise((resolveP, reject) => {
    const args = ['serve', '--listen', '127.0.0.1:0', '--db', join(tmp, 'shardplan.db'), '--log', '', '--web', webDir, ...extra];
    const p = spawn(bin, args, { cwd: repo, stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    const t = setTimeout(() => reject(new Error(`server did not start: ${err}`)), WAIT);
    p.stderr.on('data', (d) => {
      err += d;
      const m = /listening on http:\/\/127\.0\.0\.1:(\d+)\//.exec(err);
      if (m) { clearTimeout(t); resolveP({ proc: p, base: `http://127.0.0.1:${m[1]}` }); }
    });
    p.on('exit', (code) => { clearTimeout(t); reject(new Error(`server exited ${code}: ${err}`)); });
  });
}

async function post(base, path, body, type = 'application/json') {
  const r = await fetch(base + path, { method: 'POST', headers: { 'Content-Type': type }, body, signal: AbortSignal.timeout(120000) });
  const j = await r.json();
  if (!r.ok) throw new Error(`POST ${path}: ${r.status} ${JSON.stringify(j)}`);
  return j;
}

function rawGet(base, path) {
  const u = new URL(base);
  return new Promise((resolveP, reject) => {
    const req = http.get({ host: u.hostname, port: u.port, path, timeout: WAIT }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d) => { body += d; });
      res.on('end', () => resolveP({ status: res.statusCode, body }));
    });
    req.on('timeout', () => req.destroy(new Error(`GET ${path}: timeout`)));
    req.on('error', reject);
  });
}

function example(...args) {
  const r = spawnSync(bin, ['example', ...args], { cwd: repo, maxBuffer: 1 << 30, timeout: 120000 });
  if (r.status !== 0) throw new Error(`shardplan example ${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
}

// A page that records console errors and uncaught exceptions.
async function newPage(ctx, errors) {
  const page = await ctx.newPage();
  page.setDefaultTimeout(WAIT);
  page.on('console', (m) => { if (m.type() === 'error') errors.push(`console: ${m.text()}`); });
  page.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
  return page;
}

async function ready(page) {
  await page.waitForSelector('main[data-ready="1"]', { timeout: WAIT });
}

// "85.4 µs" / "1.23 ms" / "0.512 s" -> {v, tol} (tol: half the last printed digit), or null.
function parseSeconds(text) {
  const m = /^(\d+(?:\.(\d+))?) (\u00b5s|ms|s)$/.exec(String(text).trim());
  if (!m) return null;
  const unit = { '\u00b5s': 1e-6, ms: 1e-3, s: 1 }[m[3]];
  return { v: Number(m[1]) * unit, tol: 0.5 * 10 ** -(m[2] ? m[2].length : 0) * unit * 1.01 };
}

const near = (p, x) => p !== null && Math.abs(p.v - x) <= p.tol;
const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;

// The benchmark panel's "Where the time goes" and "Collectives" tables
// against the run's results as the API gives them.
async function checkBreakdown(page, r) {
  check(Array.isArray(r.ops) && r.ops.length > 0 && r.ops_timed >= r.ops.length, `API: ${r.ops_timed} ops timed, ${r.ops.length} listed`);
  await page.waitForSelector('#bench-ops tbody tr', { timeout: WAIT });
  const cells = () => page.$$eval('#bench-ops tbody tr', (rows) => rows.map((tr) => [...tr.children].map((c) => ({ t: c.textContent, flag: c.dataset.flag || '' }))));
  let rows = await cells();
  const top = Math.min(15, r.ops.length);
  check(rows.length === top, `ops table: top ${top} rows (${rows.length})`);
  const cap = await page.textContent('#bench-ops caption');
  check(cap.includes(`${top} of ${r.ops_timed} timed`), `caption says "N of ops_timed" (${cap})`);
  const bad = [];
  rows.forEach((c, i) => {
    const o = r.ops[i];
    const m = mean(o.measured_s);
    const mx = Math.max(...o.measured_s);
    const ratio = m / o.predicted_s;
    if (c[0].t !== o.op) bad.push(`${i}: op ${c[0].t}`);
    if (!c[1].t.startsWith(o.line ? `${o.line}:` : o.result || `operand ${o.operand}`)) bad.push(`${i}: where ${c[1].t}`);
    if (!near(parseSeconds(c[2].t), m)) bad.push(`${i}: mean ${c[2].t} vs ${m}`);
    const mxm = /^(.*) \(D(\d+)\)$/.exec(c[3].t);
    if (!mxm || !near(parseSeconds(mxm[1]), mx) || o.measured_s[Number(mxm[2])] !== mx) bad.push(`${i}: max ${c[3].t}`);
    if (!near(parseSeconds(c[4].t), o.predicted_s)) bad.push(`${i}: predicted ${c[4].t}`);
    if (o.predicted_s > 0) {
      const rt = /^(\d+\.\d\d)\u00d7/.exec(c[5].t);
      if (!rt || Math.abs(Number(rt[1]) - ratio) > 0.0051 * Math.max(1, ratio)) bad.push(`${i}: ratio ${c[5].t} vs ${ratio}`);
      if (c[5].flag !== (ratio > 2 ? 'high' : ratio < 0.5 ? 'low' : '')) bad.push(`${i}: flag '${c[5].flag}' for ${ratio}`);
    } else if (c[5].t !== '\u2014' || c[5].flag) bad.push(`${i}: ratio ${c[5].t} without a prediction`);
    const gf = Number(c[6].t);
    if (o.flops > 0 ? !(Math.abs(gf - o.flops / m / 1e9) <= 0.0051) : c[6].t !== '\u2014') bad.push(`${i}: GFLOP/s ${c[6].t}`);
  });
  check(bad.length === 0, `ops rows match the API: op, where, mean, max (device), predicted, ratio and flag, GFLOP/s (${bad.slice(0, 4).join('; ')})`);
  const total = await page.textContent('#bench-ops-total');
  const sumOps = r.ops.reduce((a, o) => a + mean(o.measured_s), 0);
  const sumColls = (r.collectives || []).reduce((a, c) => a + mean(c.measured_s), 0);
  const S = '([\\d.]+ (?:\u00b5s|ms|s))';
  const tm = new RegExp(`^Sum of per-op mean times: ${S} in ${r.ops_timed} compute ops \\+ ${S} in \\d+ collectives = ${S} of the mean timed run ${S} \\(\\d+%; median step ${S}\\); ${S} outside them`).exec(total);
  check(!!tm && near(parseSeconds(tm[1]), sumOps) && near(parseSeconds(tm[2]), sumColls) && near(parseSeconds(tm[3]), sumOps + sumColls) &&
    near(parseSeconds(tm[4]), mean(r.iter_s)) && near(parseSeconds(tm[5]), r.step_s) && near(parseSeconds(tm[6]), mean(r.iter_s) - sumOps - sumColls),
  `total line: ops + collectives vs the mean run and the median step (${total})`);
  if (r.ops.length > top) {
    await page.click('#bench-ops-toggle');
    rows = await cells();
    const cap2 = await page.textContent('#bench-ops caption');
    check(rows.length === r.ops.length && rows[r.ops.length - 1][0].t === r.ops[r.ops.length - 1].op && cap2.includes(`${r.ops.length} of ${r.ops_timed}`),
      `show all: ${rows.length} rows (${cap2})`);
    await page.click('#bench-ops-toggle');
    check((await cells()).length === top, 'and back to the top 15');
  }

  const cs = r.collectives;
  check(Array.isArray(cs) && cs.length > 0, `API: ${cs ? cs.length : 0} collectives`);
  await page.waitForSelector('#bench-colls tbody tr', { timeout: WAIT });
  const crow = await page.$$eval('#bench-colls tbody tr', (trs) => trs.map((tr) => ({
    c: [...tr.children].map((x) => x.textContent),
    bars: tr.querySelectorAll('.dev-bar').length,
    straggler: [...tr.querySelectorAll('.dev-bar')].findIndex((b) => b.classList.contains('straggler')),
    stragglers: tr.querySelectorAll('.dev-bar.straggler').length,
  })));
  check(crow.length === cs.length, `collectives table: ${crow.length} rows, as many as the API's`);
  check(crow.every((x) => x.c[0] === 'all_reduce' && x.c[1] === 'model' && x.c[2] === '4'),
    `the Flax MLP's collectives: all_reduce over model, group 4 (${crow.map((x) => x.c.slice(0, 3).join(' ')).join('; ')})`);
  check(crow.every((x) => x.bars === r.devices && x.stragglers === 1), `one bar per device (${r.devices}) in each row, one marked (${crow.map((x) => x.bars).join(',')})`);
  const cbad = [];
  crow.forEach((x, i) => {
    const c = cs[i];
    const [lo, av, hi] = x.c[4].split(' / ').map(parseSeconds);
    if (!near(lo, Math.min(...c.measured_s)) || !near(av, mean(c.measured_s)) || !near(hi, Math.max(...c.measured_s))) cbad.push(`${i}: ${x.c[4]}`);
    if (c.measured_s[x.straggler] !== Math.min(...c.measured_s)) cbad.push(`${i}: marked D${x.straggler} is not the shortest`);
    if (!/^\d+(\.\d)? (B|KiB|MiB|GiB)$/.test(x.c[3])) cbad.push(`${i}: bytes ${x.c[3]}`);
    if (!near(parseSeconds(x.c[6]), c.predicted_s)) cbad.push(`${i}: predicted ${x.c[6]}`);
    const bw = /^(\d+\.\d) (B|KiB|MiB|GiB)\/s$/.exec(x.c[8]);
    const scale = bw ? 1024 ** ['B', 'KiB', 'MiB', 'GiB'].indexOf(bw[2]) : 0;
    if (!bw || Math.abs(Number(bw[1]) * scale - c.bytes / mean(c.measured_s)) > 0.051 * scale) cbad.push(`${i}: bandwidth ${x.c[8]}`);
    if (!x.c[9].startsWith(c.line ? `${c.line}:` : c.result || `operand ${c.operand}`)) cbad.push(`${i}: where ${x.c[9]}`);
  });
  check(cbad.length === 0, `collective rows match the API: min / mean / max, marked device, bytes, predicted, bandwidth, where (${cbad.slice(0, 4).join('; ')})`);
}

// Copies benchmark run id in the test's database without results.ops_timed,
// ops and collectives (what a run stored before them looks like), with the
// sqlite3 shell (DEB_PKGS). Returns {id} of the copy, or {id: 0, error}.
function oldStyleRun(id) {
  const sql = 'INSERT INTO bench_runs (plan_id, spec, status, progress, results, error, webhook_url, created_at, updated_at)' +
    " SELECT plan_id, spec, status, progress, CAST(json_remove(CAST(results AS TEXT), '$.ops_timed', '$.ops', '$.collectives') AS BLOB)," +
    ` error, webhook_url, created_at, updated_at FROM bench_runs WHERE id = ${Number(id)}; SELECT last_insert_rowid();`;
  const r = spawnSync('sqlite3', ['-cmd', '.timeout 5000', join(tmp, 'shardplan.db'), sql], { encoding: 'utf8', timeout: WAIT });
  if (r.error || r.status !== 0) return { id: 0, error: String(r.error || r.stderr).trim() };
  return { id: Number(r.stdout.trim()) };
}

async function main() {
  const started = await startServer(perf ? ['--max-body', '1073741824', '--timeout', '600'] : []);
  server = started.proc;
  const base = started.base;
  console.log(`web-test: server ${base}, db ${tmp}`);

  await step('static files: types, caching, traversal', async () => {
    const idx = await fetch(`${base}/`);
    const html = await idx.text();
    check(idx.status === 200 && idx.headers.get('content-type').startsWith('text/html'), '/ is index.html as text/html');
    check(idx.headers.get('cache-control') === 'no-cache', 'index.html: Cache-Control no-cache');
    const js = /src="(assets\/app-[A-Z0-9]+\.js)"/.exec(html);
    check(!!js, 'index.html names a hashed script');
    if (js) {
      const a = await fetch(`${base}/${js[1]}`);
      await a.arrayBuffer();
      check(a.status === 200 && a.headers.get('content-type').startsWith('text/javascript'), 'script as text/javascript');
      check(/immutable/.test(a.headers.get('cache-control') || '') && /max-age=31536000/.test(a.headers.get('cache-control')), 'hashed asset: immutable, one year');
    }
    const css = /href="(assets\/app-[A-Z0-9]+\.css)"/.exec(html);
    if (css) {
      const c = await fetch(`${base}/${css[1]}`);
      await c.arrayBuffer();
      check(c.headers.get('content-type').startsWith('text/css'), 'stylesheet as text/css');
    }
    // Sent as written (fetch would normalise the dots away).
    for (const p of ['/../../etc/passwd', '/assets/../../etc/passwd', '/%2e%2e/%2e%2e/etc/passwd', '/assets/%2e%2e/index.html',
      '/assets/..%2f..%2fetc/passwd', '/.hidden', '/nope.js', '/assets/']) {
      const r = await rawGet(base, p);
      check(r.status === 404 && !r.body.includes('root:'), `${p} sent as is: 404`);
    }
    const api = await fetch(`${base}/v1/nothing`);
    check(api.status === 404 && (await api.json()).error.code === 'not_found', '/v1 stays the API (JSON 404)');
  });

  // Plans the tests look at: the transformer template under dp and tp.
  const dp = await post(base, '/v1/plans?name=transformer-dp', example('transformer', '--strategy', 'dp'));
  const tp = await post(base, '/v1/plans?name=transformer-tp', example('transformer', '--strategy', 'tp'));
  console.log(`web-test: transformer plans dp=${dp.id} tp=${tp.id}`);

  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, timeout: WAIT,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run', '--disable-background-networking'] });
  const ctx = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
  ctx.setDefaultTimeout(WAIT);
  // Loopback only: any request elsewhere fails the test.
  const foreign = [];
  await ctx.route((url) => !url.href.startsWith(base) && !url.href.startsWith('data:'), (r) => { foreign.push(r.request().url()); r.abort(); });

  let mlpId = null;
  await step('submit the Flax MLP and see its plan', async () => {
    const errors = [];
    const page = await newPage(ctx, errors);
    await page.goto(`${base}/#/submit`);
    await ready(page);
    await page.setInputFiles('#module-file', join(repo, 'examples', 'flax_mlp.json'));
    await page.waitForFunction(() => document.querySelector('#module-text').value.length > 100, null, { timeout: WAIT });
    await page.fill('#graph-name', 'flax-mlp');
    await page.click('#submit-btn');
    await page.waitForSelector('#submitted-plan-link', { timeout: WAIT });
    check(/HTTP 201/.test(await page.textContent('#submit-ok')), 'POST /v1/plans answered 201');
    await page.screenshot({ path: join(outDir, 'submit.png'), fullPage: true });
    mlpId = Number(await page.textContent('#submitted-plan-link'));
    await page.click('#submitted-plan-link');
    await ready(page);
    await page.waitForSelector('.ops-table .vt-row', { timeout: WAIT });
    const n = await page.textContent('#op-count');
    check(/values/.test(n), `plan view lists values (${n})`);
    const jax = await page.textContent('#jax-shardings pre');
    check(/in_shardings = \(/.test(jax) && /NamedSharding\(mesh, P\(None, 'model'\)\),  # layer0\.W1/.test(jax) && /out_shardings = \(/.test(jax),
      'in JAX: in_shardings / out_shardings to paste, by parameter name');
    const pspecs = await page.$$eval('.ops-table .vt-row', (rows) => rows.map((r) => r.children[7].textContent));
    check(pspecs.some((x) => /^P\(/.test(x)), `PartitionSpec column (${pspecs.slice(0, 3).join(', ')})`);
    await page.waitForSelector('#device-grid .cell', { timeout: WAIT });
    await page.waitForSelector('#plan-cost canvas', { timeout: WAIT });
    check((await page.$$('#plan-cost canvas')).length === 3, 'memory and communication charts');
    // Memory over program order: the timeline, the op at the peak, the largest buffers linking to tensors.
    await page.waitForSelector('#plan-memory canvas', { timeout: WAIT });
    await page.waitForSelector('#peak-buffers li a', { timeout: WAIT });
    const peakText = await page.textContent('#memory-peak');
    check(/^Peak .* at op \d+: [a-z]+\.[a-z_]+/.test(peakText), `memory viewer names the op at the peak (${peakText.slice(0, 80)})`);
    const nBufs = (await page.$$('#peak-buffers li')).length;
    check(nBufs >= 2, `largest buffers at the peak listed (${nBufs})`);
    await page.click('#peak-buffers li a');
    await page.waitForFunction(() => /input|op/.test(document.querySelector('#value-detail h2')?.textContent || ''), null, { timeout: WAIT });
    check(/^(input|op) /.test(await page.textContent('#value-detail h2')), 'a buffer at the peak links to its tensor');
    await (await page.$('#plan-memory')).screenshot({ path: join(outDir, 'memory.png') });
    check(/self|input|output|constraint/.test(await page.textContent('#why')), '"why" shows sharding origins');
    // "why" in words: the propagation edges of l0.relu = maximum(l0.h, l0.zeros), named
    await page.fill('#op-filter', 'l0.relu');
    await page.waitForFunction(() => /^1 of /.test(document.querySelector('#op-count')?.textContent || ''), null, { timeout: WAIT });
    await page.click('.ops-table .vt-row');
    await page.waitForSelector('#why-edges li', { timeout: WAIT });
    const edgeText = await page.textContent('#why-edges');
    check(/^Step \d+: axes data and model went from result 0 l0\.relu to operand 0 l0\.h and operand 1 l0\.zeros\.$/.test(edgeText),
      `"why": propagation edges in words with the operands' names (${edgeText})`);
    const pres = await page.$$eval('#why > pre', (ps) => ps.map((x) => x.textContent));
    check(!pres.some((t) => /propagation_edges/.test(t)) && !!(await page.$('#why details.why-raw')), '"why": the raw #sdy.propagation_edges text only under "raw"');
    await (await page.$('#why')).screenshot({ path: join(outDir, 'why.png') });
    await page.fill('#op-filter', '');
    // an origin from a function input, by the input's name
    const mlirWhy = 'sdy.mesh @mesh = <["a"=2, "b"=2]>\n' +
      'func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {"b"}]>} loc("layer0.Wv"), %arg1: tensor<8x8xf32> loc("x")) -> tensor<8x8xf32> {\n' +
      '  %0 = stablehlo.add %arg0, %arg1 : tensor<8x8xf32>\n  return %0 : tensor<8x8xf32>\n}\n';
    const wp = await (await fetch(`${base}/v1/plans`, { method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ mlir: mlirWhy, name: 'why-origins' }) })).json();
    await page.goto(`${base}/#/plan/${wp.id}`);
    await ready(page);
    await page.fill('#op-filter', 'stablehlo.add');
    await page.waitForFunction(() => /^1 of /.test(document.querySelector('#op-count')?.textContent || ''), null, { timeout: WAIT });
    await page.click('.ops-table .vt-row');
    await page.waitForFunction(() => /add/.test(document.querySelector('#value-detail h2')?.textContent || ''), null, { timeout: WAIT });
    const orig = await page.textContent('#why-origins');
    check(/Axis a came from function input 0, layer0\.Wv \(input: 0\)\./.test(orig), `"why": an origin names the input (${orig})`);
    check((await fetch(`${base}/v1/plans/${wp.id}`, { method: 'DELETE' })).ok, 'that plan deleted again');
    await page.screenshot({ path: join(outDir, 'plan.png'), fullPage: true });
    check(errors.length === 0, `no console errors (${errors.join('; ')})`);
    // The API's error, as it gives it (Chromium logs the failed request itself).
    await page.goto(`${base}/#/submit`);
    await ready(page);
    await page.fill('#module-text', '{"ops": [{"op": "stablehlo.add", "operands": ["nope"]}]}');
    await page.click('#submit-btn');
    await page.waitForSelector('#submit-result .error', { timeout: WAIT });
    const t = await page.textContent('#submit-result .error');
    check(/HTTP 400 invalid/.test(t) && /"error"/.test(t), `API error shown as returned (${t.slice(0, 90)}...)`);
    await page.screenshot({ path: join(outDir, 'submit-error.png'), fullPage: true });
    const other = errors.filter((e) => !/Failed to load resource: the server responded with a status of 400/.test(e));
    check(other.length === 0, `no console errors besides the expected 400 (${other.join('; ')})`);
    await page.close();
  });

  let benchRunId = 0; // the MLP's benchmark run (for the run page below)
  await step('benchmark the Flax MLP from its plan view', async () => {
    const errors = [];
    const page = await newPage(ctx, errors);
    await page.goto(`${base}/#/plan/${mlpId}`);
    await ready(page);
    await page.waitForSelector('#bench-history', { timeout: WAIT });
    await page.waitForFunction(() => /None yet/.test(document.querySelector('#bench-history').textContent), null, { timeout: WAIT });
    check((await page.inputValue('#bench-devices')) === '8', 'devices default to the mesh size (8)');
    // The API's own error for a bad iteration count.
    await page.fill('#bench-iters', '0');
    await page.click('#bench-start');
    await page.waitForSelector('#bench-message .error', { timeout: WAIT });
    const bad = await page.textContent('#bench-message .error');
    check(/HTTP 400 invalid/.test(bad) && /\/iters/.test(bad) && /"error"/.test(bad), `API error shown as returned (${bad.slice(0, 80)}...)`);
    await page.fill('#bench-iters', '5');
    await page.fill('#bench-warmup', '1');
    await page.click('#bench-start');
    await page.waitForSelector('#bench-accepted', { timeout: WAIT });
    check(/HTTP 202/.test(await page.textContent('#bench-accepted')), 'POST /v1/benchmarks answered 202');
    await page.waitForSelector('#bench-state', { timeout: WAIT });
    await page.waitForFunction(() => {
      const s = document.querySelector('#bench-state');
      return s && (s.dataset.status === 'succeeded' || s.dataset.status === 'failed');
    }, null, { timeout: 60000 });
    const st = await page.getAttribute('#bench-state', 'data-status');
    check(st === 'succeeded', `benchmark succeeded (${st}${st === 'failed' ? `: ${await page.textContent('#bench-result')}` : ''})`);
    await page.waitForSelector('#bench-chart canvas', { timeout: WAIT });
    check(true, 'per-iteration chart rendered');
    const nm = await page.textContent('#bench-numerics');
    check(/^match/.test(nm), `numerics: ${nm}`);
    check(/s$/.test(await page.textContent('#bench-measured')) && /s$/.test(await page.textContent('#bench-predicted')), 'measured median and predicted step shown');
    // the built-in profile is not calibrated beside the run: the panel says so and how to recalibrate
    const note = await page.textContent('#bench-profile').catch(() => '');
    check(/Stale profile/.test(note) && /cpu-local/.test(note) && /shardplan calibrate/.test(note), `stale-profile note shown (${note.slice(0, 60)})`);
    // the list is fetched again when the run ends: wait for that answer
    const listed = await page.waitForFunction(() => {
      const rows = document.querySelectorAll('#bench-history tbody tr');
      return rows.length === 1 && /succeeded/.test(rows[0].textContent);
    }, null, { timeout: WAIT }).then(() => true, () => false);
    check(listed, 'run listed among the plan\'s benchmarks');
    const runId = Number(await page.getAttribute('#bench-history tbody tr', 'data-id'));
    const run = await (await fetch(`${base}/v1/benchmarks/${runId}`)).json();
    benchRunId = runId;
    check(!!(await page.$('#bench-timeline svg.timeline-svg')), 'the plan view\'s run shows its timeline');
    await checkBreakdown(page, run.results);
    await page.$eval('#plan-bench', (e) => e.scrollIntoView());
    await page.screenshot({ path: join(outDir, 'benchmark.png'), fullPage: true });
    await page.$eval('#bench-ops-section', (e) => e.scrollIntoView());
    await page.screenshot({ path: join(outDir, 'benchmark-breakdown.png'), fullPage: false });
    // A run stored before results had ops and collectives: a copy of this
    // run's row without them, written into the server's database, read back
    // through the API and the page, then deleted through the API.
    const old = oldStyleRun(runId);
    check(old.id > runId, `old-style run ${old.id} stored (${old.error || 'sqlite3'})`);
    if (old.id > runId) {
      const back = await (await fetch(`${base}/v1/benchmarks/${old.id}`)).json();
      check(back.status === 'succeeded' && back.results && back.results.step_s > 0 && !('ops' in back.results) && !('collectives' in back.results),
        'the API serves it without ops and collectives');
      await page.reload(); // the same address: goto would not open the page again
      await ready(page);
      await page.waitForFunction((id) => {
        const s = document.querySelector('#bench-state');
        return s && s.dataset.status === 'succeeded' && document.querySelector('#bench-status').textContent.includes(`Benchmark ${id}:`);
      }, old.id, { timeout: WAIT });
      await page.waitForSelector('#bench-chart canvas', { timeout: WAIT });
      const none = await page.$$eval('#bench-ops-none, #bench-colls-none', (t) => t.map((x) => x.textContent));
      check(none.length === 2 && none.every((t) => /not recorded for this run/.test(t)) && !(await page.$('#bench-ops')) && !(await page.$('#bench-colls')),
        `old-style run: chart and summary, both tables "not recorded" (${none.join(' | ')})`);
      // and the new run still shows its tables when picked from the list
      await page.click(`#bench-history tr[data-id="${runId}"] a`);
      await page.waitForSelector('#bench-colls', { timeout: WAIT });
      check(!(await page.$('#bench-ops-none')), 'picking the new run again shows its tables');
      const del = await fetch(`${base}/v1/benchmarks/${old.id}`, { method: 'DELETE' });
      check(del.ok, `old-style run deleted through the API (${del.status})`);
    }
    const other = errors.filter((e) => !/Failed to load resource: the server responded with a status of 400/.test(e));
    check(other.length === 0, `no console errors besides the expected 400 (${other.join('; ')})`);
    await page.close();
  });

  await step('a run\'s page: per-device timeline, trace route, progress per iteration', async () => {
    check(benchRunId > 0, `the benchmark step left a run (${benchRunId})`);
    if (!benchRunId) return;
    // GET /v1/benchmarks/{id}/trace: the Chrome trace event format
    const tr = await fetch(`${base}/v1/benchmarks/${benchRunId}/trace`);
    const trace = JSON.parse(await tr.text());
    const evs = Array.isArray(trace.traceEvents) ? trace.traceEvents : [];
    const bad = evs.filter((e) => typeof e.name !== 'string' || !['X', 'M'].includes(e.ph) || typeof e.ts !== 'number' ||
      !Number.isInteger(e.pid) || !Number.isInteger(e.tid) || (e.ph === 'X' && !(typeof e.dur === 'number' && e.dur >= 0)));
    const xs = evs.filter((e) => e.ph === 'X');
    check(tr.status === 200 && xs.length > 0 && bad.length === 0, `trace: ${xs.length} X events, each with name, ph, ts, pid, tid, dur (${bad.length} bad)`);
    check(new Set(xs.map((e) => e.tid)).size === 8, 'trace: one tid per device (8)');
    check(xs.some((e) => e.cat === 'collective' && e.args && e.args.collective === 'all_reduce'), 'trace: collectives with cat "collective" and their kind');
    check(!xs.some((e) => /(^| )v\d+$/.test(e.name)) && xs.some((e) => / l0\.h$/.test(e.name)), `trace: ops named by value name (${xs[0]?.name})`);
    const none = await fetch(`${base}/v1/benchmarks/999999/trace`);
    check(none.status === 404, 'trace of an unknown run: 404');

    const errors = [];
    const page = await newPage(ctx, errors);
    await page.goto(`${base}/#/run/${benchRunId}`);
    await ready(page);
    await page.waitForSelector('#timeline-frame svg', { timeout: WAIT });
    const tl = await page.$$eval('#timeline-frame svg g[data-device]', (gs) => gs.map((g) => ({
      n: g.querySelectorAll('rect.tl-ev').length,
      colls: [...g.querySelectorAll('rect.tl-coll')].map((r) => [r.dataset.kind, r.getAttribute('fill')]),
      waits: g.querySelectorAll('rect.tl-wait').length, last: g.querySelectorAll('rect.tl-last').length })));
    check(tl.length === 8 && tl.every((l) => l.n > 0), `a lane per device with its ops (${tl.map((l) => l.n).join(', ')})`);
    check(tl.every((l) => l.colls.length > 0 && l.colls.every(([k, f]) => k === 'all_reduce' && f === '#e07b39')), 'collectives coloured by kind (all_reduce orange) on every lane');
    const lasts = tl.reduce((a, l) => a + l.last, 0);
    check(lasts > 0 && lasts === tl[0].colls.length, `one straggler marked per collective (${lasts})`);
    const strag = await page.getAttribute('#timeline-straggler', 'data-device');
    const lbl = strag !== null ? await page.textContent(`#timeline-frame text.tl-straggler-label[data-device="${strag}"]`) : '';
    check(strag !== null && /last \u00d7\d+/.test(lbl), `the straggler's lane named (${await page.textContent('#timeline-summary')})`);
    check(/^run \d+$/.test(await page.textContent('#bench-run-link')) && !!(await page.$('#bench-ops')), 'the run page shows the figures and tables too');
    await page.click('button[data-zoom="4"]');
    const w = await page.$eval('#timeline-frame svg', (e) => Number(e.getAttribute('width')));
    check(w === 4000, `zoom x4 widens the drawing (${w})`);
    await page.click('button[data-zoom="1"]');
    const dl = page.waitForEvent('download', { timeout: WAIT });
    await page.click('#bench-trace-download');
    const file = await dl;
    check(/^shardplan-run-\d+\.trace\.json$/.test(file.suggestedFilename()), `trace downloads as ${file.suggestedFilename()}`);
    await (await page.$('#bench-timeline')).screenshot({ path: join(outDir, 'timeline.png') });
    await page.screenshot({ path: join(outDir, 'run.png'), fullPage: true });
    await page.click('#timeline-frame rect.tl-coll');
    await page.waitForSelector('#mesh-drawing .mesh-dev', { timeout: WAIT });
    check(/^#\/mesh\/\d+\?/.test(await page.evaluate(() => location.hash)) && /groups of/.test(await page.textContent('#mesh-summary')),
      `a collective on the timeline opens the mesh view of its groups (${await page.evaluate(() => location.hash)})`);

    // progress after every iteration, not 10% to the end
    const post = await fetch(`${base}/v1/benchmarks`, { method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ plan_id: Number(mlpId), iters: 300, warmup: 0 }) });
    const queued = await post.json();
    const seen = new Set();
    const t0 = Date.now();
    for (;;) {
      const r = await (await fetch(`${base}/v1/benchmarks/${queued.id}`)).json();
      seen.add(r.progress);
      if (r.status !== 'queued' && r.status !== 'running') break;
      if (Date.now() - t0 > 60000) break;
      await new Promise((res) => setTimeout(res, 15));
    }
    const mid = [...seen].filter((p) => p > 0.1 && p < 1);
    check(mid.length > 0, `progress moves during the run (${[...seen].sort().join(', ')})`);
    check(errors.length === 0, `no console errors (${errors.join('; ')})`);
    await page.close();
  });

  await step('plans list: filter, sort, costs', async () => {
    const errors = [];
    const page = await newPage(ctx, errors);
    await page.goto(`${base}/#/plans`);
    await ready(page);
    await page.waitForSelector('.plans-table .vt-row', { timeout: WAIT });
    check(/3 of 3/.test(await page.textContent('#plan-count')), 'three plans listed');
    // rows name each plan as it was named and say its mesh as read, not "plan 13" / "(graph's own)"
    const named = await page.$$eval('.plans-table .vt-row', (rows) => rows.map((r) => [r.children[2].textContent, r.children[3].textContent]));
    check(named.some(([m]) => m === 'transformer-dp') && named.some(([m]) => m === 'transformer-tp') &&
      named.every(([, mesh]) => /^\w+=\d+( x \w+=\d+)*$/.test(mesh)),
      `names and meshes in the list (${named.map((x) => x.join(' on ')).join('; ')})`);
    await page.waitForFunction(() => /costs loaded: 3 of 3/.test(document.querySelector('#cost-status').textContent), null, { timeout: WAIT });
    await page.fill('#f-model', 'transformer');
    await page.waitForFunction(() => /^2 of 3/.test(document.querySelector('#plan-count').textContent), null, { timeout: WAIT });
    check(true, 'filter by model');
    await page.fill('#f-model', '');
    await page.selectOption('#f-strategy', 'tp');
    await page.waitForFunction(() => /^1 of 3/.test(document.querySelector('#plan-count').textContent), null, { timeout: WAIT });
    check(true, 'filter by strategy (from logical_axis_rules)');
    await page.selectOption('#f-strategy', 'dp+tp');
    // the count reads "1 of 3" for tp too: wait for the row itself to change
    const mlpShown = await page.waitForFunction(() => /^1 of 3/.test(document.querySelector('#plan-count').textContent) &&
      /flax-mlp/.test((document.querySelector('.plans-table .vt-row') || {}).textContent || ''), null, { timeout: WAIT })
      .then(() => true, () => false);
    check(mlpShown, 'the Flax MLP (batch->data, hidden->model) is dp+tp');
    await page.selectOption('#f-strategy', '');
    await page.click('.vt-th[data-key="memory"]');
    await page.waitForTimeout(200);
    const mem = await page.$$eval('.plans-table .vt-row', (rows) => rows.map((r) => r.children[6].textContent));
    check(mem.length === 3 && mem.every((m) => /B$/.test(m)), `memory column sorted (${mem.join(', ')})`);
    const measured = await page.$$eval('.plans-table .vt-row', (rows) => rows.map((r) => [r.children[2].textContent, r.children[9].textContent]));
    check(measured.every(([m, t]) => (/flax-mlp/.test(m) ? /s$/.test(t) : t === '\u2014')),
      `measured time: the benchmarked MLP's median, \u2014 without runs (${measured.map((x) => x.join(' ')).join(', ')})`);
    await page.screenshot({ path: join(outDir, 'plans.png'), fullPage: true });
    check(errors.length === 0, `no console errors (${errors.join('; ')})`);
    await page.close();
  });

  await step('compare dp vs tp', async () => {
    const errors = [];
    const page = await newPage(ctx, errors);
    await page.goto(`${base}/#/compare/${dp.id},${tp.id}`);
    await ready(page);
    await page.waitForSelector('#first-divergence', { timeout: WAIT });
    check(/layer0\.Wq/.test(await page.textContent('#first-divergence')), 'first divergence at layer0.Wq');
    const heads = await page.$$eval('#compare-summary thead th[data-plan]', (t) => t.map((x) => [x.querySelector('a').textContent, x.querySelector('.plan-meta').textContent]));
    check(heads.length === 2 && heads[0][0] === 'transformer-dp' && heads[1][0] === 'transformer-tp' &&
      /^dp \u00b7 \w+=\d+ x \w+=\d+$/.test(heads[0][1]) && /^tp \u00b7 /.test(heads[1][1]),
      `compare headers: name, strategy and mesh (${heads.map((x) => x.join(', ')).join(' | ')})`);
    const diffCols = await page.$$eval('.diff-table .vt-th', (t) => t.map((x) => x.textContent));
    check(diffCols.some((x) => /^transformer-dp \(dp, /.test(x)), `difference columns named (${diffCols.join(' | ')})`);
    check((await page.$$('#compare-charts canvas')).length === 4, 'four bar charts');
    await page.waitForSelector('#compare-bench-table', { timeout: WAIT });
    check(/No succeeded benchmark/.test(await page.textContent('#compare-bench')), 'benchmarks: \u2014 for plans without one');
    check((await page.$$('.diff-table .differs')).length > 0, 'differences highlighted');
    // the first differing tensor's device grids side by side
    await page.waitForSelector('#compare-grids .grid-col .device-grid', { timeout: WAIT });
    const cols = await page.$$eval('#compare-grids .grid-col', (cs) => cs.map((c) => ({ plan: c.dataset.plan, cells: c.querySelectorAll('.device-grid .cell').length })));
    check(cols.length === 2 && cols.every((c) => c.cells >= 1) && cols[0].cells !== cols[1].cells,
      `device grids side by side for the selected tensor (${cols.map((c) => `${c.plan}: ${c.cells} cells`).join(', ')})`);
    await page.click('.diff-table .vt-row:nth-child(2)');
    const t2 = await page.textContent('#compare-grids h3');
    check(/^Device grids of /.test(t2), `another tensor's grids on selection (${t2})`);
    // memory change per tensor and the collectives added or removed
    const mem = await page.$$eval('#compare-memory-table tbody tr', (rs) => rs.map((r) => r.textContent));
    check(mem.length > 0 && mem.every((t) => /\((\+|\u2212)/.test(t)), `memory change per tensor (${mem.length} rows: ${mem[0]})`);
    const ch = await page.$$eval('#compare-collectives tbody tr', (rs) => rs.map((r) => r.textContent));
    check(ch.length > 0 && ch.some((t) => /adds|removes/.test(t)), `collectives one plan adds or removes (${ch.slice(0, 3).join(' | ')})`);
    await page.screenshot({ path: join(outDir, 'compare.png'), fullPage: true });
    if (process.env.UPDATE_DOCS_IMG === '1') {
      mkdirSync(join(repo, 'docs', 'img'), { recursive: true });
      copyFileSync(join(outDir, 'compare.png'), join(repo, 'docs', 'img', 'compare.png'));
    }
    check(errors.length === 0, `no console errors (${errors.join('; ')})`);
    await page.close();
  });

  await step('compare: benchmarked MLP vs dp (none)', async () => {
    const errors = [];
    const page = await newPage(ctx, errors);
    await page.goto(`${base}/#/compare/${mlpId},${dp.id}`);
    await ready(page);
    await page.waitForSelector('#compare-bench-charts canvas', { timeout: WAIT });
    check((await page.$$('#compare-bench-charts canvas')).length === 2, 'distribution and measured-vs-predicted charts');
    const cells = await page.$$eval('#compare-bench-table tbody tr:nth-child(2) td', (t) => t.map((x) => x.textContent));
    check(/s$/.test(cells[0]) && cells[1] === '\u2014', `measured: MLP timed, dp \u2014 (${cells.join(' | ')})`);
    await page.$eval('#compare-bench', (e) => e.scrollIntoView());
    await page.screenshot({ path: join(outDir, 'compare-benchmark.png'), fullPage: true });
    check(errors.length === 0, `no console errors (${errors.join('; ')})`);
    await page.close();
  });

  await step('memory viewer: the Flax MLP as nn.scan (a while loop)', async () => {
    // The kernels stacked on a layer axis, a counted while whose body slices layer i (planner/gen's scan form).
    const L = 4, d = 1024, f = 4096, b = 8;
    const t1 = `tensor<${L}x${d}x${f}xf32>`, t2 = `tensor<${L}x${f}x${d}xf32>`, tx = `tensor<${b}x${d}xf32>`;
    const mlir = `module @mlp_scan {
  sdy.mesh @mesh = <["data"=2, "model"=4]>
  func.func public @main(%w1: ${t1} {sdy.sharding = #sdy.sharding<@mesh, [{}, {}, {"model"}]>} loc("params['ScanDotReluDot_0']['Dense_0']['kernel']"), %w2: ${t2} {sdy.sharding = #sdy.sharding<@mesh, [{}, {"model"}, {}]>} loc("params['ScanDotReluDot_0']['W2']"), %x: ${tx} {sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {}]>} loc("x")) -> ${tx} {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %r:4 = stablehlo.while(%s1 = %w1, %s2 = %w2, %i = %c, %h = %x) : ${t1}, ${t2}, tensor<i32>, ${tx}
     cond {
      %n = stablehlo.constant dense<${L}> : tensor<i32>
      %lt = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %lt : tensor<i1>
    } do {
      %z = stablehlo.constant dense<0> : tensor<i32>
      %a = stablehlo.dynamic_slice %s1, %i, %z, %z, sizes = [1, ${d}, ${f}] : (${t1}, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x${d}x${f}xf32>
      %k1 = stablehlo.reshape %a : (tensor<1x${d}x${f}xf32>) -> tensor<${d}x${f}xf32>
      %e = stablehlo.dynamic_slice %s2, %i, %z, %z, sizes = [1, ${f}, ${d}] : (${t2}, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x${f}x${d}xf32>
      %k2 = stablehlo.reshape %e : (tensor<1x${f}x${d}xf32>) -> tensor<${f}x${d}xf32>
      %y = stablehlo.dot_general %h, %k1, contracting_dims = [1] x [0] : (${tx}, tensor<${d}x${f}xf32>) -> tensor<${b}x${f}xf32> loc("Dense_0")
      %zf = stablehlo.constant dense<0.000000e+00> : tensor<f32>
      %zb = stablehlo.broadcast_in_dim %zf, dims = [] : (tensor<f32>) -> tensor<${b}x${f}xf32>
      %m = stablehlo.maximum %y, %zb : tensor<${b}x${f}xf32> loc("relu")
      %mc = sdy.sharding_constraint %m <@mesh, [{"data"}, {"model"}]> : tensor<${b}x${f}xf32>
      %o = stablehlo.dot_general %mc, %k2, contracting_dims = [1] x [0] : (tensor<${b}x${f}xf32>, tensor<${f}x${d}xf32>) -> ${tx} loc("W2")
      %oc = sdy.sharding_constraint %o <@mesh, [{"data"}, {}]> : ${tx}
      %one = stablehlo.constant dense<1> : tensor<i32>
      %inc = stablehlo.add %i, %one : tensor<i32>
      stablehlo.return %s1, %s2, %inc, %oc : ${t1}, ${t2}, tensor<i32>, ${tx}
    }
    return %r#3 : ${tx}
  }
}
`;
    const p = await post(base, '/v1/plans?name=mlp-scan', JSON.stringify({ mlir }));
    const mem = await (await fetch(`${base}/v1/plans/${p.id}/memory`)).json();
    check(mem.parameter_bytes === 32 * 1024 * 1024, `scan: the stacked kernels are parameters (${mem.parameter_bytes})`);
    check(mem.peak && mem.peak.op === 'stablehlo.while' && mem.peak.inner && /\./.test(mem.peak.inner.op), `scan: the peak is in the loop body (${mem.peak && mem.peak.inner ? mem.peak.inner.op : '?'})`);
    const errors = [];
    const page = await newPage(ctx, errors);
    await page.goto(`${base}/#/plan/${p.id}`);
    await ready(page);
    await page.waitForSelector('#peak-buffers li a', { timeout: WAIT });
    const t = await page.textContent('#memory-peak');
    check(/stablehlo\.while.*inside it at /.test(t), `memory viewer names the loop and the op inside it (${t.slice(0, 110)})`);
    check(/kernel/.test(await page.textContent('#peak-buffers')), 'the stacked kernels are among the largest buffers, by name');
    await (await page.$('#plan-memory')).screenshot({ path: join(outDir, 'memory-scan.png') });
    check(errors.length === 0, `no console errors (${errors.join('; ')})`);
    await page.close();
  });

  await step('tensor device grid', async () => {
    const errors = [];
    const page = await newPage(ctx, errors);
    await page.goto(`${base}/#/plan/${tp.id}`);
    await ready(page);
    await page.fill('#op-filter', 'layer0.Wq');
    await page.waitForFunction(() => /^1 of/.test(document.querySelector('#op-count').textContent), null, { timeout: WAIT });
    await page.click('.ops-table .vt-row');
    await page.waitForSelector('#device-grid .device-grid', { timeout: WAIT });
    const g = await page.$eval('#device-grid .device-grid', (e) => ({ r: e.dataset.rows, c: e.dataset.cols, cells: [...e.children].map((c) => c.querySelector('.devs').textContent) }));
    // tp: Wq [embed, heads] is [{}, {"model"}] on data=2, model=4.
    check(g.r === '1' && g.c === '4', `Wq grid is 1x4 (${g.r}x${g.c})`);
    check(g.cells[0] === 'D0 D4' && g.cells[3] === 'D3 D7', `blocks held by the right devices (${g.cells.join(' | ')})`);
    await page.screenshot({ path: join(outDir, 'device-grid.png'), fullPage: true });
    // dp: the rank-3 input x [batch, seq, embed] on data.
    await page.goto(`${base}/#/plan/${dp.id}`);
    await ready(page);
    await page.fill('#op-filter', 'x');
    await page.check('#sharded-only');
    await page.waitForTimeout(300);
    const rows = await page.$$('.ops-table .vt-row');
    let found = false;
    for (const r of rows) {
      const txt = await r.textContent();
      if (/input/.test(txt) && /"data"/.test(txt)) { await r.click(); found = true; break; }
    }
    check(found, 'dp input x listed as sharded');
    await page.waitForSelector('#device-grid .device-grid', { timeout: WAIT });
    const g2 = await page.$eval('#device-grid .device-grid', (e) => ({ r: e.dataset.rows, c: e.dataset.cols }));
    check(g2.r === '2' && g2.c === '1', `rank-3 x: 2x1 blocks over dims 0,1 (${g2.r}x${g2.c})`);
    check(errors.length === 0, `no console errors (${errors.join('; ')})`);
    await page.close();
  });

  await advisorSteps(ctx, base, mlpId, tp);

  await step('token: kept in sessionStorage, sent as Bearer', async () => {
    const errors = [];
    const page = await newPage(ctx, errors);
    await page.goto(`${base}/#/plans`);
    await ready(page);
    await page.fill('#token', 'sp_test_token');
    const req = page.waitForRequest((r) => r.url().includes('/v1/plans'), { timeout: WAIT });
    await page.click('#token-form button[type="submit"]');
    const r = await req;
    check(r.headers().authorization === 'Bearer sp_test_token', 'Authorization: Bearer sent');
    check((await page.evaluate(() => sessionStorage.getItem('shardplan.token'))) === 'sp_test_token', 'token in sessionStorage');
    await page.click('#token-clear');
    await ready(page);
    check(errors.length === 0, `no console errors (${errors.join('; ')})`);
    await page.close();
  });

  if (perf) await perfRuns(ctx, base);
  check(foreign.length === 0, `no requests beyond the server (${foreign.join(', ')})`);
}

// The plan advisor (docs/advisor.md) in the dashboard: lint and collectives
// panels, the sweep page, suggestions with "apply and compare", what-if.
async function advisorSteps(ctx, base, mlpId, tp) {
  // Routes this server has: a missing one answers 404 "no resource at".
  const has = async (method, path) => {
    const r = await fetch(`${base}${path}`, { method, headers: { 'Content-Type': 'application/json' }, body: method === 'POST' ? '{"edits":[]}' : undefined });
    const j = await r.json().catch(() => null);
    return !(r.status === 404 && j && j.error && /no resource at/.test(j.error.message));
  };
  const hasSuggest = await has('GET', `/v1/plans/${mlpId}/suggest?k=1`);
  const hasWhatif = await has('POST', `/v1/plans/${mlpId}/whatif`);
  let lintId = null;

  await step('lint and collectives panels: examples/lint_demo.mlir', async () => {
    const errors = [];
    const page = await newPage(ctx, errors);
    await page.goto(`${base}/#/submit`);
    await ready(page);
    await page.setInputFiles('#module-file', join(repo, 'examples', 'lint_demo.mlir'));
    await page.waitForFunction(() => /my_kernel/.test(document.querySelector('#module-text').value), null, { timeout: WAIT });
    await page.fill('#graph-name', 'lint-demo');
    await page.click('#submit-btn');
    await page.waitForSelector('#submitted-plan-link', { timeout: WAIT });
    lintId = Number(await page.textContent('#submitted-plan-link'));
    await page.click('#submitted-plan-link');
    await ready(page);
    await page.waitForSelector('#plan-lint[data-loaded="1"] #lint-table', { timeout: WAIT });
    const rows = await page.$$eval('#lint-table tbody tr', (t) => t.map((r) => ({ kind: r.dataset.kind, text: r.textContent,
      shardy: r.querySelector('.fix-shardy')?.textContent, jax: r.querySelector('.fix-jax')?.textContent })));
    const kinds = rows.map((r) => r.kind).sort().join(',');
    const lint = await (await fetch(`${base}/v1/plans/${lintId}/lint`)).json();
    const apiKinds = lint.findings.map((f) => f.kind).sort().join(',');
    check(kinds === apiKinds, `every finding of the API listed (${kinds})`);
    check(['custom_call_no_rule', 'non_divisible', 'rematerialisation'].every((k) => rows.filter((r) => r.kind === k).length === 1),
      'the three known findings of lint_demo.mlir');
    const nd = rows.find((r) => r.kind === 'non_divisible') || {};
    check(nd.shardy === 'sdy.sharding_constraint %arg0 <@mesh, [{}, {}]>' && nd.jax === 'in_shardings for input 0: NamedSharding(mesh, P(None, None))',
      `non_divisible fix in Shardy and JAX form (${nd.shardy} | ${nd.jax})`);
    const cc = rows.find((r) => r.kind === 'custom_call_no_rule') || {};
    check(/line 10/.test(cc.text) && /loc\("kernel"\)/.test(cc.text) && /24\.0 KiB/.test(cc.text) && /P\('data', 'model'\)/.test(cc.jax || ''),
      'custom call finding: line, loc, bytes at stake, fix');
    const counts = await page.textContent('#lint-counts');
    check(/non_divisible 1/.test(counts) && /rematerialisation 1/.test(counts) && /mesh_mismatch 0/.test(counts), `counts per kind (${counts})`);
    await page.click('#lint-counts button[data-kind="rematerialisation"]');
    check((await page.$$eval('#lint-table tbody tr', (t) => t.map((r) => r.dataset.kind))).join() === 'rematerialisation', 'filter by kind');
    await page.click('#lint-table .copy');
    await page.waitForFunction(() => document.querySelector('#lint-table .copy').dataset.copied !== undefined, null, { timeout: WAIT });
    check(true, 'copy button answers');
    await page.waitForSelector('#plan-collectives[data-loaded="1"] #collectives-table', { timeout: WAIT });
    const api = await (await fetch(`${base}/v1/plans/${lintId}/collectives`)).json();
    const crow = await page.$$eval('#collectives-table tbody tr', (t) => t.map((r) => [r.children[7].textContent, r.children[8].textContent]));
    check(crow.length === api.n_collectives && crow.length > 0 && crow.every(([f, cause]) => /^stablehlo\./.test(f) && cause.length > 20),
      `collectives: ${crow.length} rows with the op they serve and a cause (API: ${api.n_collectives})`);
    await page.click('#lint-counts button:first-child');
    await page.$eval('#plan-lint', (e) => e.scrollIntoView());
    await page.screenshot({ path: join(outDir, 'lint.png'), fullPage: false });
    // The page's profile selector drives the panels too.
    await page.selectOption('#profile', 'tpu-v5e');
    await page.waitForFunction(() => /tpu-v5e/.test(document.querySelector('#plan-lint').textContent) &&
      /tpu-v5e/.test(document.querySelector('#collectives-total')?.textContent || ''), null, { timeout: WAIT });
    check(true, 'profile selector reloads lint and collectives');
    check(errors.length === 0, `no console errors (${errors.join('; ')})`);
    await page.close();
  });

  await step('mesh view: groups of each axis, linked from every collective', async () => {
    const errors = [];
    const page = await newPage(ctx, errors);
    await page.goto(`${base}/#/plan/${tp.id}`);
    await ready(page);
    await page.waitForSelector('#plan-collectives[data-loaded="1"] #collectives-table a.mesh-link', { timeout: WAIT });
    const href = await page.getAttribute('#collectives-table a.mesh-link', 'href');
    check(new RegExp(`^#/mesh/${tp.id}\\?axes=model$`).test(href), `a collective links to the mesh view with its axes (${href})`);
    await page.click('#collectives-table a.mesh-link');
    await page.waitForSelector('#mesh-drawing .mesh-dev', { timeout: WAIT });
    const devs = await page.$$eval('#mesh-drawing .mesh-dev', (ds) => ds.map((d) => ({ id: Number(d.dataset.device), g: Number(d.dataset.group), t: d.title })));
    const groupsOf = (ds) => { const m = new Map(); for (const d of ds) { if (!m.has(d.g)) m.set(d.g, []); m.get(d.g).push(d.id); } return [...m.values()]; };
    const gs = groupsOf(devs);
    check(devs.length === 8 && gs.length === 2 && gs.every((g) => g.length === 4), `model groups: 2 groups of 4 (${gs.map((g) => g.join(' ')).join(' | ')})`);
    check(gs.every((g) => new Set(devs.filter((d) => g.includes(d.id)).map((d) => /data=(\d+)/.exec(d.t)[1])).size === 1), 'each model group shares its data coordinate');
    check(/2 groups of 4 devices/.test(await page.textContent('#mesh-summary')), 'the summary counts the groups');
    await page.click('#mesh-axes button[data-axis="model"]');
    await page.click('#mesh-axes button[data-axis="data"]');
    const gd = groupsOf(await page.$$eval('#mesh-drawing .mesh-dev', (ds) => ds.map((d) => ({ id: Number(d.dataset.device), g: Number(d.dataset.group) }))));
    check(gd.length === 4 && gd.every((g) => g.length === 2), `data groups on a click: 4 groups of 2 (${gd.map((g) => g.join(' ')).join(' | ')})`);
    await (await page.$('main')).screenshot({ path: join(outDir, 'mesh.png') });
    // 3-D, with a sub-axis
    const mlir3 = 'sdy.mesh @cube = <["x"=2, "y"=2, "z"=4]>\n' +
      'func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@cube, [{"x"}, {"z"}]>}) -> tensor<8x8xf32> {\n' +
      '  %0 = stablehlo.add %arg0, %arg0 : tensor<8x8xf32>\n  return %0 : tensor<8x8xf32>\n}\n';
    const p3 = await (await fetch(`${base}/v1/plans`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ mlir: mlir3, name: 'mesh-3d' }) })).json();
    await page.goto(`${base}/#/mesh/${p3.id}?axes=${encodeURIComponent('z:(2)2')}`);
    await ready(page);
    await page.waitForSelector('#mesh-drawing .mesh-dev', { timeout: WAIT });
    const tiles = await page.$$eval('#mesh-drawing .mesh-tile-label', (t) => t.map((x) => x.textContent));
    const g3 = groupsOf(await page.$$eval('#mesh-drawing .mesh-dev', (ds) => ds.map((d) => ({ id: Number(d.dataset.device), g: Number(d.dataset.group) }))));
    check(tiles.join('|') === 'x=0|x=1' && g3.length === 8 && g3.every((g) => g.length === 2 && g[1] - g[0] === 2),
      `3-D mesh: a tile per x; sub-axis z:(2)2 pairs devices 2 apart (${g3.map((g) => g.join(' ')).join(' | ')})`);
    await (await page.$('main')).screenshot({ path: join(outDir, 'mesh-3d.png') });
    check((await fetch(`${base}/v1/plans/${p3.id}`, { method: 'DELETE' })).ok, 'that plan deleted again');
    check(errors.length === 0, `no console errors (${errors.join('; ')})`);
    await page.close();
  });

  await step('sweep page: chart, Pareto line, capacity, ranked table', async () => {
    const errors = [];
    const page = await newPage(ctx, errors);
    await page.goto(`${base}/#/sweep`);
    await ready(page);
    check(await page.$eval('nav a[data-nav="sweep"]', (a) => a.classList.contains('active')), 'nav link to the sweep page');
    await page.fill('#sw-devices', '8');
    await page.fill('#sw-layers', '1');
    await page.click('#sweep-run');
    await page.waitForSelector('#sweep-chart canvas', { timeout: WAIT });
    await ready(page);
    const api = await (await fetch(`${base}/v1/sweep?${page.url().split('?')[1]}`)).json();
    const okRows = api.rows.filter((r) => r.ok);
    const c = await page.$eval('#sweep-chart', (e) => ({ ...e.dataset }));
    const nPareto = okRows.filter((r) => r.pareto).length;
    check(Number(c.points) === 16 && okRows.length === 16, `16 points (devices=8: 4 meshes x 4 strategies) (${c.points})`);
    check(Number(c.pareto) === nPareto && nPareto >= 1, `Pareto line through ${c.pareto} points (API: ${nPareto})`);
    check(Number(c.capacity) === okRows[0].capacity_bytes && Number(c.capacity) > 0, `capacity line at ${c.capacity} bytes`);
    const drawn = await page.$eval('#sweep-chart canvas', (cv) => {
      const d = cv.getContext('2d').getImageData(0, 0, cv.width, cv.height).data;
      let n = 0;
      for (let i = 3; i < d.length; i += 4) if (d[i] > 0) n++;
      return n;
    });
    check(drawn > 1000, `the chart is drawn (${drawn} pixels)`);
    const trs = await page.$$eval('#sweep-table tbody tr', (t) => t.map((r) => [...r.children].map((x) => x.textContent)));
    check(trs.length === 16 && trs[0][0] === '1' && trs[0][1] === `${api.rows[0].mesh.data}x${api.rows[0].mesh.model}` && trs[0][2] === api.rows[0].strategy,
      `ranked table, rank 1 = ${trs[0] && trs[0].slice(0, 3).join(' ')}`);
    await page.click('#sweep-table tbody tr:first-child');
    const cmd = await page.textContent('#sweep-command');
    check(cmd.includes(`--layers 1 `) && cmd.includes(`--mesh data=${api.rows[0].mesh.data},model=${api.rows[0].mesh.model} --strategy ${api.rows[0].strategy} --train`),
      `row details name the variant's command (${cmd.slice(0, 120)})`);
    await page.screenshot({ path: join(outDir, 'sweep.png'), fullPage: true });
    // "Plan this variant": the server generates the template and plans it.
    await page.click('#sweep-plan');
    await page.waitForFunction(() => /^#\/plan\/\d+/.test(location.hash), null, { timeout: 60000 });
    await ready(page);
    const planned = await (await fetch(`${base}/v1/plans/${page.url().match(/#\/plan\/(\d+)/)[1]}`)).json();
    const pm = planned.plan.meshes[0].axes.map((a) => `${a.name}=${a.size}`).join(',');
    check(pm === `data=${api.rows[0].mesh.data},model=${api.rows[0].mesh.model}`, `plan this variant: plan ${planned.id} on ${pm}`);
    await page.goto(`${base}/#/sweep`);
    await ready(page);
    // A stored profile with little memory: variants that do not fit are marked.
    const prof = JSON.parse(readFileSync(join(repo, 'profiles', 'cpu-local.json'), 'utf8'));
    prof.name = 'tiny';
    prof.memory.bytes = 64 * 1024 * 1024;
    prof.memory.shared = false;
    const put = await fetch(`${base}/v1/profiles/tiny`, { method: 'PUT', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(prof) });
    check(put.ok, `stored profile "tiny" (${put.status})`);
    await page.goto(`${base}/#/sweep?devices=8&layers=1&profile=tiny`);
    await ready(page);
    await page.waitForSelector('#sweep-chart canvas', { timeout: WAIT });
    const c2 = await page.$eval('#sweep-chart', (e) => ({ ...e.dataset }));
    const nofitRows = await page.$$eval('#sweep-table tr.nofit', (t) => t.length);
    check(Number(c2.capacity) === 64 * 1024 * 1024 && Number(c2.nofit) > 0 && Number(c2.nofit) === nofitRows,
      `profile tiny: capacity 64 MiB, ${c2.nofit} variants marked as not fitting`);
    await page.screenshot({ path: join(outDir, 'sweep-nofit.png'), fullPage: true });
    check(errors.length === 0, `no console errors (${errors.join('; ')})`);
    await page.close();
  });

  // Stores the Flax MLP, opens its plan page and follows its sweep link
  // (which: the link's selector) to the drawn chart; the stored plan.
  const sweepOfFlaxPlan = async (page, which) => {
    const mlp = readFileSync(join(repo, 'examples', 'flax_mlp.json'), 'utf8');
    const made = await (await fetch(`${base}/v1/plans`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: mlp })).json();
    await page.goto(`${base}/#/plan/${made.id}`);
    await ready(page);
    await page.click(which);
    await page.waitForSelector('#sweep-chart canvas', { timeout: WAIT });
    await ready(page);
    return made;
  };

  await step('sweep a stored plan\'s own model over the meshes of 8 devices', async () => {
    const errors = [];
    const page = await newPage(ctx, errors);
    const made = await sweepOfFlaxPlan(page, '#plan-sweep-link');
    const api = await (await fetch(`${base}/v1/plans/${made.id}/sweep`)).json();
    const trs = await page.$$eval('#sweep-table tbody tr', (t) => t.map((r) => [...r.children].map((x) => x.textContent)));
    const want = api.rows.map((r) => Object.entries(r.mesh).map(([k, v]) => `${k}=${v}`).join(','));
    check(api.rows.length === 4 && trs.length === 4 && trs.every((t, i) => t[1] === want[i]) && trs[0][0] === '1',
      `4 meshes of data x model, ranked as the API (${trs.map((t) => t[1]).join(' ')})`);
    const c = await page.$eval('#sweep-chart', (e) => ({ ...e.dataset }));
    check(Number(c.points) === api.rows.filter((r) => r.ok).length, `a point per planned mesh (${c.points})`);
    await page.click('#sweep-table tbody tr:first-child');
    const line = await page.textContent('#sweep-command');
    check(line.startsWith(`sdy.mesh @${api.mesh_name} = <["data"=${api.rows[0].mesh.data}`), `the variant's mesh line (${line})`);
    await page.fill('#sw-devices', '16');
    await page.click('#sweep-run');
    await page.waitForFunction(() => /devices=16/.test(location.hash) && document.querySelectorAll('#sweep-table tbody tr').length === 5, null, { timeout: WAIT });
    check(true, '16 devices: 5 meshes');
    await page.screenshot({ path: join(outDir, 'sweep-plan.png'), fullPage: true });
    check(errors.length === 0, `no console errors (${errors.join('; ')})`);
    await page.close();
  });

  await step('sweep a stored Flax graph\'s logical-axis-rule variants', async () => {
    const errors = [];
    const page = await newPage(ctx, errors);
    const made = await sweepOfFlaxPlan(page, '#plan-sweep-rules-link');
    const api = await (await fetch(`${base}/v1/plans/${made.id}/sweep?logical_rules=true`)).json();
    const trs = await page.$$eval('#sweep-table tbody tr', (t) => t.map((r) => ({ own: r.classList.contains('own'), cells: [...r.children].map((x) => x.textContent) })));
    const label = (r) => `${r.own ? '(own) ' : ''}${r.rules.map(([n, t]) => `${n}=${t === null ? '-' : t}`).join(' ')}`;
    check(api.rows.length === 27 && trs.length === 27 && trs.every((t, i) => t.cells[1] === label(api.rows[i])),
      `27 rule variants, ranked as the API (${trs.slice(0, 3).map((t) => t.cells[1]).join(' | ')})`);
    const own = trs.filter((t) => t.own);
    check(own.length === 1 && own[0].cells[1] === '(own) batch=data hidden=model', `the graph's own rules marked (${own.map((t) => t.cells[1])})`);
    const sum = await page.textContent('#sweep-summary');
    check(/27 logical-axis-rule variants \(every assignment of 3 names/.test(sum) && /own rules rank \d+/.test(sum), `summary (${sum.slice(0, 90)})`);
    await page.click('#sweep-table tbody tr:first-child');
    const line = await page.textContent('#sweep-command');
    check(line === `"logical_axis_rules": ${JSON.stringify(api.rows[0].rules)}`, `the variant's rules to paste (${line})`);
    check(await page.$eval('#sw-devices', (e) => e.disabled), 'devices off: the mesh is kept');
    await page.screenshot({ path: join(outDir, 'sweep-rules.png'), fullPage: true });
    // back to meshes from the form
    await page.selectOption('#sw-vary', 'meshes');
    await page.click('#sweep-run');
    await page.waitForFunction(() => !/logical_rules/.test(location.hash) && document.querySelectorAll('#sweep-table tbody tr').length === 4, null, { timeout: WAIT });
    check(true, 'vary meshes again: 4 meshes');
    check(errors.length === 0, `no console errors (${errors.join('; ')})`);
    await page.close();
  });

  await step('suggestions (Flax MLP, lint demo), apply and compare, what-if', async () => {
    const errors = [];
    const page = await newPage(ctx, errors);
    // The list for the Flax MLP as the API gives it (it may have none to offer),
    // then a plan that has some (the lint demo's) to apply and compare.
    for (const [id, name] of [[mlpId, 'Flax MLP'], [lintId, 'lint demo']]) {
      await page.goto(`${base}/#/plan/${id}`);
      await ready(page);
      await page.click('#plan-suggest summary');
      await page.waitForSelector('#plan-suggest[data-loaded="1"]', { timeout: 60000 });
      if (!hasSuggest) {
        check(/not available/.test(await page.textContent('#plan-suggest')), `suggest (${name}): the panel says the route is unavailable`);
        console.log('  SKIP suggestions list and apply-and-compare: this server has no GET /v1/plans/{id}/suggest');
        break;
      }
      await page.waitForSelector('#suggest-table tbody tr, #suggest-none', { timeout: WAIT });
      const want = (await (await fetch(`${base}/v1/plans/${id}/suggest?objective=time&k=5&profile=cpu-local`)).json()).suggestions.length;
      const n = await page.$$eval('#suggest-table tbody tr', (t) => t.length);
      check(n === want && (n > 0 || (await page.$('#suggest-none')) !== null), `${name}: ${n} suggestions listed (API: ${want})`);
      if (id === mlpId) continue;
      check(n >= 1, `${name}: at least one suggestion`);
      if (n === 0) break;
      const first = await page.$eval('#suggest-table tbody tr', (r) => [...r.children].map((x) => x.textContent));
      check(first[0] === '1' && /sdy\.sharding_constraint/.test(first[3]) && /with_sharding_constraint|in_shardings for/.test(first[3]) && /s$/.test(first[4]) && /B$/.test(first[5]) && /[\u2212+0]/.test(first[6]),
        `rank 1: ${first.slice(0, 3).join(' | ')}, fix, predicted step and peak, gain ${first[6]}`);
      await page.$eval('#plan-suggest', (e) => e.scrollIntoView());
      await page.screenshot({ path: join(outDir, 'suggest.png'), fullPage: false });
      if (!hasWhatif) {
        console.log('  SKIP apply-and-compare: this server has no POST /v1/plans/{id}/whatif');
        break;
      }
      await page.click('#suggest-table .apply-compare');
      await page.waitForFunction((pid) => new RegExp(`^#/compare/${pid},\\d+`).test(location.hash), id, { timeout: 60000 });
      await ready(page);
      await page.waitForSelector('#compare-summary', { timeout: WAIT });
      const heads = await page.$$eval('#compare-summary thead th[data-plan]', (t) => t.map((x) => x.dataset.plan));
      check(heads.length === 2 && heads[0] === String(id) && heads[1] !== heads[0], `apply and compare: compare page of plans ${heads.join(' and ')}`);
      await page.screenshot({ path: join(outDir, 'apply-compare.png'), fullPage: true });
      // Check it by a real run of both plans. The lint demo has a custom call,
      // which the executor cannot run: both runs end "failed" with the reason.
      await page.waitForSelector('#compare-bench-start', { timeout: WAIT });
      await page.click('#compare-bench-start');
      await page.waitForFunction(() => {
        const s = [...document.querySelectorAll('#compare-bench-status .run-state')];
        return s.length === 2 && s.every((x) => ['succeeded', 'failed', 'canceled'].includes(x.dataset.status));
      }, null, { timeout: 120000 });
      const states = await page.$$eval('#compare-bench-status .run-state', (t) => t.map((x) => x.textContent));
      check(states.length === 2 && states.every((t) => /run \d+ failed \(.*custom_call.*\)/.test(t)),
        `benchmark both from the compare page: ${states.join('; ')}`);
    }
    if (!hasWhatif) {
      console.log('  SKIP what-if preview and save: this server has no POST /v1/plans/{id}/whatif');
    } else {
      await page.goto(`${base}/#/plan/${mlpId}`);
      await ready(page);
      await page.waitForSelector('.ops-table .vt-row', { timeout: WAIT });
      await page.click('#plan-whatif summary');
      // the first function input, replicated from here on
      await page.fill('#op-filter', 'input');
      await page.waitForTimeout(200);
      await page.click('.ops-table .vt-row');
      check(/"input":0/.test(await page.textContent('#whatif-target')), 'what-if: the selected value as a reference');
      await page.selectOption('#whatif-kind', 'set_sharding');
      await page.fill('#whatif-sharding', '<@mesh, [{}, {}]>');
      await page.click('#whatif-add');
      check(JSON.parse(await page.inputValue('#whatif-edits'))[0].kind === 'set_sharding', 'edit built from the value and the sharding');
      await page.click('#whatif-preview');
      await page.waitForSelector('#whatif-summary', { timeout: 60000 });
      const sum = await page.textContent('#whatif-summary');
      check(/1 edit/.test(sum) && /change/.test(sum), `preview: ${sum}`);
      check((await page.$$('#whatif-cost tbody tr')).length === 2, 'cost before and after');
      const chg = await page.$$eval('#whatif-changed tbody tr', (t) => t.map((r) => [...r.children].map((x) => x.textContent)));
      check(chg.length >= 1 && chg[0][1] === '<@mesh, [{}, {"model"}]>' && chg[0][2] === '<@mesh, [{}, {}]>',
        `changed values with before and after (${chg.map((x) => x.join(' : ')).join('; ')})`);
      await page.$eval('#plan-whatif', (e) => e.scrollIntoView());
      await page.screenshot({ path: join(outDir, 'whatif.png'), fullPage: false });
      await page.click('#whatif-save');
      await page.waitForSelector('#whatif-plan-link', { timeout: 60000 });
      const nid = Number(await page.textContent('#whatif-plan-link'));
      const stored = await fetch(`${base}/v1/plans/${nid}`);
      check(stored.ok && nid !== mlpId, `saved as plan ${nid}`);
      await stored.arrayBuffer();
      // a bad edit: the API's error with its JSON path
      await page.fill('#whatif-edits', '[{"kind": "constrain", "value": {"op": "/ops/999"}, "sharding": "<@mesh, [{}, {}]>"}]');
      await page.click('#whatif-preview');
      await page.waitForSelector('#whatif-result .error', { timeout: WAIT });
      const bad = await page.textContent('#whatif-result .error');
      check(/HTTP 400/.test(bad) && /\/edits\/0/.test(bad), `bad edit: the API's 400 with its path (${bad.slice(0, 100)})`);
    }
    // Chromium logs the expected 400 (and the 404 of a route the server lacks) itself.
    const expected = new RegExp(`Failed to load resource: the server responded with a status of (400${hasSuggest && hasWhatif ? '' : '|404'})`);
    const other = errors.filter((e) => !expected.test(e));
    check(other.length === 0, `no console errors (${other.join('; ')})`);
    await page.close();
  });

  await step('migrations: submit a GSPMD module, list, report side by side', async () => {
    const errors = [];
    const page = await newPage(ctx, errors);
    await page.goto(`${base}/#/migrations`);
    await ready(page);
    await page.fill('#migration-text', readFileSync(join(repo, 'tests', 'lit', 'gspmd_migrate.mlir'), 'utf8'));
    await page.fill('#migration-name', 'gspmd-mlp');
    await page.click('#migration-submit');
    await page.waitForSelector('#migration-link', { timeout: WAIT });
    check(/HTTP 201/.test(await page.textContent('#migration-ok')), 'POST /v1/migrations answered 201');
    const id = (await page.textContent('#migration-link')).trim();
    await page.waitForSelector(`#migrations-table tbody tr[data-id="${id}"]`, { timeout: WAIT });
    const rows = await page.$$eval('#migrations-table tbody tr', (rs) => rs.map((r) => r.textContent));
    check(rows.some((r) => r.includes('gspmd-mlp')), `the list shows it (${rows.length} row(s))`);
    await page.click(`#migrations-table tbody tr[data-id="${id}"] a`);
    await page.waitForSelector('#migration-divergences tbody tr', { timeout: WAIT });
    const first = await page.$$eval('#migration-divergences tbody tr.first td', (t) => t.map((x) => x.textContent));
    check(first.length === 7 && first[4] !== first[5] && /\{/.test(first[4]), `first divergence: GSPMD ${first[4]} vs Shardy ${first[5]}`);
    const costHead = await page.$$eval('#migration-cost thead th', (t) => t.map((x) => x.textContent));
    check(costHead.includes('GSPMD') && costHead.includes('Shardy') && costHead.includes('Shardy + constraints'), `cost side by side (${costHead.join(', ')})`);
    check((await page.$$('#migration-fix pre.sdy')).length > 0 && /with_sharding_constraint/.test(await page.textContent('#migration-fix')), 'constraints as sdy and JAX');
    await page.screenshot({ path: join(outDir, 'migration.png'), fullPage: true });
    check(errors.length === 0, `no console errors (${errors.join('; ')})`);
    await page.close();
  });
}

async function perfRuns(ctx, base) {
  const nPlans = Number(process.env.PERF_PLANS || 1000);
  if (nPlans > 0) await step(`perf: ${nPlans} plans in the list`, async () => {
    const t0 = Date.now();
    const have = (await (await fetch(`${base}/v1/plans?limit=1000`)).json()).items.length;
    for (let i = have; i < nPlans; i++) {
      const g = JSON.parse(example('mlp', '--layers', '1', '--d-model', String(64 + 8 * i)));
      await post(base, `/v1/plans?name=mlp-${i}`, JSON.stringify(g));
    }
    console.log(`  created ${Math.max(0, nPlans - have)} plans in ${Date.now() - t0} ms`);
    const errors = [];
    const page = await newPage(ctx, errors);
    const t1 = Date.now();
    await page.goto(`${base}/#/plans`);
    await ready(page);
    await page.waitForSelector('.plans-table .vt-row');
    const shown = Date.now() - t1;
    const rows = await page.$$eval('.plans-table .vt-row', (r) => r.length);
    const t2 = Date.now();
    await page.evaluate(() => { const b = document.querySelector('.plans-table .vt-body'); b.scrollTop = b.scrollHeight / 2; });
    await page.waitForTimeout(100);
    await page.click('.vt-th[data-key="model"]');
    await page.waitForTimeout(50);
    const interact = Date.now() - t2;
    console.log(`  PERF plans list: ${nPlans} plans shown in ${shown} ms, ${rows} rows in the DOM; scroll + sort ${interact} ms`);
    check(rows < 200, 'virtualised: fewer than 200 rows in the DOM');
    check(errors.length === 0, `no console errors (${errors.join('; ')})`);
    await page.close();
  });
  await step('perf: a 100k-op module in the plan view', async () => {
    // A chain of 100k ops: dot_general with a tp-sharded kernel, then a
    // residual add, a sharding constraint every 1,000 ops.
    const N = 100000;
    const ops = [];
    let cur = 'x';
    for (let i = 0; i < N; i++) {
      const out = `h${i}`;
      if (i % 1000 === 999) ops.push({ op: 'sdy.sharding_constraint', operands: [cur], result: out, sharding: ['data', null] });
      else if (i % 2 === 0) ops.push({ op: 'stablehlo.dot_general', operands: [cur, 'w'], result: out, type: 'tensor<8x1024xf32>',
        attributes: { dot_dimension_numbers: { lhs_contracting_dimensions: [1], rhs_contracting_dimensions: [0] } } });
      else ops.push({ op: 'stablehlo.add', operands: [cur, 'x'], result: out, type: 'tensor<8x1024xf32>' });
      cur = out;
    }
    const graph = { name: 'chain100k', meshes: [{ name: 'mesh', axes: [['data', 2], ['model', 4]] }],
      inputs: [{ name: 'x', type: 'tensor<8x1024xf32>', sharding: ['data', null] }, { name: 'w', type: 'tensor<1024x1024xf32>', sharding: [null, 'model'] }],
      ops, outputs: [cur] };
    const t0 = Date.now();
    const p = await post(base, '/v1/plans?name=chain100k', JSON.stringify(graph));
    const nOps = p.plan.functions.reduce((n, f) => n + f.ops.length, 0);
    const planBytes = JSON.stringify(p).length;
    console.log(`  planned ${nOps} ops in ${Date.now() - t0} ms`);
    const errors = [];
    const page = await newPage(ctx, errors);
    const t1 = Date.now();
    await page.goto(`${base}/#/plan/${p.id}`);
    await page.waitForSelector('.ops-table .vt-row', { timeout: 120000 });
    const shown = Date.now() - t1;
    const inPage = await page.evaluate(() => { const d = document.querySelector('main').dataset; return `download + parse ${d.fetchMs} ms, rows + first render ${d.renderMs} ms`; });
    const t2 = Date.now();
    await page.evaluate(() => { const b = document.querySelector('.ops-table .vt-body'); b.scrollTop = b.scrollHeight * 0.7; });
    await page.waitForTimeout(50);
    await page.fill('#op-filter', 'dot_general');
    await page.waitForFunction(() => /dot_general|of/.test(document.querySelector('#op-count').textContent));
    const interact = Date.now() - t2;
    const rows = await page.$$eval('.ops-table .vt-row', (r) => r.length);
    console.log(`  PERF plan view: ${nOps} ops shown in ${shown} ms (${inPage}; plan JSON ${(planBytes / 1e6).toFixed(0)} MB); scroll + filter ${interact} ms; ${rows} rows in the DOM`);
    check(rows < 200, 'virtualised: fewer than 200 rows in the DOM');
    check(errors.length === 0, `no console errors (${errors.join('; ')})`);
    await page.close();
  });
}

try {
  await main();
} catch (err) {
  failures++;
  console.log(`FAIL: ${err.stack || err}`);
}
await cleanup();
console.log(`web-test: ${passes} checks passed, ${failures} failed; screenshots in ${outDir}`);
process.exit(failures === 0 ? 0 : 1);
