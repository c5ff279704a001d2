// Bundles src/ with esbuild into OUT (argv[2], default ../build/web):
// OUT/assets/app-HASH.js and app-HASH.css (content-hashed, served with an
// immutable cache) and OUT/index.html (served no-cache) that names them.
import * as esbuild from 'esbuild';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const out = resolve(process.argv[2] || join(here, '..', 'build', 'web'));
rmSync(out, { recursive: true, force: true });
mkdirSync(join(out, 'assets'), { recursive: true });

const result = await esbuild.build({
  entryPoints: { app: join(here, 'src', 'main.js') },
  bundle: true,
  minify: true,
  sourcemap: false,
  format: 'esm',
  target: ['chrome110', 'firefox110', 'safari16'],
  outdir: join(out, 'assets'),
  entryNames: '[name]-[hash]',
  assetNames: '[name]-[hash]',
  metafile: true,
  legalComments: 'none',
  logLevel: 'warning',
});

let js = '', css = '';
for (const [file, meta] of Object.entries(result.metafile.outputs)) {
  if (!meta.entryPoint) continue;
  js = basename(file);
  if (meta.cssBundle) css = basename(meta.cssBundle);
}
const html = readFileSync(join(here, 'src', 'index.html'), 'utf8')
  .replace('%APP_JS%', `assets/${js}`)
  .replace('%APP_CSS%', `assets/${css}`);
writeFileSync(join(out, 'index.html'), html);
console.log(`web: built ${out} (${js}, ${css})`);
