#!/usr/bin/env node
// What a model costs in memory, natively and in headless Chromium. Run: node scripts/bench/bench_memory.mjs (setup below)
/**
 * Prints peak and settled memory of one model folder (default: the base-size classifier bench_e2e.py makes) at each
 * precision:
 * - natively: the maximum resident set of `classify` on one sentence (/usr/bin/time), and of `roformer-serve` once it
 *   answers /health (peak and settled, from /proc/PID/status);
 * - in Chromium: the WebAssembly memory of every instance (the page's own with 0 workers, else the workers'), and the
 *   whole tab's (the renderer process's peak and settled resident set, JavaScript's copies of the file included), with
 *   0, 1, 2 and 4 workers, from files the page fetched (`files`) or from the URL (`url`).
 *
 * Setup, once:
 *   .venv/bin/python scripts/bench/bench_e2e.py --skip-peers     # writes target/bench-e2e/base (or pass --model DIR)
 *   cargo build --release --example classify -p roformer && cargo build --release -p roformer-serve
 *   bash scripts/build/build_wasm.sh && (cd web && npm ci)        # target/npm/package, playwright-core
 * Run (alone: nothing else on the machine):
 *   node scripts/bench/bench_memory.mjs [--model DIR] [--only native|browser] [--dtypes f32,int8,bf16]
 *        [--workers 0,1,2,4] [--sources files,url] [--isolated]   # --isolated: COOP/COEP, so shared memory exists
 *        [--pkg DIR]                                              # another unpacked npm package (an earlier build)
 * Writes target/bench-memory/results.json (or --out NAME there), and a result file under benchmarks/results/
 * (`"kind": "memory"`, one row per measurement; benchmarks/README.md gives the schema); --no-result-file leaves it out.
 */
import { spawn, spawnSync, execSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { systemRow, writeResult } from './result_file.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const args = process.argv.slice(2);
const opt = (name, dflt) => (args.includes(name) ? args[args.indexOf(name) + 1] : dflt);
const MODEL = path.resolve(opt('--model', path.join(ROOT, 'target', 'bench-e2e', 'base')));
const only = opt('--only', null);
const dtypes = opt('--dtypes', 'f32,int8,bf16').split(',');
const workerCounts = opt('--workers', '0,1,2,4').split(',').map(Number);
const sources = opt('--sources', 'files,url').split(',');
const isolated = args.includes('--isolated');
const OUT = path.join(ROOT, 'target', 'bench-memory');
const MIB = 2 ** 20;
const fileBytes = fs.statSync(path.join(MODEL, 'model.safetensors')).size;
const mib = (bytes) => (bytes / MIB).toFixed(0);
const ratio = (bytes) => (bytes / fileBytes).toFixed(2);
fs.mkdirSync(OUT, { recursive: true });

/** VmHWM and VmRSS of a process, in bytes. */
function status(pid) {
  const text = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (key) => Number(text.match(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm'))?.[1] ?? 0) * 1024;
  return { peak: kib('VmHWM'), settled: kib('VmRSS') };
}

const rows = [];

// ---- native
async function native() {
  const classify = path.join(ROOT, 'target', 'release', 'examples', 'classify');
  const serve = path.join(ROOT, 'target', 'release', 'roformer-serve');
  const one = path.join(OUT, 'one.tsv');
  fs.writeFileSync(one, 'sentence\na gorgeous , witty movie .\n');
  for (const dtype of dtypes) {
    const quantize = dtype === 'f32' ? 'none' : dtype;
    const run = spawnSync('/usr/bin/time', ['-f', '%M %e', classify, '--model', MODEL, '--input', one, '--text-col', 'sentence',
      '--quantize', quantize], { encoding: 'utf8' });
    if (run.status !== 0) throw new Error(`classify --quantize ${quantize} failed:\n${run.stderr}`);
    const [kib, seconds] = run.stderr.trim().split('\n').pop().split(' ').map(Number);
    rows.push({ where: 'native', what: 'classify, one sentence', dtype, peak: kib * 1024, wall_s: seconds });

    const port = 20000 + Math.floor(Math.random() * 20000);
    const child = spawn(serve, ['--model', MODEL, '--port', String(port), '--host', '127.0.0.1', '--quantize', quantize],
      { stdio: ['ignore', 'ignore', 'pipe'] });
    let log = '';
    child.stderr.on('data', (d) => (log += d));
    const start = performance.now();
    for (;;) {
      if (child.exitCode !== null) throw new Error(`roformer-serve exited:\n${log}`);
      const ok = await fetch(`http://127.0.0.1:${port}/health`).then((r) => r.ok, () => false);
      if (ok) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    const ready_s = (performance.now() - start) / 1e3;
    const s = status(child.pid);
    child.kill();
    rows.push({ where: 'native', what: 'roformer-serve, after load', dtype, ...s, wall_s: ready_s });
  }
}

// ---- browser
async function browser() {
  const { chromium } = createRequire(path.join(ROOT, 'web', 'package.json'))('playwright-core');
  const PKG = path.resolve(opt('--pkg', path.join(ROOT, 'target', 'npm', 'package')));
  if (!fs.existsSync(path.join(PKG, 'index.js'))) throw new Error('target/npm/package is missing: run scripts/build/build_wasm.sh');
  const ROUTES = { '/web/': path.join(ROOT, 'web'), '/npm/': PKG, '/models/base/': MODEL };
  const TYPES = { '.html': 'text/html', '.js': 'text/javascript', '.wasm': 'application/wasm', '.json': 'application/json' };
  const server = http.createServer((req, res) => {
    const url = decodeURIComponent(new URL(req.url, 'http://x').pathname);
    const prefix = Object.keys(ROUTES).find((p) => url.startsWith(p));
    const file = prefix && path.join(ROUTES[prefix], url.slice(prefix.length));
    if (!file || !file.startsWith(ROUTES[prefix]) || !fs.existsSync(file) || !fs.statSync(file).isFile()) {
      res.writeHead(404).end();
      return;
    }
    const headers = { 'Content-Type': TYPES[path.extname(file)] ?? 'application/octet-stream',
      'Content-Length': fs.statSync(file).size, 'Cache-Control': 'no-store' };
    if (isolated) Object.assign(headers, { 'Cross-Origin-Opener-Policy': 'same-origin',
      'Cross-Origin-Embedder-Policy': 'require-corp', 'Cross-Origin-Resource-Policy': 'same-origin' });
    res.writeHead(200, headers);
    fs.createReadStream(file).pipe(res);
  });
  await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
  const base = `http://127.0.0.1:${server.address().port}`;
  const FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
    '--disable-component-update', '--disable-sync', '--renderer-process-limit=1', '--js-flags=--expose-gc'];
  for (const source of sources) for (const dtype of dtypes) for (const workers of workerCounts) {
    if (source === 'url' && workers === 0 && sources.includes('files')) continue; // the same load as files
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-memory-chromium-'));
    const context = await chromium.launchPersistentContext(dir, { executablePath: '/usr/bin/chromium', headless: true, args: FLAGS });
    try {
      const page = context.pages()[0] ?? (await context.newPage());
      page.on('console', (m) => m.type() === 'error' && !m.text().startsWith('Failed to load resource') && console.error(`  [page] ${m.text()}`));
      await page.goto(`${base}/web/bench/memory.html?${new URLSearchParams({ dtype, workers, source })}`);
      await page.waitForFunction(() => window.result, null, { timeout: 30 * 60e3, polling: 200 });
      const r = await page.evaluate(() => window.result);
      if (r.error) throw new Error(r.error);
      // The tab: the renderer process of this browser's profile (one renderer, by the flag above).
      // (One browser runs at a time, so every renderer is this one's.)
      const renderers = spawnSync('pgrep', ['-f', '--', '--type=renderer'], { encoding: 'utf8' }).stdout.trim().split('\n');
      const tab = renderers.filter((pid) => fs.existsSync(`/proc/${pid}`)).map(status).reduce((a, b) => (b.peak > a.peak ? b : a));
      if (r.gc !== 'function') console.log('  (no gc() in the page: the settled figure is before a collection)');
      rows.push({ where: 'browser', what: `${workers} workers, ${source}`, dtype, workers, source, wasm: r.wasm_bytes,
        peak: tab.peak, settled: tab.settled, load_ms: r.load_ms, isolated: r.crossOriginIsolated, label: r.label });
      console.log(`browser ${dtype} ${workers} workers ${source}: wasm ${mib(r.wasm_bytes)} MiB, tab peak ${mib(tab.peak)} MiB, ` +
        `settled ${mib(tab.settled)} MiB, load ${r.load_ms.toFixed(0)} ms`);
    } finally {
      await context.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }
  server.close();
}

if (os.loadavg()[0] > 0.5) console.log(`load average ${os.loadavg()[0].toFixed(2)}: other work is running`);
if (only !== 'browser') await native();
if (only !== 'native') await browser();

const cpu = fs.readFileSync('/proc/cpuinfo', 'utf8').match(/^model name\s*:\s*(.*)$/m)?.[1] ?? '?';
const chromiumVersion = only === 'native' ? null : execSync('/usr/bin/chromium --version 2>/dev/null').toString().match(/[\d.]+/)?.[0];
console.log(`\n${new Date().toISOString().slice(0, 10)}, ${cpu} (${os.cpus().length} cores)` +
  `${chromiumVersion ? `, Chromium ${chromiumVersion}` : ''}; ${path.relative(ROOT, MODEL)}/model.safetensors: ${mib(fileBytes)} MiB\n`);
console.log('| where | what | dtype | WebAssembly MiB | peak MiB (× file) | settled MiB | load |');
console.log('|---|---|---|---|---|---|---|');
for (const r of rows) {
  const load = r.load_ms !== undefined ? `${r.load_ms.toFixed(0)} ms` : `${r.wall_s.toFixed(2)} s`;
  console.log(`| ${r.where} | ${r.what} | ${r.dtype} | ${r.wasm ? mib(r.wasm) : ''} | ${mib(r.peak)} (${ratio(r.peak)}) | ` +
    `${r.settled ? mib(r.settled) : ''} | ${load} |`);
}
fs.writeFileSync(path.join(OUT, opt('--out', 'results.json')), JSON.stringify({ date: new Date().toISOString(), cpu, model: MODEL, file_bytes: fileBytes, isolated, rows }, null, 2));
if (!args.includes('--no-result-file')) {
  const version = fs.readFileSync(path.join(ROOT, 'Cargo.toml'), 'utf8').match(/^version = "([^"]+)"/m)?.[1] ?? null;
  const mibOf = (bytes) => (bytes ? Math.round(bytes / MIB) : null);
  const systems = rows.map((r) => systemRow(r.where === 'browser' ? 'roformer-wasm' : 'roformer', version, r.dtype,
    r.where === 'browser' ? `browser, ${r.what}, ${r.dtype}` : `${r.what}, ${r.dtype}`, null, {
      peak_mib: mibOf(r.peak), settled_mib: mibOf(r.settled), wasm_mib: mibOf(r.wasm), peak_over_file: Number(ratio(r.peak)),
      load_ms: r.load_ms ?? (r.wall_s !== undefined ? r.wall_s * 1e3 : null) }));
  const file = writeResult({ bench: 'scripts/bench/bench_memory.mjs', kind: 'memory', level: null,
    versions: { chromium: chromiumVersion, roformer: version }, systems,
    workload: `${path.relative(ROOT, MODEL)} (model.safetensors ${mib(fileBytes)} MiB): classify on one sentence (maximum RSS), ` +
      'roformer-serve once /health answers (peak and settled), and the browser tab with 0 to 4 workers' });
  console.log(`result file: ${path.relative(ROOT, file)}`);
}
