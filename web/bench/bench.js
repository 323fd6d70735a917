// One benchmark configuration per page load (see bench.html): load the model (timed, cold: wasm compile, model
// fetch and session/model construction included), one warm-up over the first `warmup` batches, then `runs` timed
// passes over all dev sentences in batches of `batch`, in the order of /data/sst2-dev.json (sorted by length, like
// scripts/bench/bench_e2e.py). `check=1` instead classifies /data/reference.json's sentences for a parity check.
const q = new URLSearchParams(location.search);
const system = q.get('system') ?? 'tjs';
const model = q.get('model') ?? 'small';
const dtype = q.get('dtype') ?? 'f32';
const quantized = dtype === 'q8' || dtype === 'int8';
const threads = Number(q.get('threads') ?? 1);
// ours: the package's module (auto: relaxed SIMD where the browser has it; plain: simd128) and its Web Workers
// (0: the page's thread).
const simd = q.get('simd') ?? 'auto';
const workers = Number(q.get('workers') ?? 0);
const sentenceCount = Number(q.get('sentences') ?? 0);
const batchSize = Number(q.get('batch') ?? 32);
const warmup = Number(q.get('warmup') ?? 3);
const runs = Number(q.get('runs') ?? 1);
const TJS = '/node_modules/@huggingface/transformers/dist/transformers.js';

async function loadTjs() {
  const { env, pipeline } = await import(TJS);
  env.allowRemoteModels = false;
  env.allowLocalModels = true;
  env.localModelPath = '/models/';
  env.useBrowserCache = false;
  // the onnxruntime-web wasm that transformers.js's bundle was built against (copied from onnxruntime-web/dist)
  env.backends.onnx.wasm.wasmPaths = '/node_modules/@huggingface/transformers/dist/';
  env.backends.onnx.wasm.numThreads = threads;
  const pipe = await pipeline('text-classification', model, { device: 'wasm', dtype: quantized ? 'q8' : 'fp32' });
  return {
    version: env.version,
    classify: (texts) => pipe(texts),
    async logits(texts) {
      const inputs = pipe.tokenizer(texts, { padding: true, truncation: true });
      const { logits } = await pipe.model(inputs);
      return { input_ids: inputs.input_ids.tolist().map((r) => r.map(Number)), logits: logits.tolist() };
    },
  };
}

async function loadOurs() {
  const mod = await import('/npm/index.js');
  const loaded = await mod.default({ simd });
  const files = {};
  await Promise.all(['config.json', 'model.safetensors', 'vocab.txt', 'tokenizer_config.json'].map(async (name) => {
    const res = await fetch(`/models/${model}/${name}`);
    if (!res.ok) throw new Error(`${name}: HTTP ${res.status}`);
    files[name] = new Uint8Array(await res.arrayBuffer());
  }));
  const clf = await mod.TextClassifier.fromFiles(files, { workers, ...(quantized ? { quantize: 'int8' } : {}) });
  return {
    version: loaded.simd,
    classify: async (texts) => clf.classify(texts),
    // the WebAssembly memory of every instance: the pool's workers, or the page's own
    memoryBytes: () => (workers ? clf.memoryBytes() : mod.memoryBytes()),
  };
}

async function main() {
  const info = { system, model, dtype, threads, simd, workers, batch: batchSize, crossOriginIsolated, userAgent: navigator.userAgent };
  if (q.has('probe')) return info;
  const start = performance.now();
  const sys = system === 'ours' ? await loadOurs() : await loadTjs();
  const load_ms = performance.now() - start;
  if (q.has('check')) {
    const { sentences } = await (await fetch('/data/reference.json')).json();
    const check = { outputs: await sys.classify(sentences) };
    if (sys.logits) Object.assign(check, await sys.logits(sentences));
    return { ...info, load_ms, check };
  }
  const all = (await (await fetch('/data/sst2-dev.json')).json()).sentences;
  // `sentences=N`: every (all/N)-th of the length-sorted list, so that the lengths keep their spread
  const sentences = sentenceCount ? Array.from({ length: sentenceCount }, (_, i) => all[Math.floor((i * all.length) / sentenceCount)]) : all;
  const batches = [];
  for (let i = 0; i < sentences.length; i += batchSize) batches.push(sentences.slice(i, i + batchSize));
  for (const b of batches.slice(0, warmup)) await sys.classify(b);
  const passes = [];
  let labels;
  for (let r = 0; r < runs; r++) {
    labels = [];
    const t = performance.now();
    for (const b of batches) {
      const out = await sys.classify(b);
      if (out.length !== b.length) throw new Error(`${out.length} outputs for ${b.length} texts`);
      for (const o of out) labels.push(o.label);
    }
    passes.push((performance.now() - t) / 1e3);
  }
  const pass_s = passes.sort((a, b) => a - b)[Math.floor(passes.length / 2)];
  const memory_bytes = sys.memoryBytes ? await sys.memoryBytes() : undefined;
  return { ...info, version: sys.version, load_ms, passes, sentences: labels.length, sentences_per_s: labels.length / pass_s, memory_bytes, labels };
}

main().then(
  (r) => { window.result = r; document.getElementById('out').textContent = JSON.stringify({ ...r, labels: undefined }, null, 2); },
  (e) => { window.result = { error: String(e?.stack ?? e) }; document.getElementById('out').textContent = String(e?.stack ?? e); },
);
