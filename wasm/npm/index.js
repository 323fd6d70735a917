// roformer-wasm: the wasm-bindgen module (roformer_wasm.js) behind a small API that picks the
// relaxed-SIMD or the simd128 build, and can spread a model's calls over a pool of workers.
import initGlue, * as glue from "./roformer_wasm.js";

const isNode = globalThis.process?.release?.name === "node";

// A function (v128, v128, v128) -> v128 whose body is f32x4.relaxed_madd (0xfd, LEB128 of 0x105).
// It validates only where relaxed SIMD is on: Chromium 114+, and Node 20 (V8 11.3) only with
// --experimental-wasm-relaxed-simd.
// prettier-ignore
const RELAXED_PROBE = new Uint8Array([
  0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // "\0asm", version 1
  0x01, 0x08, 0x01, 0x60, 0x03, 0x7b, 0x7b, 0x7b, 0x01, 0x7b, // types: (v128 v128 v128) -> v128
  0x03, 0x02, 0x01, 0x00, // functions: one, of type 0
  0x0a, 0x0d, 0x01, 0x0b, 0x00, // code: one body of 11 bytes, no locals
  0x20, 0x00, 0x20, 0x01, 0x20, 0x02, 0xfd, 0x85, 0x02, 0x0b, // local.get 0 1 2, f32x4.relaxed_madd, end
]);
let relaxedValid;
const relaxedSupported = () => (relaxedValid ??= WebAssembly.validate(RELAXED_PROBE));

// V8 before 11.4 (Node 20's 11.3 under --experimental-wasm-relaxed-simd) validates the relaxed build but runs its
// int8 product wrongly, and differently from run to run: a probability off by up to 0.99 on SST-2 dev, where
// Chromium 156 (V8 14) stays within 0.054 of f32. No probe can show a fault that comes and goes, so the version
// decides. Browsers do not say theirs; Chromium shipped relaxed SIMD in 114, on V8 11.4.
const preShippingV8 = (() => {
  const v8 = globalThis.process?.versions?.v8;
  if (typeof v8 !== "string") return false;
  const [major, minor] = v8.split(".").map(Number);
  return major < 11 || (major === 11 && minor < 4);
})();

// Both names are written out literally so that bundlers (Vite, webpack 5) find and emit both files.
function packagedWasm(kind) {
  return kind === "relaxed"
    ? new URL("roformer_wasm_relaxed_bg.wasm", import.meta.url)
    : new URL("roformer_wasm_bg.wasm", import.meta.url);
}

// process.getBuiltinModule (Node 20.16+) keeps "node:" specifiers out of bundlers' sight; so does
// the variable in the fallback.
async function nodeBuiltin(name) {
  return globalThis.process.getBuiltinModule?.(name) ?? import(/* webpackIgnore: true */ /* @vite-ignore */ name);
}

const show = (value) => (typeof value === "string" ? JSON.stringify(value) : String(value));

function checkKeys(options, known) {
  if (options === null || typeof options !== "object") throw new Error("options must be an object");
  for (const key of Object.keys(options)) {
    if (!known.includes(key)) throw new Error(`options.${key}: unknown option (known: ${known.join(", ")})`);
  }
}

function simdKind(simd = "auto") {
  if (!["auto", "relaxed", "plain"].includes(simd)) {
    throw new Error(`options.simd must be "auto", "relaxed" or "plain", not ${show(simd)}`);
  }
  if (simd === "plain") return "plain";
  if (simd === "relaxed" && !relaxedSupported()) {
    throw new Error(
      'options.simd is "relaxed", but this engine does not validate relaxed SIMD (Chromium 114+ does; ' +
        'Node 20 without --experimental-wasm-relaxed-simd does not): use "auto" or "plain"',
    );
  }
  if (simd === "relaxed" && preShippingV8) {
    throw new Error(
      `options.simd is "relaxed", but this engine's V8 ${globalThis.process.versions.v8} predates relaxed SIMD's ` +
        'release (11.4) and computes its int8 dot products wrongly: use "auto" or "plain"',
    );
  }
  return relaxedSupported() && !preShippingV8 ? "relaxed" : "plain";
}

async function compile(source) {
  if (source instanceof WebAssembly.Module) return source;
  if (typeof source !== "string" && !(source instanceof URL)) return WebAssembly.compile(source);
  const url = new URL(source, globalThis.location?.href);
  // Node's fetch has no file: URLs.
  if (isNode && url.protocol === "file:") {
    const { readFile } = await nodeBuiltin("node:fs/promises");
    return WebAssembly.compile(await readFile(url));
  }
  let response;
  try {
    response = await fetch(url);
  } catch (e) {
    throw new Error(`roformer-wasm: cannot fetch ${url}: ${e.message}`);
  }
  if (!response.ok)
    throw new Error(`roformer-wasm: cannot fetch ${url}: HTTP ${response.status} ${response.statusText}`);
  const type = response.headers.get("Content-Type")?.split(";")[0].trim().toLowerCase();
  // compileStreaming refuses any other type; the fallback reads the whole file first.
  if (type === "application/wasm" && WebAssembly.compileStreaming) return WebAssembly.compileStreaming(response);
  console.warn(
    `roformer-wasm: ${url} is served as ${type || "no Content-Type"}, not application/wasm: compiling without streaming (slower)`,
  );
  return WebAssembly.compile(await response.arrayBuffer());
}

// This thread's instance: { simd, ready: Promise<{ module, exports }> } once init() is called.
let main = null;
let mainExports = null;
// The module pools use when this thread never called init(): the probe's pick.
let autoModule = null;

/** Loads the WebAssembly module on this thread. Resolves to `{ simd: "relaxed" | "plain" }`. */
export default async function init(options = {}) {
  checkKeys(options, ["simd", "wasm"]);
  const kind = simdKind(options.simd);
  if (main) {
    if (options.simd !== undefined && options.simd !== "auto" && kind !== main.simd) {
      throw new Error(`init: the ${main.simd} module is already loaded on this thread; it cannot switch to ${kind}`);
    }
    await main.ready;
    return { simd: main.simd };
  }
  const ready = compile(options.wasm ?? packagedWasm(kind)).then(async (module) => ({
    module,
    exports: await initGlue({ module_or_path: module }),
  }));
  main = { simd: kind, ready };
  try {
    mainExports = (await ready).exports;
  } catch (e) {
    main = null;
    throw e;
  }
  return { simd: kind };
}

/** The kind of the module init() loaded on this thread, or null before. */
export function simd() {
  return mainExports ? main.simd : null;
}

/** The bytes of this thread's WebAssembly memory (0 before init()). */
export function memoryBytes() {
  return mainExports?.memory.buffer.byteLength ?? 0;
}

/** The cosine similarity of two vectors (0 when either is all zeros, as the Rust crate's). */
export function cosineSimilarity(a, b) {
  if (a.length !== b.length) {
    throw new Error(`cosineSimilarity: the vectors differ in length (${a.length} and ${b.length})`);
  }
  let [dot, aa, bb] = [0, 0, 0];
  for (let i = 0; i < a.length; i++) {
    dot += a[i] * b[i];
    aa += a[i] * a[i];
    bb += b[i] * b[i];
  }
  const norm = Math.sqrt(aa * bb);
  return norm === 0 ? 0 : dot / norm;
}

// ---- The pool ----

function poolModule() {
  if (main) return main.ready.then((r) => r.module);
  autoModule ??= compile(packagedWasm(simdKind("auto"))).catch((e) => {
    autoModule = null;
    throw e;
  });
  return autoModule;
}

async function spawnWorker() {
  if (isNode) {
    const { Worker: NodeWorker } = await nodeBuiltin("node:worker_threads");
    // Not new URL("./worker.js", import.meta.url), which bundlers would take for an asset.
    const script = new URL(import.meta.url);
    script.pathname = script.pathname.replace(/[^/]*$/, "worker.js");
    // A worker takes Node's flags, but `node --input-type=module -e` would stop it.
    const execArgv = process.execArgv.filter(
      (arg, i, all) => !arg.startsWith("--input-type") && all[i - 1] !== "--input-type",
    );
    return new NodeWorker(script, { execArgv });
  }
  // Written out literally: this is the pattern Vite and webpack 5 recognise to bundle a worker.
  return new Worker(new URL("./worker.js", import.meta.url), { type: "module" });
}

let nextId = 0;
let nextHandle = 0;

// One worker and its calls in flight. A Node worker is unref()ed while idle, so that a script
// can end without free(), and ref()ed while a call is pending, so that it never ends mid-call.
class Channel {
  constructor(worker) {
    this.worker = worker;
    this.pending = new Map();
    this.failure = null;
    const fail = (message) => this.fail(`roformer-wasm: a worker stopped: ${message}`);
    if (isNode) {
      worker.on("message", (data) => this.receive(data));
      worker.on("error", (e) => fail(e.message));
      worker.on("exit", (code) => fail(`exit code ${code}`));
      worker.unref();
    } else {
      worker.onmessage = (event) => this.receive(event.data);
      worker.onerror = (event) =>
        fail(event.message || "its script failed to load (is worker.js served as JavaScript?)");
    }
  }

  call(message, transfer = [], onProgress = undefined) {
    if (this.failure) return Promise.reject(new Error(this.failure));
    const id = nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject, onProgress });
      if (this.pending.size === 1) this.worker.ref?.();
      try {
        this.worker.postMessage({ ...message, id }, transfer);
      } catch (e) {
        this.settle(id);
        reject(e);
      }
    });
  }

  receive({ id, value, error, progress }) {
    const call = this.pending.get(id);
    if (!call) return;
    if (progress) {
      // As on the main thread: an error the callback throws does not stop the load.
      try {
        call.onProgress?.(...progress);
      } catch {}
      return;
    }
    this.settle(id);
    if (error === undefined) call.resolve(value);
    else call.reject(new Error(error));
  }

  settle(id) {
    this.pending.delete(id);
    if (this.pending.size === 0) this.worker.unref?.();
  }

  fail(message) {
    this.failure ??= message;
    for (const call of this.pending.values()) call.reject(new Error(this.failure));
    this.pending.clear();
    this.worker.unref?.();
  }

  terminate(message) {
    this.fail(message);
    this.worker.terminate();
  }
}

// Contiguous chunks of `items`, at most `n` and none empty, balanced by `weight`.
function split(items, weight, n) {
  const k = Math.min(n, items.length);
  const weights = items.map(weight);
  const total = weights.reduce((a, b) => a + b, 0);
  const chunks = [];
  let [start, sum] = [0, 0];
  for (let i = 0; i < items.length; i++) {
    sum += weights[i];
    const toOpen = k - chunks.length - 1;
    if (toOpen > 0 && (sum >= (total * (chunks.length + 1)) / k || items.length - i - 1 === toOpen)) {
      chunks.push(items.slice(start, i + 1));
      start = i + 1;
    }
  }
  chunks.push(items.slice(start));
  return chunks;
}

// The workers of one loaded model, and of the encoders derived from it: they end with the last
// of those objects to be freed.
class Pool {
  constructor(channels) {
    this.channels = channels;
    this.users = 0;
  }

  static async open(n) {
    return new Pool((await Promise.all(Array.from({ length: n }, spawnWorker))).map((w) => new Channel(w)));
  }

  // The model, loaded on one worker after another, from one copy of the folder that moves from
  // worker to worker (transferred, not copied): the first fetches it (from a URL) or is given
  // the pool's own copy of the caller's files, and each hands it back with its answer. The page
  // never holds more than that one copy beside the caller's, and it is let go at the end.
  async loadInTurn(message, source, onProgress) {
    let files = source.files && ownCopy(source.files);
    let info;
    for (const [i, channel] of this.channels.entries()) {
      const what = files ? { files } : { url: source.url };
      const transfer = files ? [...new Set(Object.values(files).map((b) => b?.buffer))].filter((b) => b instanceof ArrayBuffer) : [];
      const reply = await channel.call(
        { ...message, ...what, progress: i === 0 && !!onProgress },
        transfer,
        i === 0 ? onProgress : undefined,
      );
      info ??= reply.info;
      files = reply.files;
    }
    return info;
  }

  broadcast(message, onProgress) {
    return Promise.all(
      this.channels.map((c, i) =>
        c.call({ ...message, progress: i === 0 && !!onProgress }, [], i === 0 ? onProgress : undefined),
      ),
    );
  }

  // Each chunk to one worker, the least busy first, all at once; the rows back in order.
  async map(message, chunks) {
    const idle = [...this.channels].sort((a, b) => a.pending.size - b.pending.size);
    const rows = await Promise.all(chunks.map((input, i) => idle[i].call({ ...message, input })));
    return rows.flat();
  }

  terminate(message) {
    for (const channel of this.channels) channel.terminate(message);
  }
}

// What index.js keeps of each pooled object: its workers, its handle there, whether it was freed.
const states = new WeakMap();

function live(object) {
  const state = states.get(object);
  if (state.freed) throw new Error(`roformer-wasm: this ${state.kind} was freed`);
  return state;
}

// A call of `op` on `items`, split over the workers; its rows, in order.
async function run(object, op, items, weight, extra = {}) {
  const { pool, handle } = live(object);
  if (items.length === 0) return [];
  return pool.map({ op, handle, ...extra }, split(items, weight, pool.channels.length));
}

function checkTexts(texts) {
  if (!Array.isArray(texts)) throw new Error("texts must be an array of strings");
  texts.forEach((text, i) => {
    if (typeof text !== "string") throw new Error(`texts[${i}] is not a string`);
  });
}

// Weighed by characters, plus one for the tokens every text gets.
const textWeight = (text) => text.length + 1;

class Pooled {
  constructor(kind, pool, handle, info) {
    states.set(this, { kind, pool, handle, info, freed: false });
    pool.users++;
  }

  /** The bytes of WebAssembly memory of all this object's workers together. */
  async memoryBytes() {
    const sizes = await Promise.all(live(this).pool.channels.map((c) => c.call({ op: "memory" })));
    return sizes.reduce((a, b) => a + b, 0);
  }

  /** Ends the workers once the last object sharing them is freed; calls after free() reject. */
  free() {
    const state = states.get(this);
    if (state.freed) return;
    state.freed = true;
    const { pool, handle } = state;
    if (--pool.users === 0) pool.terminate("roformer-wasm: the workers were ended by free()");
    else for (const channel of pool.channels) channel.call({ op: "free", handle }).catch(() => {});
  }
}
if (Symbol.dispose) Pooled.prototype[Symbol.dispose] = Pooled.prototype.free;

class PooledSentenceEncoder extends Pooled {
  constructor(pool, handle, info) {
    super("SentenceEncoder", pool, handle, info);
  }

  get dim() {
    return states.get(this).info.dim;
  }

  get promptNames() {
    return [...states.get(this).info.promptNames];
  }

  async encode(texts, prompt = undefined) {
    checkTexts(texts);
    return run(this, "encode", texts, textWeight, { prompt });
  }
}

class PooledTextClassifier extends Pooled {
  constructor(pool, handle, info) {
    super("TextClassifier", pool, handle, info);
  }

  get labels() {
    return [...states.get(this).info.labels];
  }

  async classify(texts) {
    checkTexts(texts);
    return run(this, "classify", texts, textWeight);
  }

  async classifyPairs(pairs) {
    // Checked here, with the Rust side's message, so that the index is the caller's.
    if (!Array.isArray(pairs)) throw new Error("pairs must be an array of [text, textPair] arrays");
    pairs.forEach((pair, i) => {
      if (!(Array.isArray(pair) && pair.length === 2 && typeof pair[0] === "string" && typeof pair[1] === "string")) {
        throw new Error(`pairs[${i}] is not a [text, textPair] array of two strings`);
      }
    });
    return run(this, "classifyPairs", pairs, ([a, b]) => a.length + b.length + 1);
  }

  /** The encoder under this classifier (mean pooling), on the same workers. */
  async sentenceEncoder() {
    const { pool, handle: from } = live(this);
    const handle = nextHandle++;
    const [info] = await pool.broadcast({ op: "encoder", from, handle });
    return new PooledSentenceEncoder(pool, handle, info);
  }
}

async function openPool(kind, source, options, n) {
  const { workers, ...rest } = options;
  // A function cannot be posted: worker 0 reports progress, and it is called here.
  const onProgress = typeof rest.onProgress === "function" ? rest.onProgress : undefined;
  if (onProgress) delete rest.onProgress;
  if (typeof source.url === "string" && globalThis.location) {
    // A worker would resolve a relative URL against its script's, not the page's.
    source = { url: new URL(source.url, globalThis.location.href).href };
  }
  const module = await poolModule();
  const pool = await Pool.open(n);
  const handle = nextHandle++;
  try {
    const load = { op: "load", module, kind, handle, options: rest };
    const shared = source.files && sharedWeights(source.files);
    const info = shared
      ? (await pool.broadcast({ ...load, files: shared }, onProgress))[0].info
      : await pool.loadInTurn(load, source, onProgress);
    return new (kind === "TextClassifier" ? PooledTextClassifier : PooledSentenceEncoder)(pool, handle, info);
  } catch (e) {
    pool.terminate("roformer-wasm: the load failed");
    throw e;
  }
}

// The caller's files as the pool's own Uint8Arrays, each on a buffer of its own, to be moved
// from worker to worker: the caller's arrays stay theirs, untouched.
function ownCopy(files) {
  if (files === null || typeof files !== "object") return files;
  const copy = {};
  for (const [path, bytes] of Object.entries(files)) {
    // Not bytes.slice(): on a Node Buffer that is a view of the same memory, not a copy.
    if (bytes instanceof Uint8Array) copy[path] = new Uint8Array(bytes);
    else if (bytes instanceof ArrayBuffer) copy[path] = new Uint8Array(bytes.slice(0));
    else copy[path] = bytes; // not bytes: the worker's load names it in its error
  }
  return copy;
}

// On a cross-origin isolated page, the weight files copied once into shared memory, which every
// worker reads at the same time: no copy per worker, and the workers load in parallel. Elsewhere
// null, and the workers load in turn (Pool.loadInTurn).
function sharedWeights(files) {
  if (!globalThis.crossOriginIsolated || typeof SharedArrayBuffer !== "function") return null;
  if (files === null || typeof files !== "object") return null;
  const shared = { ...files };
  for (const [path, bytes] of Object.entries(files)) {
    if (!path.endsWith(".safetensors")) continue;
    const view = bytes instanceof ArrayBuffer ? new Uint8Array(bytes) : bytes;
    if (!(view instanceof Uint8Array) || view.buffer instanceof SharedArrayBuffer) continue;
    shared[path] = new Uint8Array(new SharedArrayBuffer(view.byteLength));
    shared[path].set(view);
  }
  return shared;
}

function workerCount(options) {
  const n = options?.workers;
  // As the module's options: null is absent.
  if (n === undefined || n === null) return 0;
  if (!Number.isInteger(n) || n < 0)
    throw new Error(`options.workers must be a whole number of at least 0, not ${show(n)}`);
  return n;
}

function withoutWorkers(options) {
  if (options === null || typeof options !== "object" || !("workers" in options)) return options;
  const { workers, ...rest } = options;
  return rest;
}

function needInit() {
  if (!mainExports) throw new Error("roformer-wasm: call `await init()` before loading a model without workers");
}

function fromFiles(kind, Glue, files, options) {
  let n;
  try {
    n = workerCount(options);
  } catch (e) {
    return Promise.reject(e);
  }
  if (n > 0) return openPool(kind, { files }, options, n);
  needInit();
  return Glue.fromFiles(files, withoutWorkers(options));
}

async function fromUrl(kind, Glue, baseUrl, options) {
  const n = workerCount(options);
  if (n > 0) return openPool(kind, { url: baseUrl }, options, n);
  needInit();
  return Glue.fromUrl(baseUrl, withoutWorkers(options));
}

/**
 * A sequence classifier. With `options.workers` n ≥ 1, fromFiles and fromUrl give a Promise of a
 * pooled classifier; else the module's own object, as today (fromFiles synchronously).
 */
export class TextClassifier {
  constructor() {
    throw new TypeError("use TextClassifier.fromFiles or TextClassifier.fromUrl");
  }

  static fromFiles(files, options) {
    return fromFiles("TextClassifier", glue.TextClassifier, files, options);
  }

  static fromUrl(baseUrl, options) {
    return fromUrl("TextClassifier", glue.TextClassifier, baseUrl, options);
  }

  // Both kinds of object are TextClassifiers.
  static [Symbol.hasInstance](value) {
    return value instanceof glue.TextClassifier || value instanceof PooledTextClassifier;
  }
}

/** Sentence embeddings, loaded as TextClassifier is. */
export class SentenceEncoder {
  constructor() {
    throw new TypeError("use SentenceEncoder.fromFiles or SentenceEncoder.fromUrl");
  }

  static fromFiles(files, options) {
    return fromFiles("SentenceEncoder", glue.SentenceEncoder, files, options);
  }

  static fromUrl(baseUrl, options) {
    return fromUrl("SentenceEncoder", glue.SentenceEncoder, baseUrl, options);
  }

  static [Symbol.hasInstance](value) {
    return value instanceof glue.SentenceEncoder || value instanceof PooledSentenceEncoder;
  }
}
