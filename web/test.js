// The browser test's page (driven by wasm/tests/browser.rs): runs each case of /plan.json with
// the demo page's functions and posts what each gave, or threw, to /result.
import { loadModel, loadEncoder, classify, similarity } from "./demo.js";

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

async function run(c) {
  switch (c.call) {
    case "classify":
      return (await loadModel(await source(c))).classifier.classify(c.input);
    case "classifyPairs":
      return (await loadModel(await source(c))).classifier.classifyPairs(c.input);
    case "demoClassify": {
      const model = await loadModel(await source(c));
      return c.input.map((text) => classify(model, text));
    }
    case "demoSimilarity": {
      const model = await loadModel(await source(c));
      return c.input.map(([a, b]) => similarity(model, a, b));
    }
    case "encode": {
      const encoder = await loadEncoder(await source(c));
      return encoder.encode(c.input.texts, c.input.prompt).map((e) => Array.from(e));
    }
    default:
      throw new Error(`test setup: unknown call ${c.call}`);
  }
}

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
await fetch("/result", { method: "POST", body: JSON.stringify({ userAgent: navigator.userAgent, results }) });
