#!/usr/bin/env node
/**
 * The demo page stays responsive while a base-size model classifies: opens web/index.html in headless Chromium
 * with the browser benchmark's base model (12 layers, 768 wide), classifies 96 SST-2 dev sentences, and types into
 * the page's other field while its Worker runs. Real key presses (Playwright's keyboard, through Chromium's input
 * pipeline); the page logs each `input` event with the progress bar's value at that moment. Takes the screenshot
 * web/screenshot.png mid-classification, and fails unless keystrokes were handled while the bar stood between its
 * first and last value.
 *
 * Setup, as for scripts/bench/bench_wasm.mjs: (cd web && npm ci), .venv/bin/python scripts/bench/export_tjs.py,
 * bash scripts/build/build_wasm.sh. Run: node scripts/checks/demo_responsive.mjs [--model base|small]
 */
import fs from 'node:fs';
import http from 'node:http';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const { chromium } = createRequire(path.join(ROOT, 'web', 'package.json'))('playwright-core');
const args = process.argv.slice(2);
const model = args.includes('--model') ? args[args.indexOf('--model') + 1] : 'base';
const modelDir = `target/bench-wasm/models/${model}`;
for (const need of [`${modelDir}/model.safetensors`, 'target/npm/package/index.js', 'target/bench-wasm/sst2-dev.json']) {
  if (!fs.existsSync(path.join(ROOT, need))) {
    console.error(`missing ${need}: see the setup at the top of this script`);
    process.exit(1);
  }
}

const TYPES = { '.html': 'text/html', '.js': 'text/javascript', '.wasm': 'application/wasm', '.json': 'application/json' };
const server = http.createServer((req, res) => {
  const file = path.join(ROOT, decodeURIComponent(new URL(req.url, 'http://x').pathname));
  if (!file.startsWith(ROOT) || !fs.existsSync(file) || !fs.statSync(file).isFile()) return res.writeHead(404).end();
  res.writeHead(200, { 'Content-Type': TYPES[path.extname(file)] ?? 'application/octet-stream' });
  fs.createReadStream(file).pipe(res);
});
await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
const base = `http://127.0.0.1:${server.address().port}`;

const { sentences } = JSON.parse(fs.readFileSync(path.join(ROOT, 'target/bench-wasm/sst2-dev.json')));
const lines = Array.from({ length: 96 }, (_, i) => sentences[Math.floor((i * sentences.length) / 96)]);
const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'demo-responsive-'));
const context = await chromium.launchPersistentContext(profile, {
  executablePath: '/usr/bin/chromium', headless: true, viewport: { width: 900, height: 1000 },
  args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update'],
});
try {
  const page = context.pages()[0] ?? (await context.newPage());
  await page.goto(`${base}/web/index.html?model=/${modelDir}/`);
  await page.waitForFunction(() => document.getElementById('status').textContent.startsWith('Loaded'), null, { timeout: 300e3 });
  console.log(await page.textContent('#status'));
  await page.fill('#text', lines.join('\n'));
  await page.evaluate(() => {
    window.inputs = [];
    const bar = document.getElementById('working');
    document.getElementById('a').addEventListener('input', () => window.inputs.push({ t: performance.now(), value: bar.value, hidden: bar.hidden }));
  });
  const started = await page.evaluate(() => performance.now());
  await page.click('#classify');
  await page.fill('#a', '');
  await page.click('#a');
  await page.keyboard.type('typing while the model works', { delay: 40 });
  const shown = await page.textContent('#label');
  await page.screenshot({ path: path.join(ROOT, 'web', 'screenshot.png'), fullPage: true });
  await page.waitForFunction(() => !document.getElementById('label').textContent.startsWith('Classified'), null, { timeout: 600e3 });
  const ended = await page.evaluate(() => performance.now());
  const inputs = await page.evaluate(() => window.inputs);
  const during = inputs.filter((e) => !e.hidden && e.value > 0 && e.value < lines.length);
  const values = [...new Set(during.map((e) => e.value))];
  console.log(`${model}: ${lines.length} sentences classified in the page's Worker in ${((ended - started) / 1e3).toFixed(1)} s; ` +
    `${inputs.length} keystrokes handled, ${during.length} of them while the bar stood at ${values.join(', ')} of ${lines.length}`);
  console.log(`screenshot: web/screenshot.png, taken at "${shown}"`);
  if (during.length === 0 || values.length < 2) {
    console.error('FAIL: the page did not answer key presses while the model classified');
    process.exitCode = 1;
  }
} finally {
  await context.close();
  fs.rmSync(profile, { recursive: true, force: true });
  server.close();
}
