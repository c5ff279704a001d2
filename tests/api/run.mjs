// SPDX-License-Identifier: Apache-2.0
// The API contract (make api-test): server/openapi.json passes two real
// validators (swagger-cli validate; redocly lint with recommended-strict,
// warnings failing), its plan components match docs/plan.schema.json
// (schema_sync.mjs), and a real server, started here on 127.0.0.1 with an
// ephemeral port and a temporary SQLite file, answers every operation of
// the document, with successes and errors, in replies that match the
// document: the status is one it lists, the Content-Type one it lists for
// that status, the body valid against that schema (ajv). Plan documents are
// also checked against docs/plan.schema.json and stored graph documents
// against docs/graph.schema.json, both as draft 2020-12, including the
// plans of every chunk of our lit tests and (SHARDY_TESTS) Shardy's. Every
// operation must be answered at least once with a 2xx and once with a 4xx.
//   node tests/api/run.mjs SHARDPLAN_BINARY
import { spawn, spawnSync } from "node:child_process";
import { connect } from "node:net";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import Ajv from "ajv";
import Ajv2020 from "ajv/dist/2020.js";

const here = dirname(fileURLToPath(import.meta.url));
const repo = resolve(here, "..", "..");
const binArg = process.argv[2];
if (!binArg) {
  console.error("usage: node tests/api/run.mjs SHARDPLAN_BINARY");
  process.exit(2);
}
const bin = resolve(binArg);
const WAIT = 20000; // ms: any single request or wait
const TOTAL = 90000; // ms: the whole run
const openapiPath = join(repo, "server", "openapi.json");
const openapiText = readFileSync(openapiPath, "utf8");
const openapi = JSON.parse(openapiText);

let failures = 0;
let passes = 0;
const servers = [];
const tmp = mkdtempSync(join(tmpdir(), "shardplan-api-"));

function check(cond, what) {
  if (cond) {
    passes++;
  } else {
    failures++;
    console.log(`  FAIL ${what}`);
  }
  return cond;
}

async function cleanup() {
  clearTimeout(killer);
  for (const p of servers) {
    if (p.exitCode === null) {
      p.kill("SIGTERM");
      await new Promise((r) => {
        const t = setTimeout(() => { p.kill("SIGKILL"); r(); }, 5000);
        p.once("exit", () => { clearTimeout(t); r(); });
      });
    }
  }
  rmSync(tmp, { recursive: true, force: true });
}

const killer = setTimeout(() => {
  console.error(`api-test: FAILED: took over ${TOTAL / 1000} s`);
  cleanup().finally(() => process.exit(1));
}, TOTAL);

// ---- the document itself ---------------------------------------------------------------

function tool(name, args) {
  const r = spawnSync(join(here, "node_modules", ".bin", name), args,
    { cwd: here, encoding: "utf8", timeout: WAIT });
  const out = `${r.stdout ?? ""}${r.stderr ?? ""}`.trim();
  check(r.status === 0, `${name} ${args.join(" ")}\n${out}`);
  console.log(`== ${name}: ${r.status === 0 ? "ok" : "FAILED"}`);
}

tool("swagger-cli", ["validate", openapiPath]);
tool("redocly", ["lint", "--extends", "recommended-strict", "--format", "stylish", openapiPath]);
{
  const r = spawnSync(process.execPath, [join(here, "schema_sync.mjs"), "--check"],
    { encoding: "utf8", timeout: WAIT });
  check(r.status === 0, `schema_sync --check: ${r.stderr}`);
  console.log(`== schema_sync: ${r.status === 0 ? "ok" : "FAILED"}`);
}

// ---- schemas ---------------------------------------------------------------------------

const ajv = new Ajv({ strict: false, allErrors: true });
ajv.addSchema(openapi, "openapi.json");
const ajv2020 = new Ajv2020({ strict: false, allErrors: true });
const planDocCheck = ajv2020.compile(JSON.parse(readFileSync(join(repo, "docs", "plan.schema.json"), "utf8")));
const graphDocCheck = ajv2020.compile(JSON.parse(readFileSync(join(repo, "docs", "graph.schema.json"), "utf8")));
const compiled = new Map();

function pointer(parts) {
  return "#/" + parts.map((p) => String(p).replace(/~/g, "~0").replace(/\//g, "~1")).join("/");
}

function validator(parts) {
  const ref = "openapi.json" + pointer(parts);
  if (!compiled.has(ref)) compiled.set(ref, ajv.compile({ $ref: ref }));
  return compiled.get(ref);
}

function errorsText(errs) {
  return (errs ?? []).slice(0, 6).map((e) => `${e.instancePath || "/"} ${e.message}`).join("; ");
}

// The operations: [template, method, regexp over the path]
const ops = [];
for (const [tpl, item] of Object.entries(openapi.paths)) {
  for (const m of ["get", "put", "post", "delete"]) {
    if (item[m] === undefined) continue;
    const re = new RegExp("^" + tpl.replace(/\{[^}]+\}/g, "[^/]+") + "$");
    ops.push({ tpl, method: m, re, op: item[m], ok: 0, err: 0 });
  }
}

function findOp(method, path) {
  const p = path.split("?")[0];
  return ops.find((o) => o.method === method.toLowerCase() && o.re.test(p));
}

function resolveResponse(r) {
  if (r && r.$ref) {
    const name = r.$ref.split("/").pop();
    return { resp: openapi.components.responses[name], parts: ["components", "responses", name] };
  }
  return { resp: r, parts: null };
}

// ---- requests ---------------------------------------------------------------------------

let B = "";

/* Sends the request and checks its reply against the document; returns
 * {status, json, text, headers}. as: the operation to charge a 405 to. */
async function call(method, path, { body, ctype, headers = {}, as } = {}) {
  const h = { ...headers };
  if (ctype) h["Content-Type"] = ctype;
  const ctl = new AbortController();
  const t = setTimeout(() => ctl.abort(), WAIT);
  let res;
  try {
    res = await fetch(B + path, { method, headers: h, body, signal: ctl.signal });
  } finally {
    clearTimeout(t);
  }
  const text = await res.text();
  const status = res.status;
  const what = `${method} ${path} -> ${status}`;
  const ct = (res.headers.get("content-type") ?? "").split(";")[0].trim();
  let json = null;
  if (ct === "application/json" && text.length > 0) {
    try { json = JSON.parse(text); } catch { check(false, `${what}: body is not JSON`); }
  }
  const o = as ?? findOp(method, path);
  if (!check(o !== undefined, `${what}: no operation in openapi.json`)) return { status, json, text, headers: res.headers };
  const key = String(status);
  const listed = o.op.responses[key] ?? o.op.responses.default;
  if (!check(listed !== undefined, `${what}: status not listed for ${o.method.toUpperCase()} ${o.tpl}`)) {
    return { status, json, text, headers: res.headers };
  }
  if (status >= 200 && status < 300) {
    o.ok++;
    // a body the server accepted is one the document accepts
    const rb = o.op.requestBody?.content?.[ctype?.split(";")[0]];
    if (rb?.schema && ctype?.startsWith("application/json") && body !== undefined) {
      const v = validator(["paths", o.tpl, o.method, "requestBody", "content", "application/json", "schema"]);
      check(v(JSON.parse(body.toString())), `${what}: the request body the server took does not match the document: ${errorsText(v.errors)}`);
    }
  }
  if (status >= 400 && status < 500) o.err++;
  const { resp, parts } = resolveResponse(listed);
  const respParts = parts ?? ["paths", o.tpl, o.method, "responses", o.op.responses[key] ? key : "default"];
  const content = resp.content ?? {};
  if (status === 204 || status === 304 || Object.keys(content).length === 0) {
    check(text.length === 0, `${what}: a body where the document lists none`);
    return { status, json, text, headers: res.headers };
  }
  if (!check(content[ct] !== undefined, `${what}: Content-Type ${ct} not listed (${Object.keys(content)})`)) {
    return { status, json, text, headers: res.headers };
  }
  const sch = content[ct].schema;
  if (ct === "application/json") {
    const v = validator([...respParts, "content", ct, "schema"]);
    check(v(json), `${what}: body does not match ${sch.$ref ?? "its schema"}: ${errorsText(v.errors)}`);
  } else {
    check(sch.type === "string" && text.length > 0, `${what}: ${ct} body`);
  }
  return { status, json, text, headers: res.headers };
}

function planDoc(what, doc) {
  check(planDocCheck(doc), `${what}: plan document vs docs/plan.schema.json: ${errorsText(planDocCheck.errors)}`);
}

function expect(r, status, what) {
  return check(r.status === status, `${what}: status ${r.status}, expected ${status}: ${r.text.slice(0, 300)}`);
}

function startServer(name, extra = []) {
  return new Promise((resolveP, reject) => {
    const args = ["serve", "--listen", "127.0.0.1:0", "--db", join(tmp, `${name}.db`), "--log", "",
      "--bench-time-limit", "60", ...extra];
    const p = spawn(bin, args, { cwd: repo, stdio: ["ignore", "ignore", "pipe"] });
    servers.push(p);
    let err = "";
    const t = setTimeout(() => reject(new Error(`server did not start: ${err}`)), WAIT);
    p.stderr.on("data", (d) => {
      err += d;
      const m = /listening on http:\/\/127\.0\.0\.1:(\d+)\//.exec(err);
      if (m) { clearTimeout(t); resolveP(`http://127.0.0.1:${m[1]}`); }
    });
    p.once("exit", (code) => { clearTimeout(t); reject(new Error(`server exited ${code}: ${err}`)); });
  });
}

const J = "application/json";
const file = (p) => readFileSync(join(repo, p));

async function waitRun(id) {
  const t0 = Date.now();
  for (;;) {
    const r = await call("GET", `/v1/benchmarks/${id}`);
    if (r.json && !["queued", "running"].includes(r.json.status)) return r;
    if (Date.now() - t0 > WAIT) return r;
    await new Promise((ok) => setTimeout(ok, 200));
  }
}

// ---- malformed requests over raw sockets ------------------------------------------------

/* Sends bytes on a fresh connection to base and collects the answer until
 * the server closes (or ms pass): {status, headers, body, closed}. */
function rawRequest(base, bytes, ms = 5000) {
  const u = new URL(base);
  return new Promise((ok) => {
    const chunks = [];
    let done = false;
    const sock = connect({ host: u.hostname, port: Number(u.port) });
    const finish = (closed) => {
      if (done) return;
      done = true;
      clearTimeout(t);
      sock.destroy();
      ok({ ...parseAnswer(Buffer.concat(chunks)), closed });
    };
    const t = setTimeout(() => finish(false), ms);
    sock.on("connect", () => sock.write(bytes));
    sock.on("data", (d) => chunks.push(d));
    sock.on("end", () => finish(true));
    sock.on("close", () => finish(true));
    sock.on("error", () => finish(true));
  });
}

/* The answer in the bytes all: {status, headers, body, statusLines, text}. */
function parseAnswer(all) {
  const text = all.toString("latin1");
  const end = text.indexOf("\r\n\r\n");
  const head = end < 0 ? text : text.slice(0, end);
  const lines = head.split("\r\n");
  const m = /^HTTP\/1\.[01] (\d{3}) /.exec(lines[0] ?? "");
  const headers = {};
  for (const l of lines.slice(1)) {
    const i = l.indexOf(":");
    if (i > 0) headers[l.slice(0, i).toLowerCase()] = l.slice(i + 1).trim();
  }
  const body = end < 0 ? "" : all.subarray(end + 4).toString("utf8");
  const statusLines = (text.match(/(^|\n)HTTP\/1\.[01] \d{3} /g) ?? []).length;
  return { status: m ? Number(m[1]) : 0, headers, body, statusLines, text };
}

/* The last of the answers of a kept-alive raw exchange r (from its last
 * status line on), with r's closed flag, and how many came before it. */
function lastAnswer(r) {
  const at = r.text.lastIndexOf("HTTP/1.1 ");
  const last = parseAnswer(Buffer.from(at < 0 ? "" : r.text.slice(at), "latin1"));
  return { ...last, closed: r.closed, before: r.statusLines - 1 };
}

/* A raw answer is the documented JSON error: status, code, one status
 * line, application/json, the Error schema, and the connection closed. */
function expectRawError(r, status, code, what) {
  check(r.status === status, `${what}: status ${r.status}, expected ${status}: ${r.text.slice(0, 300)}`);
  check(r.statusLines === 1, `${what}: ${r.statusLines} status lines`);
  check((r.headers["content-type"] ?? "").startsWith("application/json"), `${what}: Content-Type ${r.headers["content-type"]}`);
  let j = null;
  try { j = JSON.parse(r.body); } catch { /* checked below */ }
  check(j !== null, `${what}: body is not JSON: ${r.body.slice(0, 200)}`);
  if (j === null) return;
  const v = validator(["components", "schemas", "Error"]);
  check(v(j), `${what}: body not an Error: ${errorsText(v.errors)}`);
  check(j.error?.code === code, `${what}: code ${j.error?.code}, expected ${code}`);
  check(r.closed, `${what}: connection left open`);
}

async function malformed(base) {
  console.log(`== malformed requests against ${base}`);
  const cases = [
    ["HTTP/1.1 without Host", "GET /healthz HTTP/1.1\r\n\r\n", 400, "invalid"],
    ["two Host headers", "GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400, "invalid"],
    ["differing Content-Length", "POST /v1/graphs HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n{}", 400, "invalid"],
    ["request line over 8 KiB", `GET /${"a".repeat(9000)} HTTP/1.1\r\nHost: x\r\n\r\n`, 414, "uri_too_long"],
    ["head over 16 KiB", `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${"b".repeat(17000)}\r\n\r\n`, 431, "headers_too_large"],
    ["101 header fields", `GET /healthz HTTP/1.1\r\nHost: x\r\n${"X-A: 1\r\n".repeat(100)}\r\n`, 431, "headers_too_large"],
    ["HTTP/2.7", "GET /healthz HTTP/2.7\r\nHost: x\r\n\r\n", 505, "http_version_not_supported"],
    ["no version", "GET /healthz\r\n\r\n", 400, "invalid"],
    ["header line without ':'", "GET /healthz HTTP/1.1\r\nHost: x\r\nbad line\r\n\r\n", 400, "invalid"],
    ["space before ':'", "GET /healthz HTTP/1.1\r\nHost : x\r\n\r\n", 400, "invalid"],
    ["obsolete line folding", "GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n 2\r\n\r\n", 400, "invalid"],
    ["Content-Length: 2x", "POST /v1/graphs HTTP/1.1\r\nHost: x\r\nContent-Length: 2x\r\n\r\n{}", 400, "invalid"],
    ["Content-Length: -1", "POST /v1/graphs HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n", 400, "invalid"],
    ["Content-Length and chunked", "POST /v1/graphs HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n", 400, "invalid"],
    ["Transfer-Encoding not ending in chunked", "POST /v1/graphs HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 400, "invalid"],
    ["gzip, chunked", "POST /v1/graphs HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", 501, "not_implemented"],
    ["Transfer-Encoding in HTTP/1.0", "POST /v1/graphs HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400, "invalid"],
    ["binary request line (a TLS hello)", Buffer.from([0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0xff]), 400, "invalid"],
    ["NUL in the method", Buffer.from("GE\0T / HTTP/1.1\r\nHost: x\r\n\r\n", "latin1"), 400, "invalid"],
    ["chunk size zz (sent with the head)", "POST /v1/graphs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n", 400, "invalid"],
    ["chunk data not ending in CRLF", "POST /v1/graphs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}XX0\r\n\r\n", 400, "invalid"],
    ["control byte in a header value", "GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: a\x01b\r\n\r\n", 400, "invalid"],
  ];
  for (const [what, bytes, status, code] of cases) {
    expectRawError(await rawRequest(base, bytes), status, code, `raw: ${what}`);
  }
  // well-formed raw requests still pass: HTTP/1.0 needs no Host
  const ok10 = await rawRequest(base, "GET /healthz HTTP/1.0\r\n\r\n");
  check(ok10.status === 200, `raw: HTTP/1.0 without Host: ${ok10.text.slice(0, 200)}`);
  const ok11 = await rawRequest(base, "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  check(ok11.status === 200, `raw: HTTP/1.1 with Host: ${ok11.text.slice(0, 200)}`);
  // a well-formed chunked body with an extension reaches the handler
  const g = file("examples/flax_mlp.json");
  const chunked = Buffer.concat([Buffer.from("POST /v1/graphs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"),
    Buffer.from("64\r\n"), g.subarray(0, 100), Buffer.from(`\r\n${(g.length - 100).toString(16)};x=1\r\n`), g.subarray(100), Buffer.from("\r\n0\r\n\r\n")]);
  const okChunked = await rawRequest(base, chunked);
  check(okChunked.status === 201 || okChunked.status === 200, `raw: a chunked graph: ${okChunked.text.slice(0, 300)}`);
  // the largest head the limits allow still reaches the handler
  const line = `GET /healthz?${"q".repeat(8000)} HTTP/1.1\r\n`;
  let big = `${line}Host: x\r\nConnection: close\r\n${"X-A: v\r\n".repeat(97)}`;
  big += `X-P: ${"p".repeat(16384 - big.length - 2 - 7)}\r\n\r\n`;
  check(big.length === 16384, `raw: the largest head is ${big.length} bytes`);
  const okBig = await rawRequest(base, big);
  check(okBig.status === 200, `raw: a 16384-byte head of 100 fields: ${okBig.text.slice(0, 200)}`);
  // a malformed request after a good one on a kept-alive connection is
  // still answered (by libmicrohttpd: only the first head passes the gate)
  const ka = await rawRequest(base, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  check(ka.statusLines === 2 && ka.status === 200, `raw: two requests on one connection: ${ka.text.slice(0, 300)}`);
  // a head that never ends gets 408 at the head deadline (--head-timeout 1 here)
  const t0 = Date.now();
  const slow = await rawRequest(base, "GET /healthz HTTP/1.1\r\nHost: x\r\n", 6000);
  expectRawError(slow, 408, "request_timeout", "raw: head past its deadline");
  check(Date.now() - t0 < 4000, `raw: 408 after ${Date.now() - t0} ms`);
  // ... so does a later head on a kept-alive connection, and a body that
  // stops coming (--min-body-rate): answered, not cut silently
  const good = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
  const t1 = Date.now();
  const kaSlow = await rawRequest(base, `${good}GET /healthz HTTP/1.1\r\nHost: x\r\n`, 6000);
  check(kaSlow.status === 200 && kaSlow.statusLines === 2, `raw: kept-alive slow head: ${kaSlow.text.slice(0, 300)}`);
  expectRawError(lastAnswer(kaSlow), 408, "request_timeout", "raw: kept-alive head past its deadline");
  check(Date.now() - t1 < 4000, `raw: kept-alive 408 after ${Date.now() - t1} ms`);
  const stalled = "POST /v1/graphs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 5000\r\n\r\n{";
  expectRawError(await rawRequest(base, stalled, 6000), 408, "request_timeout", "raw: a body that stops");
  const kaStalled = await rawRequest(base, `${good}${stalled}`, 6000);
  expectRawError(lastAnswer(kaStalled), 408, "request_timeout", "raw: kept-alive body that stops");
  // an idle kept-alive connection is closed without an answer
  const idle = await rawRequest(base, good, 6000);
  check(idle.closed && idle.statusLines === 1 && idle.status === 200, `raw: idle kept-alive connection: closed ${idle.closed}, ${idle.text.slice(0, 200)}`);
}

/* Refusals carry the CORS headers normal answers do (the raw server runs
 * with --cors-origin http://app.example), so a browser can read them. */
async function corsRefusals(base) {
  const O = "Origin: http://app.example\r\n";
  const cases = [
    ["HTTP/1.1 without Host", `GET /healthz HTTP/1.1\r\n${O}\r\n`, 400, "invalid"],
    ["request line over 8 KiB", `GET /${"a".repeat(9000)} HTTP/1.1\r\nHost: x\r\n${O}\r\n`, 414, "uri_too_long"],
    ["101 header fields", `GET /healthz HTTP/1.1\r\nHost: x\r\n${O}${"X-A: 1\r\n".repeat(100)}\r\n`, 431, "headers_too_large"],
    ["HTTP/2.7", `GET /healthz HTTP/2.7\r\nHost: x\r\n${O}\r\n`, 505, "http_version_not_supported"],
    ["gzip, chunked", `POST /v1/graphs HTTP/1.1\r\nHost: x\r\n${O}Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n`, 501, "not_implemented"],
    ["chunk size zz", `POST /v1/graphs HTTP/1.1\r\nHost: x\r\n${O}Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n`, 400, "invalid"],
    ["first head past its deadline", `GET /healthz HTTP/1.1\r\nHost: x\r\n${O}`, 408, "request_timeout"],
    ["body over --max-body (the app's 413)", `POST /v1/graphs HTTP/1.1\r\nHost: x\r\n${O}Content-Type: application/json\r\nContent-Length: 999999999\r\n\r\n`, 413, "too_large"],
    ["a body that stops", `POST /v1/graphs HTTP/1.1\r\nHost: x\r\n${O}Content-Type: application/json\r\nContent-Length: 5000\r\n\r\n{`, 408, "request_timeout"],
  ];
  for (const [what, bytes, status, code] of cases) {
    const r = await rawRequest(base, bytes, 6000);
    expectRawError(r, status, code, `cors: ${what}`);
    check(r.headers["access-control-allow-origin"] === "http://app.example", `cors: ${what}: Access-Control-Allow-Origin ${r.headers["access-control-allow-origin"]}`);
    check((r.headers["vary"] ?? "").includes("Origin"), `cors: ${what}: Vary ${r.headers["vary"]}`);
    check((r.headers["access-control-expose-headers"] ?? "").includes("Retry-After"), `cors: ${what}: Expose-Headers ${r.headers["access-control-expose-headers"]}`);
  }
  // another origin gets none
  const other = await rawRequest(base, "GET /healthz HTTP/1.1\r\nOrigin: http://evil.example\r\n\r\n");
  expectRawError(other, 400, "invalid", "cors: other origin");
  check(other.headers["access-control-allow-origin"] === undefined, "cors: another origin got Access-Control-Allow-Origin");
}

async function main() {
  B = await startServer("api");
  console.log(`== routes against ${B}`);
  const byPath = (tpl, m = "get") => ops.find((o) => o.tpl === tpl && o.method === m);

  // health, metrics, the document (405s charged to their GETs)
  expect(await call("GET", "/healthz"), 200, "healthz");
  expect(await call("POST", "/healthz", { as: byPath("/healthz") }), 405, "POST healthz");
  expect(await call("GET", "/readyz"), 200, "readyz");
  expect(await call("DELETE", "/readyz", { as: byPath("/readyz") }), 405, "DELETE readyz");
  expect(await call("GET", "/metrics"), 200, "metrics");
  expect(await call("POST", "/metrics", { as: byPath("/metrics") }), 405, "POST metrics");
  const oa = await call("GET", "/v1/openapi.json");
  expect(oa, 200, "openapi");
  check(oa.text === openapiText, "GET /v1/openapi.json is server/openapi.json as built");
  expect(await call("PUT", "/v1/openapi.json", { as: byPath("/v1/openapi.json") }), 405, "PUT openapi");

  // graphs
  const g1 = await call("POST", "/v1/graphs?name=mlp", { body: file("examples/flax_mlp.json"), ctype: J });
  expect(g1, 201, "graph json");
  expect(await call("POST", "/v1/graphs?name=mlp", { body: file("examples/flax_mlp.json"), ctype: J }), 200, "graph again");
  const g2 = await call("POST", "/v1/graphs", { body: file("examples/flax_mlp.mlir"), ctype: "text/plain" });
  expect(g2, 201, "graph mlir");
  expect(await call("POST", "/v1/graphs", { body: '{"ops": 3}', ctype: J }), 400, "bad graph");
  expect(await call("POST", "/v1/graphs", { body: "x", ctype: "image/png" }), 415, "graph png");
  expect(await call("GET", "/v1/graphs?limit=5&format=json"), 200, "graph list");
  expect(await call("GET", "/v1/graphs?limit=x"), 400, "graph list bad limit");
  const gg = await call("GET", `/v1/graphs/${g1.json.id}`);
  expect(gg, 200, "graph get");
  if (gg.json?.graph) {
    check(graphDocCheck(gg.json.graph), `stored graph vs docs/graph.schema.json: ${errorsText(graphDocCheck.errors)}`);
  }
  expect(await call("GET", `/v1/graphs/${g1.json.id}?raw=1`), 200, "graph raw json");
  expect(await call("GET", `/v1/graphs/${g2.json.id}?raw=1`), 200, "graph raw mlir");
  expect(await call("GET", `/v1/graphs/${g2.json.id}`), 200, "graph get mlir");
  expect(await call("GET", "/v1/graphs/9999"), 404, "graph 404");
  const g3 = await call("POST", "/v1/graphs?name=gone", { body: file("examples/lint_demo.mlir"), ctype: "text/plain" });
  expect(await call("DELETE", `/v1/graphs/${g3.json.id}`), 204, "graph delete");
  expect(await call("DELETE", "/v1/graphs/9999"), 404, "graph delete 404");

  // meshes, rules, profiles
  const docs = {
    meshes: ['{"axes":[{"name":"data","size":4},{"name":"model","size":2}]}', '{"axes":[{"name":"data","size":0}]}'],
    rules: ['"i j, j k -> i k"', '{"sharding_rule": 3}'],
    profiles: [file("profiles/a100-80gb.json").toString(), '{"memory": "lots"}'],
  };
  for (const [kind, [good, bad]] of Object.entries(docs)) {
    expect(await call("PUT", `/v1/${kind}/one`, { body: good, ctype: J }), 201, `${kind} put`);
    expect(await call("PUT", `/v1/${kind}/one`, { body: good, ctype: J }), 200, `${kind} put again`);
    expect(await call("PUT", `/v1/${kind}/bad`, { body: bad, ctype: J }), 400, `${kind} put bad`);
    expect(await call("GET", `/v1/${kind}/one`), 200, `${kind} get`);
    expect(await call("GET", `/v1/${kind}/none`), 404, `${kind} get 404`);
    expect(await call("GET", `/v1/${kind}`), 200, `${kind} list`);
    expect(await call("GET", `/v1/${kind}?after=-1`), 400, `${kind} list bad after`);
    expect(await call("PUT", `/v1/${kind}/two`, { body: good, ctype: J }), 201, `${kind} put two`);
    expect(await call("DELETE", `/v1/${kind}/two`), 204, `${kind} delete`);
    expect(await call("DELETE", `/v1/${kind}/two`), 404, `${kind} delete 404`);
  }
  expect(await call("PUT", "/v1/meshes/wide", { body: docs.meshes[0], ctype: J }), 201, "mesh wide");

  // plans from every kind of input
  const plans = [];
  const planOf = async (what, path, body, ctype, want = 201) => {
    const r = await call("POST", path, { body, ctype });
    if (expect(r, want, what) && r.json?.plan) {
      planDoc(what, r.json.plan);
      plans.push(r.json.id);
    }
    return r;
  };
  await planOf("plan json", "/v1/plans", file("examples/flax_mlp.json"), J);
  await planOf("plan json again", "/v1/plans", file("examples/flax_mlp.json"), J, 200);
  await planOf("plan mlir", "/v1/plans?pass=sdy-basic-propagate", file("examples/flax_mlp.mlir"), "text/plain");
  await planOf("plan graph_id + mesh", "/v1/plans", JSON.stringify({ graph_id: g1.json.id, mesh: "wide" }), J);
  await planOf("plan lint_demo", "/v1/plans", file("examples/lint_demo.mlir"), "text/plain");
  await planOf("plan lint_subaxis", "/v1/plans", file("examples/lint_subaxis.mlir"), "text/plain");
  await planOf("plan suggest_mlp", "/v1/plans", file("examples/suggest_mlp.mlir"), "text/plain");
  await planOf("plan example", "/v1/plans", JSON.stringify({ example: { model: "transformer", layers: 1, train: true, strategy: "fsdp", mesh: { data: 4, model: 2 } } }), J);
  await planOf("plan envelope mlir", "/v1/plans", JSON.stringify({ mlir: file("examples/flax_mlp.mlir").toString(), options: { pass: "sdy-aggressive-propagate" } }), J);
  expect(await call("POST", "/v1/plans", { body: '{"ops":[{"op":"stablehlo.nope"}]}', ctype: J }), 400, "plan bad graph");
  expect(await call("POST", "/v1/plans", { body: '{"graph_id":1,"mlir":"x"}', ctype: J }), 400, "plan two sources");
  expect(await call("POST", "/v1/plans?pass=nope", { body: file("examples/flax_mlp.json"), ctype: J }), 400, "plan bad pass");
  const [p1, p2, p3, p4, p5, p6, p7] = [...new Set(plans)];
  expect(await call("GET", "/v1/plans?limit=3"), 200, "plan list");
  expect(await call("GET", "/v1/plans?graph_id=x"), 400, "plan list bad graph_id");
  const pg = await call("GET", `/v1/plans/${p1}`);
  if (expect(pg, 200, "plan get")) planDoc("plan get", pg.json.plan);
  expect(await call("GET", `/v1/plans/${p1}`, { headers: { Accept: "application/mlir" } }), 200, "plan get mlir");
  const etag = pg.headers.get("etag");
  expect(await call("GET", `/v1/plans/${p1}`, { headers: { "If-None-Match": etag } }), 304, "plan 304");
  expect(await call("GET", "/v1/plans/9999"), 404, "plan 404");
  const gz = await fetch(`${B}/v1/plans/${p1}`, { headers: { "Accept-Encoding": "gzip" } });
  check(gz.headers.get("content-encoding") === "gzip" && /Accept-Encoding/.test(gz.headers.get("vary") ?? ""),
    `GET /v1/plans/${p1} with Accept-Encoding: gzip is gzip-coded (${gz.headers.get("content-encoding")})`);
  check(JSON.parse(await gz.text()).id === p1, "the gzip-coded plan decodes to the plan");

  // the plan documents of many shapes: every chunk of our own lit tests
  // (priorities, sub-axes, unreduced axes, manual computations, calls, groups)
  // and, when SHARDY_TESTS names Shardy's lit files (read in place), every
  // chunk of its ir, import, propagation and export tests: a 500 or a plan
  // document outside the schema fails
  const sources = readdirSync(join(repo, "tests", "lit")).filter((n) => n.endsWith(".mlir")).sort()
    .map((n) => join(repo, "tests", "lit", n));
  const shardy = process.env.SHARDY_TESTS;
  try {
    for (const line of readFileSync(join(shardy ?? "/nonexistent", "MANIFEST.txt"), "utf8").split("\n")) {
      const [name, from] = line.split("\t");
      if (from && /\/(transforms\/(propagation|import|export)|ir)\/test\//.test(from)) sources.push(join(shardy, name));
    }
  } catch {
    console.log("   (no SHARDY_TESTS: our own lit files only)");
  }
  let chunks = 0, planned = 0;
  for (const path of sources) {
    const f = path.split("/").pop();
    for (const chunk of readFileSync(path, "utf8").split(/^\/\/ -----$/m)) {
      if (!/\bfunc\.func\b/.test(chunk)) continue;
      chunks++;
      const r = await call("POST", `/v1/plans?name=${encodeURIComponent(f)}`, { body: chunk, ctype: "text/plain" });
      check([200, 201, 400].includes(r.status), `lit chunk of ${f}: status ${r.status}: ${r.text.slice(0, 200)}`);
      if (r.json?.plan) {
        planned++;
        planDoc(`lit chunk of ${f}`, r.json.plan);
      }
    }
  }
  console.log(`   ${planned} of ${chunks} lit chunks planned, their plan documents checked`);

  // the advisors, on every plan
  for (const id of [p1, p2, p3, p4, p5, p6, p7]) {
    expect(await call("GET", `/v1/plans/${id}/cost`), 200, `cost ${id}`);
    expect(await call("GET", `/v1/plans/${id}/lint`), 200, `lint ${id}`);
    expect(await call("GET", `/v1/plans/${id}/collectives`), 200, `collectives ${id}`);
    expect(await call("GET", `/v1/plans/${id}/memory?points=64`), 200, `memory ${id}`);
  }
  expect(await call("GET", `/v1/plans/${p1}/memory?profile=nope`), 400, "memory bad profile");
  expect(await call("GET", "/v1/plans/9999/memory"), 404, "memory 404");
  expect(await call("GET", `/v1/plans/${p1}/cost?profile=tpu-v5e`), 200, "cost tpu-v5e");
  expect(await call("GET", `/v1/plans/${p1}/cost?profile=nope`), 400, "cost bad profile");
  expect(await call("GET", `/v1/plans/${p1}/lint?min_bytes=x`), 400, "lint bad min_bytes");
  expect(await call("GET", "/v1/plans/9999/collectives"), 404, "collectives 404");
  expect(await call("GET", `/v1/plans/${p6}/suggest?k=2&max_candidates=6`), 200, "suggest");
  expect(await call("GET", `/v1/plans/${p1}/suggest?objective=memory&k=1&max_candidates=4`), 200, "suggest memory");
  expect(await call("GET", `/v1/plans/${p1}/suggest?objective=speed`), 400, "suggest bad objective");
  expect(await call("GET", `/v1/plans/${p1}/sweep?devices=4`), 200, "sweep the plan's model");
  expect(await call("GET", `/v1/plans/${p1}/sweep?mesh=nope`), 400, "sweep plan unknown mesh");
  // the Flax graph's logical-axis-rule variants: 3 names on data, model or none
  const lr = await call("GET", `/v1/plans/${p1}/sweep?logical_rules=true`);
  if (expect(lr, 200, "sweep the plan's logical-axis rules")) {
    const rows = lr.json.rows;
    check(lr.json.variants === 27 && rows.length === 27 && lr.json.logical_names === 3 &&
      lr.json.variants_of === "every assignment", `rules sweep: 27 variants of 3 names (${lr.json.variants}, ${lr.json.logical_names})`);
    check(rows.filter((x) => x.own).length === 1 && rows.every((x) => Array.isArray(x.rules) && x.mesh.data === 2 && x.mesh.model === 4),
      "rules sweep: one own row, every row its rules on the plan's mesh");
    check(new Set(rows.map((x) => JSON.stringify(x.rules))).size === 27, "rules sweep: rows differ in their rules");
  }
  const lrm = await call("GET", `/v1/plans/${p2}/sweep?logical_rules=true`);
  expect(lrm, 400, "rules sweep of an MLIR plan");
  check(lrm.json?.error?.path === "/logical_axis_rules", `rules sweep of MLIR names /logical_axis_rules (${lrm.text.slice(0, 120)})`);
  expect(await call("GET", `/v1/plans/${p1}/sweep?logical_rules=yes`), 400, "rules sweep bad flag");
  expect(await call("GET", `/v1/plans/${p1}/sweep?logical_rules=true&devices=4`), 400, "rules sweep with devices");
  const edit = { edits: [{ kind: "constrain", value: { op: "/ops/0" }, sharding: "<@mesh, [{}, {}]>" }] };
  expect(await call("POST", `/v1/plans/${p1}/whatif`, { body: JSON.stringify(edit), ctype: J }), 200, "whatif");
  const saved = await call("POST", `/v1/plans/${p1}/whatif`, { body: JSON.stringify({ ...edit, save: true }), ctype: J });
  expect(saved, 201, "whatif save");
  expect(await call("POST", `/v1/plans/${p1}/whatif`, { body: JSON.stringify({ ...edit, save: true }), ctype: J }), 200, "whatif save again");
  expect(await call("POST", `/v1/plans/${p1}/whatif`, { body: '{"edits":[{"kind":"melt"}]}', ctype: J }), 400, "whatif bad edit");
  expect(await call("GET", `/v1/compare?plans=${p1},${p3}`), 200, "compare 2");
  expect(await call("GET", `/v1/compare?plans=${p1},${p2},${p3}`), 200, "compare 3");
  expect(await call("GET", `/v1/compare?plans=${p1}`), 400, "compare one plan");
  // migration reports (GSPMD -> Shardy)
  const gspmd = file("tests/lit/gspmd_migrate.mlir").toString();
  const m1 = await call("POST", "/v1/migrations?name=gspmd_migrate", { body: gspmd, ctype: "text/plain" });
  expect(m1, 201, "migration create");
  check((m1.json?.report?.divergences || []).length > 0, "migration report lists divergences");
  expect(await call("POST", "/v1/migrations", { body: JSON.stringify({ mlir: gspmd, name: "gspmd_migrate" }), ctype: J }), 200, "migration create again (json)");
  expect(await call("POST", "/v1/migrations", { body: file("examples/flax_mlp.mlir"), ctype: "text/plain" }), 400, "migration without GSPMD shardings");
  expect(await call("POST", "/v1/migrations", { body: "{}", ctype: J }), 400, "migration no mlir");
  expect(await call("GET", `/v1/migrations/${m1.json.id}`), 200, "migration get");
  expect(await call("GET", "/v1/migrations/9999"), 404, "migration 404");
  expect(await call("GET", "/v1/migrations"), 200, "migration list");
  expect(await call("GET", "/v1/migrations?limit=100000"), 400, "migration list bad limit");
  expect(await call("GET", "/v1/sweep?devices=4&layers=1&d_model=64&heads=2&seq=16&batch=4&strategies=fsdp,dp%2Btp"), 200, "sweep");
  expect(await call("GET", "/v1/sweep?devices=0"), 400, "sweep bad devices");

  // benchmark runs
  const b1 = await call("POST", "/v1/benchmarks", { body: JSON.stringify({ plan_id: p1, warmup: 0, iters: 1 }), ctype: J });
  expect(b1, 202, "bench queue");
  expect(await call("POST", "/v1/benchmarks", { body: JSON.stringify({ plan_id: p1, steps: 3 }), ctype: J }), 400, "bench unknown member");
  expect(await call("POST", "/v1/benchmarks", { body: JSON.stringify({ plan_id: 9999 }), ctype: J }), 404, "bench no plan");
  const r1 = await call("POST", "/v1/runs", { body: JSON.stringify({ plan_id: p1, spec: { iters: 1, warmup: 0 } }), ctype: J });
  expect(r1, 201, "run queue");
  expect(await call("POST", "/v1/runs", { body: "{}", ctype: J }), 400, "run no plan_id");
  const done = await waitRun(b1.json.id);
  check(done.json?.status === "succeeded", `benchmark ${b1.json.id} succeeded: ${done.text.slice(0, 300)}`);
  expect(await call("GET", "/v1/benchmarks?status=succeeded"), 200, "bench list");
  expect(await call("GET", "/v1/benchmarks?status=melted"), 400, "bench list bad status");
  expect(await call("GET", "/v1/benchmarks/9999"), 404, "bench 404");
  const tr = await call("GET", `/v1/benchmarks/${b1.json.id}/trace`);
  expect(tr, 200, "bench trace");
  check((tr.json?.traceEvents || []).some((e) => e.ph === "X" && typeof e.dur === "number"), "bench trace has X events with dur");
  expect(await call("GET", "/v1/benchmarks/9999/trace"), 404, "bench trace 404");
  expect(await call("GET", `/v1/runs/${r1.json.id}`), 200, "run get");
  expect(await call("GET", "/v1/runs/9999"), 404, "run 404");
  expect(await call("GET", "/v1/runs?plan_id=x"), 400, "run list bad plan_id");
  expect(await call("GET", "/v1/runs"), 200, "run list");
  const b2 = await call("POST", "/v1/benchmarks", { body: JSON.stringify({ plan_id: p7, iters: 100000 }), ctype: J });
  expect(b2, 202, "bench long");
  expect(await call("POST", `/v1/benchmarks/${b2.json.id}/cancel`), 200, "bench cancel");
  expect(await call("POST", `/v1/benchmarks/${b2.json.id}/cancel`), 409, "bench cancel again");
  expect(await call("DELETE", `/v1/benchmarks/${b2.json.id}`), 204, "bench delete");
  expect(await call("DELETE", `/v1/benchmarks/${b2.json.id}`), 404, "bench delete 404");
  await waitRun(r1.json.id);
  expect(await call("DELETE", `/v1/runs/${r1.json.id}`), 204, "run delete");
  expect(await call("DELETE", `/v1/runs/${r1.json.id}`), 404, "run delete 404");

  // deleting plans last: the advisors above need them
  expect(await call("DELETE", `/v1/plans/${saved.json.plan_id}`), 204, "plan delete");
  expect(await call("DELETE", `/v1/plans/${saved.json.plan_id}`), 404, "plan delete 404");

  // tokens
  const tk = await call("POST", "/v1/tokens", { body: '{"scope":"write","label":"ci"}', ctype: J });
  expect(tk, 201, "token create");
  expect(await call("POST", "/v1/tokens", { body: '{"scope":"root"}', ctype: J }), 400, "token bad scope");
  expect(await call("GET", "/v1/tokens"), 200, "token list");
  expect(await call("GET", "/v1/tokens?limit=100000"), 400, "token list bad limit");
  expect(await call("DELETE", `/v1/tokens/${tk.json.id}`), 204, "token revoke");
  expect(await call("DELETE", "/v1/tokens/9999"), 404, "token revoke 404");

  // with auth on: 401 without a token, 403 with a small one
  const admin = await call("POST", "/v1/tokens", { body: '{"scope":"read","label":"reader"}', ctype: J });
  await cleanupFirst();
  B = await startServer("api", ["--auth", "on"]);
  expect(await call("GET", "/v1/plans"), 401, "auth: no token");
  expect(await call("DELETE", `/v1/plans/${p1}`, { headers: { Authorization: `Bearer ${admin.json.token}` } }), 403, "auth: read token deletes");
  expect(await call("GET", "/v1/plans", { headers: { Authorization: `Bearer ${admin.json.token}` } }), 200, "auth: read token lists");

  // a body over --max-body: 413
  await cleanupFirst(1);
  B = await startServer("small", ["--max-body", "1024"]);
  expect(await call("POST", "/v1/plans", { body: file("examples/flax_mlp.json"), ctype: J }), 413, "plan over --max-body");
  expect(await call("POST", "/v1/graphs", { body: file("examples/flax_mlp.mlir"), ctype: "text/plain" }), 413, "graph over --max-body");

  await cleanupFirst(2);
  B = await startServer("raw", ["--head-timeout", "1", "--max-per-ip", "2", "--cors-origin", "http://app.example"]);
  await malformed(B);
  await corsRefusals(B);
  // past --max-per-ip: 503 JSON while the first two are held
  const held = [connect({ host: "127.0.0.1", port: Number(new URL(B).port) }), connect({ host: "127.0.0.1", port: Number(new URL(B).port) })];
  await new Promise((ok) => setTimeout(ok, 200));
  expectRawError(await rawRequest(B, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"), 503, "unavailable", "raw: over --max-per-ip");
  for (const h of held) h.destroy();

  // coverage: every operation answered with a 2xx and a 4xx
  for (const o of ops) {
    check(o.ok > 0, `${o.method.toUpperCase()} ${o.tpl}: no 2xx reply checked`);
    check(o.err > 0, `${o.method.toUpperCase()} ${o.tpl}: no 4xx reply checked`);
  }
}

/* Stops server k (default the first; its database stays for the next). */
async function cleanupFirst(k = 0) {
  const p = servers[k];
  if (p.exitCode === null) {
    p.removeAllListeners("exit");
    p.kill("SIGTERM");
    await new Promise((r) => p.once("exit", r));
  }
}

try {
  await main();
} catch (err) {
  check(false, `api-test: ${err.stack ?? err}`);
}
await cleanup();
console.log(`api-test: ${ops.length} operations, ${passes} checks passed, ${failures} failed`);
process.exit(failures === 0 ? 0 : 1);
