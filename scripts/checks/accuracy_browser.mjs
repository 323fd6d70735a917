#!/usr/bin/env node
// SST-2 dev accuracy of the built-in model through the npm package in headless Chromium. Run: node scripts/checks/accuracy_browser.mjs [MODEL_DIR] (after build_wasm.sh; setup as bench_wasm.mjs)
/**
 * Serves the built package (target/npm/package) and a model folder (default models/roformer-sst2) on 127.0.0.1,
 * loads it in a fresh page per WebAssembly build (relaxed SIMD, plain simd128), one Worker, at f32 and int8, and
 * prints each one's SST-2 dev accuracy and the largest change of a probability from f32: the browser figures of
 * models/roformer-sst2/README.md.
 *
 * Chromium, not Node: Node 20 runs only the simd128 build. Its V8 (11.3) validates relaxed SIMD under
 * --experimental-wasm-relaxed-simd, but there the relaxed int8 gave wrong and run-to-run different answers (|Δp| up
 * to 0.99 from f32 on SST-2 dev), so the package refuses the relaxed build on a V8 older than 11.4.
 */
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const { chromium } = createRequire(path.join(ROOT, 'web', 'package.json'))('playwright-core');
const model = path.resolve(process.argv[2] || path.join(ROOT, 'models', 'roformer-sst2'));
const tsv = path.join(ROOT, '..', 'shared', 'data', 'glue', 'SST-2', 'dev.tsv');
const rows = fs.readFileSync(tsv, 'utf8').split('\n').slice(1).filter((l) => l.trim()).map((l) => l.split('\t'));
const [texts, positive] = [rows.map((r) => r[0]), rows.map((r) => r[1] === '1')];

// The package under /npm/, the model folder under /model/, an empty page at /.
const roots = { '/npm/': path.join(ROOT, 'target', 'npm', 'package'), '/model/': model };
const types = { '.js': 'text/javascript', '.wasm': 'application/wasm' };
const server = http.createServer((req, res) => {
  if (req.url === '/') {
    res.writeHead(200, { 'content-type': 'text/html' });
    return res.end('<html></html>');
  }
  for (const [prefix, dir] of Object.entries(roots)) {
    const file = path.join(dir, req.url.slice(prefix.length));
    if (req.url.startsWith(prefix) && fs.existsSync(file)) {
      res.writeHead(200, { 'content-type': types[path.extname(file)] ?? 'application/octet-stream' });
      return res.end(fs.readFileSync(file));
    }
  }
  res.writeHead(404);
  res.end();
});
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const base = `http://127.0.0.1:${server.address().port}`;
const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox'] });

// A page loads one build, so each gets a fresh page.
for (const simd of ['relaxed', 'plain']) {
  const page = await browser.newPage();
  await page.goto(`${base}/`);
  const out = await page.evaluate(
    async ({ texts, simd }) => {
      const m = await import('/npm/index.js');
      const loaded = await m.default({ simd });
      const probabilities = { simd: loaded.simd };
      for (const quantize of ['none', 'int8']) {
        const classifier = await m.TextClassifier.fromUrl('/model/', { quantize, workers: 1 });
        const predictions = await classifier.classify(texts);
        // The positive class's probability.
        probabilities[quantize] = predictions.map((p) => (p.label === 'positive' ? p.score : 1 - p.score));
        classifier.free();
      }
      return probabilities;
    },
    { texts, simd },
  );
  const correct = (ps) => ps.filter((p, i) => p > 0.5 === positive[i]).length;
  const gap = Math.max(...out.int8.map((p, i) => Math.abs(p - out.none[i])));
  const n = texts.length;
  console.log(`chromium ${out.simd}: f32 ${correct(out.none)}/${n}, int8 ${correct(out.int8)}/${n}, largest |Δp| ${gap.toFixed(3)}`);
  await page.close();
}
await browser.close();
server.close();
