// The result file a browser or memory benchmark writes under benchmarks/results/ (schema: benchmarks/README.md); result_file.py is the Python benches' twin.
import { execSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
export const RESULTS = path.join(ROOT, 'benchmarks', 'results');
// The flags that decide the kernels' level; the pages list these, not the CPU's hundred others.
const SIMD_FLAGS = ['sse4_2', 'avx2', 'fma', 'f16c', 'avx_vnni', 'avx512f', 'avx512bw', 'avx512_vnni', 'avx512_bf16',
  'avx512_fp16', 'amx_tile', 'amx_int8', 'amx_bf16', 'asimd', 'asimddp', 'i8mm', 'bf16', 'sve'];

/** The CPU as /proc/cpuinfo gives it (its first processor), and the family the pages group it under. */
export function cpuInfo() {
  let text = '';
  try { text = fs.readFileSync('/proc/cpuinfo', 'utf8').split('\n\n')[0]; } catch { /* not Linux */ }
  const field = (key) => text.match(new RegExp(`^${key}\\s*:\\s*(.*)$`, 'm'))?.[1]?.trim();
  const flags = new Set((field('flags') ?? field('Features') ?? '').split(/\s+/));
  const vendor = field('vendor_id') ?? '';
  const family = field('cpu family');
  const model = field('model');
  let group = 'avx2';
  if (os.arch() === 'arm64') group = 'arm';
  else if (flags.has('amx_int8')) group = 'amx';
  else if (vendor === 'AuthenticAMD' && family === '26') group = 'zen5';
  else if (vendor === 'AuthenticAMD' && family === '25' && flags.has('avx512f')) group = 'zen4';
  else if (flags.has('avx512f')) group = 'avx512';
  return {
    cpu: { model: field('model name') ?? os.cpus()[0]?.model ?? os.arch(), cpuid: vendor && family && model ? `family ${family} model ${model}` : null,
      microarchitecture: null, cores: os.cpus().length, simd_flags: SIMD_FLAGS.filter((f) => flags.has(f)) },
    family: group,
  };
}

/** HEAD's short hash, with "-dirty" when tracked files differ from it; null outside git. */
export function gitCommit() {
  try {
    const commit = execSync('git rev-parse --short=7 HEAD', { cwd: ROOT, stdio: ['ignore', 'pipe', 'ignore'] }).toString().trim();
    const dirty = execSync('git status --porcelain --untracked-files=no', { cwd: ROOT, stdio: ['ignore', 'pipe', 'ignore'] }).toString().trim();
    return commit + (dirty ? '-dirty' : '');
  } catch {
    return null;
  }
}

export function systemRow(system, version, precision, label, sentencesPerS, extra = {}) {
  return { system, version, precision, label, model: 'base', sentences_per_s: sentencesPerS, latency_ms_16: null,
    latency_ms_128: null, label_agreement: null, max_abs_prob_diff: null, ...extra };
}

/** Writes benchmarks/results/DATE-FAMILY-COMMIT.json (-2, -3, ... when that exists); returns its path. */
export function writeResult({ bench, family, level, versions, workload, systems, run = '1', kind, note, folder = RESULTS }) {
  const { cpu, family: cpuFamily } = cpuInfo();
  const date = new Date().toISOString().slice(0, 10);
  const commit = gitCommit();
  family ??= cpuFamily;
  const doc = { schema: 1, bench, family, date, commit, cpu, gpu: null, level, run, headline: false, versions, workload,
    source: `${bench}, run on this machine`, systems, ...(kind ? { kind } : {}), ...(note ? { note } : {}) };
  fs.mkdirSync(folder, { recursive: true });
  const stem = `${date}-${family}-${commit ?? 'nogit'}${kind ? `-${kind}` : ''}`;
  let file = path.join(folder, `${stem}.json`);
  for (let n = 2; fs.existsSync(file); n++) file = path.join(folder, `${stem}-${n}.json`);
  fs.writeFileSync(file, `${JSON.stringify(doc, null, 2)}\n`);
  return file;
}
