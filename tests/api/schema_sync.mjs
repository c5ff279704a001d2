// SPDX-License-Identifier: Apache-2.0
// The plan document's JSON Schema (docs/plan.schema.json, draft 2020-12) as
// OpenAPI 3.0.3 components in server/openapi.json: the root becomes
// components.schemas.PlanDocument, each $defs entry the component of its name.
// 3.0.3's Schema Object is not JSON Schema 2020-12, so the translation is
// mechanical and narrow: "type": [T, "null"] becomes "type": T with
// "nullable": true, "const" a one-value "enum", "#/$defs/X" refs
// "#/components/schemas/X"; any keyword 3.0.3 lacks is an error.
//   node schema_sync.mjs --check   exit 1 when openapi.json differs (make api-test)
//   node schema_sync.mjs --write   rewrite those components in openapi.json
import { readFileSync, writeFileSync } from "node:fs";
import { isDeepStrictEqual } from "node:util";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const schemaPath = join(root, "docs", "plan.schema.json");
const openapiPath = join(root, "server", "openapi.json");

const KEEP = new Set([
  "type", "properties", "required", "items", "additionalProperties", "enum", "description",
  "title", "pattern", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minItems",
  "maxItems", "minLength", "maxLength", "oneOf", "anyOf", "allOf", "not", "default", "format",
  "$ref", "uniqueItems", "minProperties", "maxProperties", "multipleOf",
]);

function translate(node, where) {
  if (Array.isArray(node)) return node.map((x, i) => translate(x, `${where}/${i}`));
  if (node === null || typeof node !== "object") return node;
  const out = {};
  for (const [k, v] of Object.entries(node)) {
    const at = `${where}/${k}`;
    if (k === "const") {
      out.enum = [v];
    } else if (k === "type" && Array.isArray(v)) {
      const types = v.filter((t) => t !== "null");
      if (types.length !== 1 || v.length !== types.length + 1) {
        throw new Error(`${at}: 3.0.3 has one type (and nullable), not ${JSON.stringify(v)}`);
      }
      out.type = types[0];
      out.nullable = true;
    } else if (k === "$ref") {
      const m = /^#\/\$defs\/([A-Za-z0-9._-]+)$/.exec(v);
      if (!m) throw new Error(`${at}: only #/$defs/NAME refs translate, not ${v}`);
      out.$ref = `#/components/schemas/${m[1]}`;
    } else if (k === "properties") {
      out.properties = Object.fromEntries(
        Object.entries(v).map(([p, s]) => [p, translate(s, `${at}/${p}`)]));
    } else if (KEEP.has(k)) {
      out[k] = translate(v, at);
    } else {
      throw new Error(`${at}: keyword ${k} has no OpenAPI 3.0.3 form`);
    }
  }
  if (out.$ref !== undefined && Object.keys(out).length > 1) {
    throw new Error(`${where}: 3.0.3 ignores the siblings of $ref`);
  }
  return out;
}

/* The components the schema gives: name -> OpenAPI schema. */
export function planComponents() {
  const schema = JSON.parse(readFileSync(schemaPath, "utf8"));
  const { $schema, $id, $defs, ...rest } = schema;
  void $schema;
  void $id;
  const comps = { PlanDocument: translate(rest, "") };
  for (const [name, def] of Object.entries($defs ?? {})) {
    comps[name] = translate(def, `/$defs/${name}`);
  }
  return comps;
}

function main() {
  const mode = process.argv[2];
  if (mode !== "--check" && mode !== "--write") {
    console.error("usage: node schema_sync.mjs --check|--write");
    process.exit(2);
  }
  const doc = JSON.parse(readFileSync(openapiPath, "utf8"));
  const schemas = doc.components.schemas;
  const comps = planComponents();
  const stale = Object.keys(comps).filter((n) => !isDeepStrictEqual(schemas[n], comps[n]));
  if (mode === "--check") {
    if (stale.length > 0) {
      console.error(`schema_sync: server/openapi.json differs from docs/plan.schema.json in ` +
        `${stale.join(", ")}; run: node tests/api/schema_sync.mjs --write`);
      process.exit(1);
    }
    console.log(`schema_sync: ${Object.keys(comps).length} plan components match docs/plan.schema.json`);
    return;
  }
  Object.assign(schemas, comps);
  writeFileSync(openapiPath, JSON.stringify(doc, null, 1) + "\n");
  console.log(`schema_sync: wrote ${stale.length} of ${Object.keys(comps).length} components`);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) main();
