// The browser test's page (driven by wasm/tests/browser.rs): loads the package's module that
// `?simd=` picks ("auto" or "plain"), runs each case of /plan.json with the demo page's
// functions, and posts what each gave, or threw, to /result.
import { loadModel, loadEncoder, classify, similarity, start } from "./demo.js";

const simd = new URLSearchParams(location.search).get("simd") ?? "auto";

async function filesOf(c) {
  const files = {};
  for (const path of c.files) {
    const response = await fetch(`/${c.folder}/${path}`);
    if (!response.ok) throw new Error(`test setup: ${c.folder}/${path}: HTTP ${response.status}`);
    files[path] = new Uint8Array(await response.arrayBuffer());
  }
  return files;
}

async function source(c) {
  return c.source === "files" ? { files: await filesOf(c), options: c.options } : { url: `/${c.folder}/`, options: c.options };
}

/** How long `work` took, and how often a 10 ms timer of this page fired meanwhile. */
async function timed(work) {
  const ticks = [];
  const timer = setInterval(() => ticks.push(performance.now()), 10);
  const started = performance.now();
  const rows = (await work()).length;
  const ended = performance.now();
  clearInterval(timer);
  const times = [started, ...ticks, ended];
  const maxGapMs = Math.max(...times.slice(1).map((t, i) => t - times[i]));
  return { ms: ended - started, ticks: ticks.length, maxGapMs, rows };
}

async function run(c) {
  switch (c.call) {
    case "classify":
      return await (await loadModel(await source(c))).classifier.classify(c.input);
    case "classifyPairs":
      return await (await loadModel(await source(c))).classifier.classifyPairs(c.input);
    case "classifyPairsAfterABadCall": {
      // A refused call must leave the object usable.
      const { classifier } = await loadModel(await source(c));
      await (async () => classifier.classifyPairs(null))().then(
        () => { throw new Error("classifyPairs(null) was not refused"); },
        () => {},
      );
      return await classifier.classifyPairs(c.input);
    }
    case "demoClassify": {
      const model = await loadModel(await source(c));
      return await Promise.all(c.input.map((text) => classify(model, text)));
    }
    case "demoSimilarity": {
      const model = await loadModel(await source(c));
      return await Promise.all(c.input.map(([a, b]) => similarity(model, a, b)));
    }
    case "encode": {
      const encoder = await loadEncoder(await source(c));
      return (await encoder.encode(c.input.texts, c.input.prompt)).map((e) => Array.from(e));
    }
    case "responsive": {
      const { classifier } = await loadModel(await source(c));
      const cycle = (n) => Array.from({ length: n }, (_, i) => c.input.texts[i % c.input.texts.length]);
      // A first call sets the count, so that the timed call lasts about c.input.seconds on any
      // machine and with any built-in model: long enough to tell a page that answers from one
      // that froze, and no longer.
      const trial = cycle(100);
      const { ms } = await timed(() => classifier.classify(trial));
      const asked = Math.max(trial.length, Math.ceil((c.input.seconds * 1000 * trial.length) / ms));
      const report = await timed(() => classifier.classify(cycle(asked)));
      classifier.free();
      return { ...report, asked };
    }
    default:
      throw new Error(`test setup: unknown call ${c.call}`);
  }
}

const loaded = await start({ simd });
const plan = await (await fetch("/plan.json")).json();
const results = [];
for (const c of plan.cases) {
  try {
    results.push({ id: c.id, output: await run(c) });
  } catch (e) {
    results.push({ id: c.id, error: String(e?.message ?? e), isError: e instanceof Error });
  }
  document.getElementById("log").textContent = `${results.length} of ${plan.cases.length} cases run`;
}
await fetch("/result", {
  method: "POST",
  body: JSON.stringify({ userAgent: navigator.userAgent, simd: loaded.simd, results }),
});
