#!/usr/bin/env node
// transformers.js against roformer-wasm in headless Chromium on SST-2 dev. Run: node scripts/bench/bench_wasm.mjs (setup below)
/**
 * Browser speed comparison on SST-2 dev (872 sentences, length-sorted batches of 32), headless Chromium:
 * transformers.js (onnxruntime-web, f32 and q8; 1 and 2 threads) against roformer-wasm's npm package (f32 and
 * int8; its relaxed-SIMD and plain simd128 modules; 1 and 2 Web Workers), base and small models.
 *
 * Setup, once:
 *   apt-get install -y chromium && (cd web && npm ci)
 *   .venv/bin/python scripts/bench/export_tjs.py      # model folders under target/bench-wasm/models
 *   bash scripts/build/build_wasm.sh                  # target/npm/package; without it the "ours" rows are skipped
 * Run:
 *   node scripts/bench/bench_wasm.mjs [--only tjs|ours] [--models small,base] [--runs 1] [--check] [--pkg target/npm/package]
 *                               [--sentences N]   # N of the 872, evenly spread over the length-sorted list
 *                               [--match 'tjs base q8 threads=2']   # only the rows whose label contains this
 *
 * Serves web/ (/web), the unpacked npm package (/npm), target/bench-wasm/models (/models), target/bench-wasm (/data) and
 * web/node_modules (/node_modules) on 127.0.0.1 with COOP/COEP (so threads work), runs each configuration in its
 * own fresh headless Chromium one after the other, prints a markdown table and writes target/bench-wasm/results.json,
 * and a result file under benchmarks/results/ (family `wasm`; benchmarks/README.md gives the schema) that
 * scripts/bench/render_results.py turns into docs/speed.md's WebAssembly table; --no-result-file leaves it out.
 * transformers.js's 2 threads are onnxruntime-web's own workers, only if the page is cross-origin isolated; ours are
 * the package's `workers` option, which needs no isolation. --check compares logits with PyTorch's (target/bench-wasm/reference.json) instead.
 */
import { execSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { systemRow, writeResult } from './result_file.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const WEB = path.join(ROOT, 'web');
const OUT = path.join(ROOT, 'target', 'bench-wasm');
const { chromium } = createRequire(path.join(WEB, 'package.json'))('playwright-core');
const args = process.argv.slice(2);
const opt = (name, dflt) => (args.includes(name) ? args[args.indexOf(name) + 1] : dflt);
const PKG = path.resolve(opt('--pkg', path.join(ROOT, 'target', 'npm', 'package')));
const sentencesWanted = Number(opt('--sentences', '0'));
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
const ROUTES = { '/web/': WEB, '/npm/': PKG, '/models/': path.join(OUT, 'models'), '/data/': OUT, '/node_modules/': path.join(WEB, 'node_modules') };
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

const haveOurs = fs.existsSync(path.join(PKG, 'index.js'));
if (!haveOurs && only !== 'tjs') console.log(`${path.relative(ROOT, PKG)}/index.js is missing: skipping the "ours" rows (run scripts/build/build_wasm.sh first)`);
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
  if (only !== 'tjs' && haveOurs && !check) {
    for (const dtype of ['f32', 'int8']) for (const simd of ['auto', 'plain']) for (const workers of [1, 2])
      configs.push({ system: 'ours', model, dtype, threads: workers, simd, workers });
  }
  if (only !== 'tjs' && haveOurs && check) for (const dtype of ['f32', 'int8']) configs.push({ system: 'ours', model, dtype, threads: 1 });
}

const results = [];
const reference = check && JSON.parse(fs.readFileSync(path.join(OUT, 'reference.json')));
const match = opt('--match', '');
for (const c of configs) {
  const label = `${c.system} ${c.model} ${c.dtype} threads=${c.threads}${c.simd ? ` simd=${c.simd}` : ''}`;
  if (!label.includes(match)) continue;
  process.stdout.write(`${label} ... `);
  const r = await runPage({ ...c, runs, ...(sentencesWanted ? { sentences: sentencesWanted } : {}), ...(check ? { check: 1 } : {}) }).catch((e) => ({ error: `browser: ${e.message}` }));
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
  const module = r.version && c.system === 'ours' ? `, ${r.version} module` : '';
  const memory = r.memory_bytes ? `, ${(r.memory_bytes / 2 ** 20).toFixed(0)} MiB of wasm memory` : '';
  console.log(`load ${r.load_ms.toFixed(0)} ms, ${r.sentences_per_s.toFixed(1)} sentences/s${module}${memory}`);
  results.push({ ...c, module: c.system === 'ours' ? r.version : undefined, load_ms: r.load_ms, sentences_per_s: r.sentences_per_s,
    sentences: r.sentences, memory_bytes: r.memory_bytes, passes: r.passes, labels: r.labels });
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
  sentences: sentencesWanted || sentences.length,
  wasm: {},
};
for (const name of ['roformer_wasm_bg.wasm', 'roformer_wasm_relaxed_bg.wasm']) {
  const wasm = path.join(PKG, name);
  if (fs.existsSync(wasm)) report.wasm[name] = { bytes: fs.statSync(wasm).size, gzip9_bytes: Number(execSync(`gzip -9 -c '${wasm}' | wc -c`).toString()) };
}
console.log(`\n${report.date}, ${cpu} (${report.cores} cores), Chromium ${report.chromium}, ` +
  `transformers.js ${report.transformers_js} (onnxruntime-web ${report.onnxruntime_web}), cross-origin isolated: ${isolated}, ` +
  `load average at start ${LOAD.toFixed(2)}`);
for (const [name, w] of Object.entries(report.wasm)) console.log(`${name}: ${w.bytes} bytes, ${w.gzip9_bytes} gzip -9`);
if (!check) {
  // ours against transformers.js at the same precision: with the same number of threads, and at its best setting
  const tjs = (r, threads) => results.filter((t) => t.system === 'tjs' && t.model === r.model && t.sentences_per_s &&
    (t.dtype === 'q8') === (r.dtype === 'int8') && (threads === undefined || t.threads === threads));
  const ratio = (r, peers) => (peers.length && r.sentences_per_s ? (r.sentences_per_s / Math.max(...peers.map((t) => t.sentences_per_s))).toFixed(2) : '');
  console.log('\n| system | model | dtype | threads / workers | module | load ms | sentences/s | MiB | ours/tjs same threads | ours/tjs best |');
  console.log('|---|---|---|---|---|---|---|---|---|---|');
  for (const r of results) {
    const mib = r.memory_bytes ? (r.memory_bytes / 2 ** 20).toFixed(0) : '';
    const same = r.system === 'ours' ? ratio(r, tjs(r, r.threads)) : '';
    const best = r.system === 'ours' ? ratio(r, tjs(r)) : '';
    // labels agreement with transformers.js at the same precision (the models are the same random-init weights)
    const peer = r.system === 'ours' && tjs(r, 1)[0];
    if (peer && r.labels && peer.labels) r.label_agreement_with_tjs = r.labels.filter((l, i) => l === peer.labels[i]).length / r.labels.length;
    console.log(r.error ? `| ${r.system} | ${r.model} | ${r.dtype} | ${r.threads} | ${r.module ?? ''} | failed | | | | |`
      : `| ${r.system} | ${r.model} | ${r.dtype} | ${r.threads} | ${r.module ?? ''} | ${r.load_ms.toFixed(0)} | ${r.sentences_per_s.toFixed(1)} | ${mib} | ${same} | ${best} |`);
  }
  for (const r of results) if (r.label_agreement_with_tjs !== undefined)
    console.log(`${r.model} ${r.dtype} ${r.module} ${r.workers} workers: labels agree with transformers.js on ${(100 * r.label_agreement_with_tjs).toFixed(1)}%`);
}
for (const r of results) delete r.labels;
fs.writeFileSync(path.join(OUT, check ? 'check.json' : 'results.json'), JSON.stringify({ ...report, rows: results }, null, 2));
if (!check && !args.includes('--no-result-file')) {
  const ours = JSON.parse(fs.readFileSync(path.join(PKG, 'package.json'), 'utf8')).version;
  const plural = (n, word) => `${n} ${word}${n === 1 ? '' : 's'}`;
  const systems = results.filter((r) => !r.error).map((r) => (r.system === 'tjs'
    ? systemRow('transformers.js', report.transformers_js, r.dtype === 'q8' ? 'int8' : 'f32',
      `transformers.js ${r.dtype}, ${plural(r.threads, 'thread')}`, r.sentences_per_s, { model: r.model, threads: r.threads })
    : systemRow('roformer-wasm', ours, r.dtype, `roformer ${r.dtype}, ${r.module === 'relaxed' ? 'relaxed SIMD' : r.module}, ` +
      `${plural(r.workers, 'worker')}`, r.sentences_per_s, { model: r.model, threads: r.workers, module: r.module,
      label_agreement: r.label_agreement_with_tjs ?? null })));
  const file = writeResult({ bench: 'scripts/bench/bench_wasm.mjs', family: 'wasm', level: 'relaxed-simd, simd128',
    versions: { chromium: report.chromium, 'transformers.js': report.transformers_js, 'onnxruntime-web': report.onnxruntime_web, 'roformer-wasm': ours },
    workload: `SST-2 dev (${report.sentences} sentences) sorted by length, batches of 32, in headless Chromium; ${plural(runs, 'timed pass')} ` +
      'after 3 warm-up batches; base: a 12-layer, 768-wide random-init classifier; small: the bundled model',
    systems, run: `1; each row in a fresh browser; cross-origin isolated: ${isolated}; load average at start ${LOAD.toFixed(2)}` });
  console.log(`result file: ${path.relative(ROOT, file)}`);
}
