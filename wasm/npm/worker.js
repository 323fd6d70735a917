// A worker of a pool that index.js starts: one instance of the module index.js compiled and
// posted, and the models it loaded, by the handles index.js gave them. Requests run one at a
// time, in order; every failure goes back as its message.
import initGlue, { SentenceEncoder, TextClassifier, fetchFiles } from "./roformer_wasm.js";

const classes = { SentenceEncoder, TextClassifier };
const models = new Map();
let wasm = null;
let post;

function model(handle) {
  const found = models.get(handle);
  if (!found) throw new Error(`roformer-wasm worker: no model ${handle}`);
  return found;
}

function describe(loaded) {
  return loaded instanceof TextClassifier
    ? { labels: loaded.labels }
    : { dim: loaded.dim, promptNames: loaded.promptNames };
}

async function answer(request) {
  switch (request.op) {
    case "load": {
      wasm ??= await initGlue({ module_or_path: request.module });
      const options = { ...request.options };
      if (request.progress) options.onProgress = (path, bytes) => post({ id: request.id, progress: [path, bytes] });
      const Class = classes[request.kind];
      // From a URL, the folder is fetched here once, and handed back with the answer for the
      // pool's next worker: no worker fetches it again.
      const files = request.url === undefined ? request.files : await fetchFiles(request.url, options);
      if (request.url !== undefined) options.name ??= request.url.replace(/\/+$/, "");
      delete options.onProgress;
      const loaded = Class.fromFiles(files, options);
      models.set(request.handle, loaded);
      return { info: describe(loaded), files };
    }
    case "encoder": {
      const encoder = model(request.from).sentenceEncoder();
      models.set(request.handle, encoder);
      return describe(encoder);
    }
    case "classify":
      return model(request.handle).classify(request.input);
    case "classifyPairs":
      return model(request.handle).classifyPairs(request.input);
    case "encode":
      return model(request.handle).encode(request.input, request.prompt);
    case "memory":
      return wasm ? wasm.memory.buffer.byteLength : 0;
    case "free":
      models.get(request.handle)?.free();
      models.delete(request.handle);
      return null;
    default:
      throw new Error(`roformer-wasm worker: unknown request ${request.op}`);
  }
}

// Embeddings go back transferred, not copied: each row has a buffer of its own. So do the
// files a load was given or fetched, for the pool's next worker (shared memory is not moved).
function transferables(value) {
  if (value?.files) {
    const buffers = Object.values(value.files).map((bytes) => bytes?.buffer ?? bytes);
    return [...new Set(buffers.filter((b) => b instanceof ArrayBuffer))];
  }
  if (!Array.isArray(value) || !(value[0] instanceof Float32Array)) return [];
  return [...new Set(value.map((row) => row.buffer))];
}

const messageOf = (error) => (error instanceof Error ? error.message : String(error));

let queue = Promise.resolve();
function receive(request) {
  const { id } = request;
  queue = queue.then(async () => {
    let value;
    try {
      value = await answer(request);
    } catch (error) {
      return post({ id, error: messageOf(error) });
    }
    try {
      post({ id, value }, transferables(value));
    } catch (error) {
      post({ id, error: messageOf(error) });
    }
  });
}

// No top-level await: bundlers' worker formats (Vite's default iife) do not all take it.
if (globalThis.process?.release?.name === "node") {
  const builtin = (name) =>
    globalThis.process.getBuiltinModule?.(name) ?? import(/* webpackIgnore: true */ /* @vite-ignore */ name);
  Promise.resolve(builtin("node:worker_threads")).then(({ parentPort }) => {
    post = (message, transfer) => parentPort.postMessage(message, transfer);
    parentPort.on("message", receive);
  });
} else {
  post = (message, transfer) => self.postMessage(message, transfer);
  self.onmessage = (event) => receive(event.data);
}
