// The npm package as a user installs it (scripts/checks/check_npm.sh installs the tarball into a
// scratch project and runs this file there with `node --test`), on the repository's fixtures
// (ROFORMER_REPO), against the Python references in their expected.json.
import test from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { createServer } from "node:http";
import { readFile, readdir } from "node:fs/promises";
import { join } from "node:path";
import init, { TextClassifier, SentenceEncoder, simd, memoryBytes, cosineSimilarity } from "roformer-wasm";

const repo = process.env.ROFORMER_REPO;
if (!repo) throw new Error("set ROFORMER_REPO to the repository root (scripts/checks/check_npm.sh does)");
const CLS = join(repo, "tests/fixtures/pipelines/cls");
const ST6 = join(repo, "tests/fixtures/sentence_transformers/st6_cls_dense");
// The bound the crate's own tests hold it to against transformers and sentence-transformers
// (tests/integration/pipelines.rs, sentence_transformers.rs).
const TOLERANCE = 1e-4;
// int8 against transformers' f32 probabilities with 8-bit weights, as the module's int8 kernel
// takes them (tests/integration/quantization.rs).
const INT8_BOUND = 0.08;
// bf16 against transformers' f32 probabilities: bf16 weights and inputs, summed in f32
// (BF16_BOUNDS in tests/integration/quantization.rs).
const BF16_BOUND = 0.03;
// The function of index.js: f32x4.relaxed_madd, valid only where relaxed SIMD is on.
const PROBE = [
  0, 97, 115, 109, 1, 0, 0, 0, 1, 8, 1, 96, 3, 123, 123, 123, 1, 123, 3, 2, 1, 0, 10, 13, 1, 11, 0, 32, 0, 32, 1, 32, 2,
  253, 133, 2, 11,
];

/** Every file of a fixture folder but expected.json, by its path inside it. */
async function folder(dir) {
  const files = {};
  for (const entry of await readdir(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile() || entry.name === "expected.json") continue;
    const path = join(entry.parentPath ?? entry.path, entry.name);
    files[
      path
        .slice(dir.length + 1)
        .split("\\")
        .join("/")
    ] = new Uint8Array(await readFile(path));
  }
  return files;
}

const expected = async (dir) => JSON.parse(await readFile(join(dir, "expected.json"), "utf8"));

/** The reference's label and probability for each case of a classifier's expected.json. */
function references(cases, labels) {
  return cases.map(({ scores }) => {
    const best = scores.indexOf(Math.max(...scores));
    return { label: labels[best], score: scores[best] };
  });
}

function assertClose(what, got, want, tolerance) {
  assert.equal(got.length, want.length, `${what}: lengths`);
  got.forEach((row, i) => {
    assert.equal(row.label, want[i].label, `${what} [${i}]: label`);
    const d = Math.abs(row.score - want[i].score);
    assert.ok(d <= tolerance, `${what} [${i}]: score ${row.score} vs ${want[i].score} (${d} > ${tolerance})`);
  });
}

function assertRows(what, got, want) {
  assert.equal(got.length, want.length, `${what}: rows`);
  got.forEach((row, i) => {
    assert.ok(row instanceof Float32Array, `${what}: row ${i} is a Float32Array`);
    assert.equal(row.length, want[i].length, `${what}: row ${i} length`);
    row.forEach((x, j) =>
      assert.ok(Math.abs(x - want[i][j]) < TOLERANCE, `${what}: row ${i} [${j}]: ${x} vs ${want[i][j]}`),
    );
  });
}

/** Runs an ES module script in a new Node process here (where node_modules has the package). */
function node(script, flags = []) {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [...flags, "--input-type=module", "-e", script],
      { timeout: 60_000 },
      (error, stdout, stderr) => resolve({ code: error ? (error.code ?? error.signal) : 0, stdout, stderr }),
    );
  });
}

const cls = await folder(CLS);
const st6 = await folder(ST6);
const clsWant = await expected(CLS);
const st6Want = await expected(ST6);
const texts = clsWant.texts.map((c) => c.input[0]);
const pairs = clsWant.pairs.map((c) => c.input);
const st6Texts = st6Want.texts;

test("init loads the simd128 module on request, once", async () => {
  assert.equal(simd(), null);
  assert.equal(memoryBytes(), 0);
  assert.throws(() => TextClassifier.fromFiles(cls), /call `await init\(\)`/);
  assert.deepEqual(await init({ simd: "plain" }), { simd: "plain" });
  assert.equal(simd(), "plain");
  assert.ok(memoryBytes() > 0);
  assert.deepEqual(await init(), { simd: "plain" });
  assert.deepEqual(await init({ simd: "plain" }), { simd: "plain" });
  await assert.rejects(init({ simd: "relaxed" }), (e) => e instanceof Error && /relaxed/.test(e.message));
  await assert.rejects(init({ simd: "fast" }), /options\.simd/);
  await assert.rejects(init({ simdd: "plain" }), /options\.simdd/);
});

test("init picks the relaxed-SIMD module exactly where the engine validates relaxed SIMD, from V8 11.4", async () => {
  const script = `
    import init, { TextClassifier, simd } from "roformer-wasm";
    import { readFile } from "node:fs/promises";
    const probe = WebAssembly.validate(new Uint8Array(${JSON.stringify(PROBE)}));
    const chosen = await init();
    const forced = await init({ simd: "relaxed" }).then(() => "ok", (e) => e.message);
    const files = {};
    for (const f of ["config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json"]) {
      files[f] = await readFile(${JSON.stringify(CLS)} + "/" + f);
    }
    const rows = TextClassifier.fromFiles(files).classify(${JSON.stringify(texts)});
    console.log(JSON.stringify({ probe, chosen, forced, simd: simd(), rows }));`;
  const want = references(clsWant.texts, ["negative", "neutral", "positive"]);
  const kinds = {};
  for (const flags of [[], ["--experimental-wasm-relaxed-simd"]]) {
    const { code, stdout, stderr } = await node(script, flags);
    assert.equal(code, 0, stderr);
    const out = JSON.parse(stdout);
    const [major, minor] = process.versions.v8.split(".").map(Number);
    const released = major > 11 || (major === 11 && minor >= 4);
    assert.equal(out.chosen.simd, out.probe && released ? "relaxed" : "plain", `flags ${flags}`);
    if (out.probe && !released) assert.match(out.forced, /predates relaxed SIMD's release/);
    assert.equal(out.simd, out.chosen.simd);
    assertClose(`${out.simd} module`, out.rows, want, TOLERANCE);
    kinds[flags.length ? "flag" : "plain"] = out.chosen.simd;
  }
  // Node 20's V8 (11.3) validates relaxed SIMD under --experimental-wasm-relaxed-simd, and runs it wrongly.
  if (process.versions.node.startsWith("20.")) assert.deepEqual(kinds, { plain: "plain", flag: "plain" });
});

test("classify and classifyPairs match transformers", () => {
  const classifier = TextClassifier.fromFiles(cls);
  assert.ok(classifier instanceof TextClassifier);
  assert.deepEqual(classifier.labels, ["negative", "neutral", "positive"]);
  assertClose("texts", classifier.classify(texts), references(clsWant.texts, classifier.labels), TOLERANCE);
  assertClose("pairs", classifier.classifyPairs(pairs), references(clsWant.pairs, classifier.labels), TOLERANCE);
  classifier.free();
});

for (const [quantize, bound] of [
  ["int8", INT8_BOUND],
  ["bf16", BF16_BOUND],
]) {
  test(`${quantize} keeps the reference's labels, its scores within the native ${quantize} bound`, () => {
    const f32 = TextClassifier.fromFiles(cls);
    const q = TextClassifier.fromFiles(cls, { quantize });
    assertClose(`${quantize} texts`, q.classify(texts), references(clsWant.texts, q.labels), bound);
    assertClose(`${quantize} pairs`, q.classifyPairs(pairs), references(clsWant.pairs, q.labels), bound);
    assert.notDeepEqual(q.classify(texts), f32.classify(texts), `${quantize} gave f32's answers: it did not run`);
  });
}

test("a sentence-transformers folder encodes as sentence-transformers", () => {
  const encoder = SentenceEncoder.fromFiles(st6);
  assert.ok(encoder instanceof SentenceEncoder);
  assert.equal(encoder.dim, 24);
  assert.deepEqual(encoder.promptNames, ["document", "empty", "passage", "query"]);
  assertRows("default prompt", encoder.encode(st6Texts), st6Want.default);
  assertRows("prompt passage", encoder.encode(st6Texts, "passage"), st6Want.prompt_name.passage);
});

// A pool splits a call's texts into chunks, each padded and batched on its own: within a batch,
// the kernels' tiling depends on the batch's shape, so a row can differ from the whole call's in
// its last bits (3e-8 to 8e-8 on st6_cls_dense). One chunk is the whole call: the same bits.
const SPLIT_TOLERANCE = 1e-6;

function assertSame(what, got, want, tolerance = SPLIT_TOLERANCE) {
  assert.equal(got.length, want.length, `${what}: rows`);
  got.forEach((row, i) => {
    if (row instanceof Float32Array) {
      assert.equal(row.length, want[i].length, `${what}: row ${i} length`);
      row.forEach((x, j) =>
        assert.ok(Math.abs(x - want[i][j]) <= tolerance, `${what}: row ${i} [${j}]: ${x} vs ${want[i][j]}`),
      );
    } else {
      assert.equal(row.label, want[i].label, `${what} [${i}]: label`);
      assert.ok(Math.abs(row.score - want[i].score) <= tolerance, `${what} [${i}]: ${row.score} vs ${want[i].score}`);
    }
  });
}

test("two workers give the rows of the main thread, in order", async () => {
  const classifier = TextClassifier.fromFiles(cls);
  const pooled = await TextClassifier.fromFiles(cls, { workers: 2 });
  assert.ok(pooled instanceof TextClassifier);
  assert.deepEqual(pooled.labels, classifier.labels);
  // More texts than workers, fewer (one chunk: the very same call), none.
  assertSame("classify", await pooled.classify(texts), classifier.classify(texts));
  assert.deepEqual(await pooled.classify(texts.slice(2, 3)), classifier.classify(texts.slice(2, 3)));
  assert.deepEqual(await pooled.classify([]), []);
  assertSame("classifyPairs", await pooled.classifyPairs(pairs), classifier.classifyPairs(pairs));
  assertClose("pooled texts", await pooled.classify(texts), references(clsWant.texts, classifier.labels), TOLERANCE);
  // Calls at once share the workers.
  const [a, b] = await Promise.all([pooled.classify(texts), pooled.classify(texts.slice(0, 3))]);
  assertSame("concurrent a", a, classifier.classify(texts));
  assertSame("concurrent b", b, classifier.classify(texts.slice(0, 3)));

  const under = await pooled.sentenceEncoder();
  assertSame("sentenceEncoder", await under.encode(texts), classifier.sentenceEncoder().encode(texts));
  assert.ok((await pooled.memoryBytes()) > 0);

  const encoder = SentenceEncoder.fromFiles(st6);
  const pooledEncoder = await SentenceEncoder.fromFiles(st6, { workers: 2 });
  assert.ok(pooledEncoder instanceof SentenceEncoder);
  assert.equal(pooledEncoder.dim, encoder.dim);
  assert.deepEqual(pooledEncoder.promptNames, encoder.promptNames);
  const rows = await pooledEncoder.encode(st6Texts);
  assertSame("encode", rows, encoder.encode(st6Texts));
  assertRows("pooled default prompt", rows, st6Want.default);
  const one = st6Texts.slice(4, 5);
  assert.deepEqual(await pooledEncoder.encode(one, "passage"), encoder.encode(one, "passage"));
  assert.deepEqual(await pooledEncoder.encode([]), []);

  // Three workers, two texts.
  const three = await TextClassifier.fromFiles(cls, { workers: 3, quantize: "int8" });
  const int8 = TextClassifier.fromFiles(cls, { quantize: "int8" });
  assertSame("int8, 3 workers", await three.classify(texts.slice(0, 2)), int8.classify(texts.slice(0, 2)));

  // The classifier's workers outlive it while its encoder lives.
  pooled.free();
  await assert.rejects(pooled.classify(texts), /was freed/);
  assert.equal((await under.encode(texts)).length, texts.length);
  under.free();
  await assert.rejects(under.encode(texts), /was freed/);
  pooledEncoder.free();
  three.free();
});

test("a pool's failures reject with the module's Error", async () => {
  const { "model.safetensors": weights, ...noWeights } = cls;
  await assert.rejects(
    TextClassifier.fromFiles(noWeights, { workers: 2 }),
    (e) => e instanceof Error && /model\.safetensors/.test(e.message),
  );
  const truncated = { ...cls, "model.safetensors": weights.subarray(0, 1000) };
  await assert.rejects(
    TextClassifier.fromFiles(truncated, { workers: 2 }),
    (e) => e instanceof Error && /model\/model\.safetensors: .*truncated/.test(e.message),
  );
  await assert.rejects(
    TextClassifier.fromFiles(cls, { workers: 2, quantise: "int8" }),
    (e) => e instanceof Error && /options\.quantise/.test(e.message),
  );
  for (const workers of [-1, 1.5, "2", true]) {
    await assert.rejects(TextClassifier.fromFiles(cls, { workers }), /options\.workers/);
    await assert.rejects(SentenceEncoder.fromUrl("http://127.0.0.1:1/", { workers }), /options\.workers/);
  }
  const pooled = await TextClassifier.fromFiles(cls, { workers: 2 });
  await assert.rejects(
    pooled.classifyPairs([["a", "b"], ["a", "b"], ["only one"]]),
    /pairs\[2\] is not a \[text, textPair\]/,
  );
  await assert.rejects(pooled.classify(["a", 1]), /texts\[1\]/);
  const encoder = await pooled.sentenceEncoder();
  await assert.rejects(encoder.encode(["a", "b", "c"], "search"), /unknown prompt name `search`/);
  pooled.free();
  encoder.free();
});

test("workers load from the pool's own copy: the caller's files stay whole", async () => {
  const files = Object.fromEntries(Object.entries(cls).map(([path, bytes]) => [path, new Uint8Array(bytes)]));
  const lengths = Object.values(files).map((bytes) => bytes.byteLength);
  const pooled = await TextClassifier.fromFiles(files, { workers: 3 });
  assertSame("own copy", await pooled.classify(texts), TextClassifier.fromFiles(cls).classify(texts));
  assert.deepEqual(Object.values(files).map((bytes) => bytes.byteLength), lengths);
  // Node Buffers (whose slice() is a view, not a copy) too, and an ArrayBuffer.
  const weights = cls["model.safetensors"];
  const buffers = { ...cls, "model.safetensors": weights.buffer.slice(weights.byteOffset, weights.byteOffset + weights.length) };
  const again = await TextClassifier.fromFiles(buffers, { workers: 2 });
  assert.equal(buffers["model.safetensors"].byteLength, cls["model.safetensors"].length);
  assert.ok(Object.values(cls).every((bytes) => bytes.byteLength > 0));
  assertSame("buffers", await again.classify(texts), TextClassifier.fromFiles(cls).classify(texts));
  pooled.free();
  again.free();
});

test("fromUrl on workers fetches the folder once, its progress heard here", async () => {
  const asked = [];
  const server = createServer(async (request, response) => {
    asked.push(new URL(request.url, "http://x").pathname);
    try {
      const body = await readFile(join(CLS, decodeURIComponent(new URL(request.url, "http://x").pathname)));
      response.writeHead(200, { "Content-Type": "application/octet-stream" }).end(body);
    } catch {
      response.writeHead(404).end();
    }
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  try {
    const base = `http://127.0.0.1:${server.address().port}/`;
    const heard = [];
    const pooled = await TextClassifier.fromUrl(base, {
      workers: 2,
      onProgress: (path, bytes) => heard.push([path, bytes]),
    });
    assertSame("fromUrl", await pooled.classify(texts), TextClassifier.fromFiles(cls).classify(texts));
    assert.ok(
      heard.some(([path, bytes]) => path === "model.safetensors" && bytes === cls["model.safetensors"].length),
      JSON.stringify(heard),
    );
    assert.equal(new Set(heard.map(([path]) => path)).size, heard.length, "each file heard once, from one worker");
    // One worker fetched the folder and handed it on: each file asked for once, not once per worker.
    assert.equal(asked.filter((path) => path === "/model.safetensors").length, 1, JSON.stringify(asked));
    pooled.free();
  } finally {
    server.close();
  }
});

test("a script ends without free(), and never while a call is pending", async () => {
  const { code, stdout, stderr } = await node(`
    import { TextClassifier } from "roformer-wasm";
    import { readFile } from "node:fs/promises";
    const files = {};
    for (const f of ["config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json"]) {
      files[f] = await readFile(${JSON.stringify(CLS)} + "/" + f);
    }
    const classifier = await TextClassifier.fromFiles(files, { workers: 2 });
    const rows = await classifier.classify(${JSON.stringify(texts)});
    console.log(rows.length);`);
  assert.equal(code, 0, stderr);
  assert.equal(stdout.trim(), String(texts.length));
});

test("cosineSimilarity", () => {
  const v = new Float32Array([0.5, -1, 2]);
  assert.ok(Math.abs(cosineSimilarity(v, v) - 1) < 1e-12);
  assert.equal(cosineSimilarity([1, 0], [0, 1]), 0);
  assert.equal(cosineSimilarity([0, 0], [1, 1]), 0);
  assert.throws(() => cosineSimilarity([1, 2], [1, 2, 3]), /differ in length/);
});
