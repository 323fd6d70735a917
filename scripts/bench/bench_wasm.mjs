#!/usr/bin/env node
// transformers.js against roformer-wasm in headless Chromium on SST-2 dev. Run: node scripts/bench/bench_wasm.mjs (setup below)
/**
 * Browser speed comparison on SST-2 dev (872 sentences, length-sorted batches of 32), headless Chromium:
 * transformers.js (onnxruntime-web, f32 and q8) against roformer-wasm (f32 and int8), base and small models.
 *
 * Setup, once:
 *   apt-get install -y chromium && (cd web && npm ci)
 *   .venv/bin/python scripts/bench/export_tjs.py      # model folders under target/bench-wasm/models
 *   bash scripts/build/build_wasm.sh                  # target/wasm-pkg; without it the "ours" rows are skipped
 * Run:
 *   node scripts/bench/bench_wasm.mjs [--only tjs|ours] [--models small,base] [--runs 1] [--check] [--pkg target/wasm-pkg]
 *                               [--match 'tjs base q8 threads=2']   # only the rows whose label contains this
 *
 * Serves web/ (/web), target/wasm-pkg (/pkg), target/bench-wasm/models (/models), target/bench-wasm (/data) and
 * web/node_modules (/node_modules) on 127.0.0.1 with COOP/COEP (so threads work), runs each configuration in its
 * own fresh headless Chromium one after the other, prints a markdown table and writes target/bench-wasm/results.json.
 * Rows with 2 threads are transformers.js's own threading (onnxruntime-web workers), only if the page is
 * cross-origin isolated. --check compares logits with PyTorch's (target/bench-wasm/reference.json) instead.
 */
import { execSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const WEB = path.join(ROOT, 'web');
const OUT = path.join(ROOT, 'target', 'bench-wasm');
const { chromium } = createRequire(path.join(WEB, 'package.json'))('playwright-core');
const args = process.argv.slice(2);
const opt = (name, dflt) => (args.includes(name) ? args[args.indexOf(name) + 1] : dflt);
const PKG = path.resolve(opt('--pkg', path.join(ROOT, 'target', 'wasm-pkg')));
const only = opt('--only', null);
const models = opt('--models', 'small,base').split(',');
const runs = Number(opt('--runs', '1'));
const check = args.includes('--check');
const version = (pkg) => JSON.parse(fs.readFileSync(path.join(WEB, 'node_modules', pkg, 'package.json'))).version;

// ---- data: SST-2 dev in bench_e2e.py's order (stable sort by length in code points)
const tsv = opt('--data', path.join(ROOT, '..', 'shared', 'data', 'glue', 'SST-2', 'dev.tsv'));
const lines = fs.readFileSync(tsv, 'utf8').split('\n');
const col = lines[0].split('\t').indexOf('sentence');
const sentences = lines.slice(1).filter((l) => l.trim()).map((l) => l.split('\t')[col]);
const len = (s) => [...s].length;
sentences.sort((a, b) => len(a) - len(b));
fs.mkdirSync(OUT, { recursive: true });
fs.writeFileSync(path.join(OUT, 'sst2-dev.json'), JSON.stringify({ source: tsv, order: 'by length', sentences }));
for (const m of models) {
  if (!fs.existsSync(path.join(OUT, 'models', m, 'onnx', 'model_quantized.onnx'))) {
    console.error(`missing target/bench-wasm/models/${m}: run .venv/bin/python scripts/bench/export_tjs.py first`);
    process.exit(1);
  }
}

// ---- static server
const ROUTES = { '/web/': WEB, '/pkg/': PKG, '/models/': path.join(OUT, 'models'), '/data/': OUT, '/node_modules/': path.join(WEB, 'node_modules') };
const TYPES = { '.html': 'text/html', '.js': 'text/javascript', '.mjs': 'text/javascript', '.wasm': 'application/wasm', '.json': 'application/json' };
const server = http.createServer((req, res) => {
  const url = decodeURIComponent(new URL(req.url, 'http://x').pathname);
  const prefix = Object.keys(ROUTES).find((p) => url.startsWith(p));
  const file = prefix && path.join(ROUTES[prefix], url.slice(prefix.length));
  if (!file || !file.startsWith(ROUTES[prefix]) || !fs.existsSync(file) || !fs.statSync(file).isFile()) {
    res.writeHead(404).end();
    return;
  }
  res.writeHead(200, {
    'Content-Type': TYPES[path.extname(file)] ?? 'application/octet-stream',
    'Content-Length': fs.statSync(file).size,
    'Cache-Control': 'no-store',
    'Cross-Origin-Opener-Policy': 'same-origin',
    'Cross-Origin-Embedder-Policy': 'require-corp',
    'Cross-Origin-Resource-Policy': 'same-origin',
  });
  fs.createReadStream(file).pipe(res);
});
await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
const base = `http://127.0.0.1:${server.address().port}`;

// ---- one configuration = one fresh browser with a fresh profile
const FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];
async function runPage(params) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-wasm-chromium-'));
  const context = await chromium.launchPersistentContext(dir, { executablePath: '/usr/bin/chromium', headless: true, args: FLAGS });
  try {
    const page = context.pages()[0] ?? (await context.newPage());
    page.on('console', (m) => m.type() === 'error' && !m.text().startsWith('Failed to load resource') && console.error(`  [page] ${m.text()}`));
    page.on('crash', () => console.error('  [page] crashed'));
    page.on('response', (r) => r.status() >= 400 && !r.url().endsWith('/favicon.ico') && console.error(`  [page] HTTP ${r.status()} ${r.url()}`));
    await page.goto(`${base}/web/bench/bench.html?${new URLSearchParams(params)}`);
    await page.waitForFunction(() => window.result, null, { timeout: 60 * 60e3, polling: 500 });
    return await page.evaluate(() => window.result);
  } finally {
    await context.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

const haveOurs = fs.existsSync(path.join(PKG, 'roformer_wasm.js'));
if (!haveOurs && only !== 'tjs') console.log(`${path.relative(ROOT, PKG)}/roformer_wasm.js is missing: skipping the "ours" rows (build roformer-wasm first)`);
const LOAD = os.loadavg()[0]; // anything else running skews the numbers: warn
if (LOAD > 0.5) console.log(`load average ${LOAD.toFixed(2)}: other work is running, numbers will be off`);
const probe = await runPage({ probe: 1 });
const isolated = probe.crossOriginIsolated;
const configs = [];
for (const model of models) {
  if (only !== 'ours') {
    for (const dtype of ['f32', 'q8']) configs.push({ system: 'tjs', model, dtype, threads: 1 });
    if (isolated && !check) for (const dtype of ['f32', 'q8']) configs.push({ system: 'tjs', model, dtype, threads: 2 });
  }
  if (only !== 'tjs' && haveOurs) for (const dtype of ['f32', 'int8']) configs.push({ system: 'ours', model, dtype, threads: 1 });
}

const results = [];
const reference = check && JSON.parse(fs.readFileSync(path.join(OUT, 'reference.json')));
const match = opt('--match', '');
for (const c of configs) {
  const label = `${c.system} ${c.model} ${c.dtype} threads=${c.threads}`;
  if (!label.includes(match)) continue;
  process.stdout.write(`${label} ... `);
  const r = await runPage({ ...c, runs, ...(check ? { check: 1 } : {}) }).catch((e) => ({ error: `browser: ${e.message}` }));
  if (r.error) {
    console.log(`failed\n${r.error}`);
    results.push({ ...c, error: r.error });
    continue;
  }
  if (check) {
    // max |logits - PyTorch's| where the page gives logits (transformers.js); else the top score against softmax
    const ref = reference.models[c.model];
    const softmax = (row) => { const e = row.map((x) => Math.exp(x - Math.max(...row))); const s = e.reduce((a, b) => a + b); return e.map((x) => x / s); };
    const diff = r.check.logits
      ? Math.max(...r.check.logits.flatMap((row, i) => row.map((x, j) => Math.abs(x - ref.logits[i][j]))))
      : Math.max(...r.check.outputs.map((o, i) => Math.abs(o.score - Math.max(...softmax(ref.logits[i])))));
    const sameIds = r.check.input_ids ? JSON.stringify(r.check.input_ids) === JSON.stringify(ref.input_ids) : null;
    console.log(`${r.check.logits ? 'max abs logits diff' : 'max abs top-score diff'} ${diff.toExponential(2)}` +
      (sameIds === null ? '' : `, input_ids ${sameIds ? 'identical' : 'DIFFER'}`));
    results.push({ ...c, max_abs_diff: diff, same_input_ids: sameIds });
    continue;
  }
  console.log(`load ${r.load_ms.toFixed(0)} ms, ${r.sentences_per_s.toFixed(1)} sentences/s`);
  results.push({ ...c, load_ms: r.load_ms, sentences_per_s: r.sentences_per_s, passes: r.passes, labels: r.labels });
}
server.close();

// ---- report
const cpu = fs.readFileSync('/proc/cpuinfo', 'utf8').match(/^model name\s*:\s*(.*)$/m)?.[1] ?? '?';
const report = {
  date: new Date().toISOString().slice(0, 10),
  cpu, cores: os.cpus().length,
  chromium: execSync('/usr/bin/chromium --version 2>/dev/null').toString().match(/[\d.]+/)[0],
  transformers_js: version('@huggingface/transformers'),
  onnxruntime_web: version('onnxruntime-web'),
  cross_origin_isolated: isolated,
  load_average_at_start: LOAD,
  sentences: sentences.length,
};
const wasm = path.join(PKG, 'roformer_wasm_bg.wasm');
if (fs.existsSync(wasm)) {
  report.wasm_bytes = fs.statSync(wasm).size;
  report.wasm_gzip9_bytes = Number(execSync(`gzip -9 -c '${wasm}' | wc -c`).toString());
}
console.log(`\n${report.date}, ${cpu} (${report.cores} cores), Chromium ${report.chromium}, ` +
  `transformers.js ${report.transformers_js} (onnxruntime-web ${report.onnxruntime_web}), cross-origin isolated: ${isolated}, ` +
  `load average at start ${LOAD.toFixed(2)}`);
if (report.wasm_bytes) console.log(`roformer_wasm_bg.wasm: ${report.wasm_bytes} bytes, ${report.wasm_gzip9_bytes} gzip -9`);
if (!check) {
  console.log('\n| system | model | dtype | threads | load ms | sentences/s | ours/tjs |\n|---|---|---|---|---|---|---|');
  for (const r of results) {
    const peer = r.system === 'ours' && results.find((t) => t.system === 'tjs' && t.model === r.model && t.threads === 1 &&
      (t.dtype === 'q8') === (r.dtype === 'int8') && t.sentences_per_s);
    const ratio = peer && r.sentences_per_s ? (r.sentences_per_s / peer.sentences_per_s).toFixed(2) : '';
    // labels agreement with transformers.js at the same precision (the models are the same random-init weights)
    if (peer && r.labels) r.label_agreement_with_tjs = r.labels.filter((l, i) => l === peer.labels[i]).length / r.labels.length;
    console.log(r.error ? `| ${r.system} | ${r.model} | ${r.dtype} | ${r.threads} | failed | | |`
      : `| ${r.system} | ${r.model} | ${r.dtype} | ${r.threads} | ${r.load_ms.toFixed(0)} | ${r.sentences_per_s.toFixed(1)} | ${ratio} |`);
  }
  for (const r of results) if (r.label_agreement_with_tjs !== undefined)
    console.log(`${r.model} ${r.dtype}: labels agree with transformers.js on ${(100 * r.label_agreement_with_tjs).toFixed(1)}%`);
}
for (const r of results) delete r.labels;
fs.writeFileSync(path.join(OUT, check ? 'check.json' : 'results.json'), JSON.stringify({ ...report, rows: results }, null, 2));
