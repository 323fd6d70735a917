// The demo page's functions, also what the browser test (web/test.html) runs: load a model
// with the roformer-wasm package, classify a sentence, and compare two sentences.
import init, { SentenceEncoder, TextClassifier } from "../target/wasm-pkg/roformer_wasm.js";

let ready = null;

/** Loads the WebAssembly module once. */
export function start() {
  ready ??= init();
  return ready;
}

/**
 * A classifier and the encoder under it (sharing its weights), from a base URL or from a
 * plain object of files ({ "config.json": Uint8Array, ... }).
 * `onProgress(path, bytes)` hears of each file a URL load fetches.
 */
export async function loadModel({ url, files, options = {}, onProgress }) {
  await start();
  const started = performance.now();
  const classifier = files
    ? TextClassifier.fromFiles(files, options)
    : await TextClassifier.fromUrl(url, { ...options, ...(onProgress ? { onProgress } : {}) });
  const encoder = classifier.sentenceEncoder();
  return { classifier, encoder, loadMs: performance.now() - started };
}

/** A sentence encoder alone (a sentence-transformers folder, say), from a URL or files. */
export async function loadEncoder({ url, files, options = {} }) {
  await start();
  return files ? SentenceEncoder.fromFiles(files, options) : await SentenceEncoder.fromUrl(url, options);
}

/** `{label, score}` of one sentence. */
export function classify(model, text) {
  return model.classifier.classify([text])[0];
}

/** The cosine similarity of two sentences' embeddings. */
export function similarity(model, a, b) {
  const [x, y] = model.encoder.encode([a, b]);
  return cosine(x, y);
}

export function cosine(x, y) {
  let dot = 0, xx = 0, yy = 0;
  for (let i = 0; i < x.length; i++) {
    dot += x[i] * y[i];
    xx += x[i] * x[i];
    yy += y[i] * y[i];
  }
  return dot / Math.sqrt(xx * yy);
}

/** The files a folder picker (`<input type=file webkitdirectory>`) gave, by path inside the folder. */
export async function filesFromPicker(fileList) {
  const files = {};
  for (const file of fileList) {
    // "folder/1_Pooling/config.json" → "1_Pooling/config.json"
    const path = (file.webkitRelativePath || file.name).split("/").slice(1).join("/") || file.name;
    files[path] = new Uint8Array(await file.arrayBuffer());
  }
  return files;
}
