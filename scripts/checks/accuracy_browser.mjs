#!/usr/bin/env node
// SST-2 dev accuracy of the built-in model through the npm package in headless Chromium. Run: node scripts/checks/accuracy_browser.mjs [MODEL_DIR] (after build_wasm.sh; setup as bench_wasm.mjs)
/**
 * Serves the built package (target/npm/package) and a model folder (default models/roformer-sst2) on 127.0.0.1,
 * loads it in a fresh page per WebAssembly build (relaxed SIMD, plain simd128), one Worker, at f32 and int8, and
 * prints each one's SST-2 dev accuracy and the largest change of a probability from f32: the browser figures of
 * models/roformer-sst2/README.md.
 *
 * Chromium, not Node: Node 20 validates relaxed SIMD only under --experimental-wasm-relaxed-simd, and there (V8
 * 11.3, before relaxed SIMD shipped) the package's relaxed int8 gave wrong and run-to-run different answers (|Δp| up
 * to 0.99 from f32 on SST-2 dev, on this model and the one before it), where Chromium 156 gives 0.054.
 */
import fs from 'node:fs'; import http from 'node:http'; import path from 'node:path'; import { createRequire } from 'node:module';
const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..', '..'); const { chromium } = createRequire(path.join(ROOT,'web','package.json'))('playwright-core');
const model = process.argv[2] || path.join(ROOT,'models','roformer-sst2');
const rows = fs.readFileSync(path.join(ROOT,'..','shared','data','glue','SST-2','dev.tsv'),'utf8').split('\n').slice(1).filter(l=>l.trim()).map(l=>l.split('\t'));
const roots = { '/npm/': path.join(ROOT,'target','npm','package'), '/model/': model };
const server = http.createServer((req,res)=>{ for (const [p,d] of Object.entries(roots)) if (req.url.startsWith(p)) { const f=path.join(d,req.url.slice(p.length)); if (fs.existsSync(f)) { res.writeHead(200,{'content-type': f.endsWith('.js')?'text/javascript':f.endsWith('.wasm')?'application/wasm':'application/octet-stream'}); return res.end(fs.readFileSync(f)); } }
  if (req.url==='/') { res.writeHead(200,{'content-type':'text/html'}); return res.end('<html></html>'); } res.writeHead(404); res.end(); });
await new Promise(r=>server.listen(0,'127.0.0.1',r)); const base=`http://127.0.0.1:${server.address().port}`;
const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox'] });

for (const simd of ['relaxed','plain']) { const page = await browser.newPage(); await page.goto(base+'/');
 const out = await page.evaluate(async ({texts, simd}) => { const m = await import('/npm/index.js'); const l = await m.default({simd});
  const r = {simd: l.simd};
  for (const q of ['none','int8']) { const c = await m.TextClassifier.fromUrl('/model/', {quantize: q, workers: 1}); r[q] = (await c.classify(texts)).map(p=>p.label==='positive'?p.score:1-p.score); c.free(); }
  return r; }, {texts: rows.map(r=>r[0]), simd});
 const acc = (ps)=> ps.filter((p,i)=> (p>0.5) === (rows[i][1]==='1')).length;
 const gap = Math.max(...out.int8.map((p,i)=>Math.abs(p-out.none[i])));
 console.log(`chromium ${out.simd}: f32 ${acc(out.none)}/872, int8 ${acc(out.int8)}/872, largest |Δp| ${gap.toFixed(3)}`);
}
await browser.close(); server.close();
