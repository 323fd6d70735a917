// See memory.html. The page's own copy of the files (source=files) is dropped after the load, as
// an application that keeps only the model would, and garbage-collected where the page may (gc()).
const q = new URLSearchParams(location.search);
const model = q.get('model') ?? 'base';
const dtype = q.get('dtype') ?? 'f32';
const workers = Number(q.get('workers') ?? 0);
const source = q.get('source') ?? 'files';
const FILES = ['config.json', 'model.safetensors', 'vocab.txt', 'tokenizer_config.json'];

async function main() {
  const mod = await import('/npm/index.js');
  if (workers === 0) await mod.default({});
  const options = { workers, ...(dtype === 'f32' ? {} : { quantize: dtype }) };
  const start = performance.now();
  let clf;
  if (source === 'url') {
    clf = await mod.TextClassifier.fromUrl(`/models/${model}`, options);
  } else {
    let files = {};
    await Promise.all(FILES.map(async (name) => {
      const res = await fetch(`/models/${model}/${name}`);
      if (!res.ok) throw new Error(`${name}: HTTP ${res.status}`);
      files[name] = new Uint8Array(await res.arrayBuffer());
    }));
    clf = await mod.TextClassifier.fromFiles(files, options);
    files = null;
  }
  const load_ms = performance.now() - start;
  const [prediction] = await clf.classify(['a gorgeous , witty movie .']);
  globalThis.gc?.();
  await new Promise((ok) => setTimeout(ok, 500));
  const wasm_bytes = workers ? await clf.memoryBytes() : mod.memoryBytes();
  return { model, dtype, workers, source, crossOriginIsolated, load_ms, wasm_bytes, label: prediction.label, gc: typeof globalThis.gc };
}

main().then(
  (r) => { window.result = r; document.getElementById('out').textContent = JSON.stringify(r, null, 2); },
  (e) => { window.result = { error: String(e?.stack ?? e) }; document.getElementById('out').textContent = String(e?.stack ?? e); },
);
