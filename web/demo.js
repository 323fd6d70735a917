// The demo page's functions, also what the browser test (web/test.html) runs: load a model with
// the roformer-wasm package, classify a sentence, and compare two sentences. With
// `options.workers` the model runs in Web Workers and every call answers with a Promise; the
// page awaits both kinds alike.
import init, { SentenceEncoder, TextClassifier, cosineSimilarity } from "../target/npm/package/index.js";

let ready = null;

/** Loads the WebAssembly module once; `options` as the package's `init` takes them. */
export function start(options) {
  ready ??= init(options);
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
  const classifier = await (files
    ? TextClassifier.fromFiles(files, options)
    : TextClassifier.fromUrl(url, { ...options, ...(onProgress ? { onProgress } : {}) }));
  const encoder = await classifier.sentenceEncoder();
  return { classifier, encoder, loadMs: performance.now() - started };
}

/** A sentence encoder alone (a sentence-transformers folder, say), from a URL or files. */
export async function loadEncoder({ url, files, options = {} }) {
  await start();
  return await (files ? SentenceEncoder.fromFiles(files, options) : SentenceEncoder.fromUrl(url, options));
}

/** `{label, score}` of one sentence, or one per sentence of an array. */
export async function classify(model, text) {
  const rows = await model.classifier.classify(Array.isArray(text) ? text : [text]);
  return Array.isArray(text) ? rows : rows[0];
}

/** The cosine similarity of two sentences' embeddings. */
export async function similarity(model, a, b) {
  const [x, y] = await model.encoder.encode([a, b]);
  return cosineSimilarity(x, y);
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
