# Long inputs against the peers: one input of 512, 2,048 and 8,192 tokens, batch 1, ours and the peers in one run. Run: .venv/bin/python scripts/bench/bench_long_peers.py [--lengths 512,2048,8192] [--skip NAME,...]
"""Side by side on this machine, in one run, on the same base-size model and its ONNX export, batch 1, one input of
each length, 2 threads each:
- transformers (PyTorch eager attention) in f32 and in bf16 under `torch.autocast("cpu", dtype=torch.bfloat16)`;
- ONNX Runtime on the f32 export and on its dynamic int8 quantization (onnxruntime's quantize_dynamic);
- OpenVINO at its defaults on the f32 export (its CPU plugin picks bf16 where the CPU has AVX512-BF16 or AMX; the row
  records the precision it reports);
- ours, the classifier pipeline through `cargo bench --bench latency` in f32, int8 and bf16.

The model is bench_e2e.py's base-size random-init classifier (12 layers, hidden 768, 12 heads, FFN 3072) copied to
target/bench-e2e/base-long with `max_position_embeddings` 16,384: transformers' RoFormer keeps its sinusoidal
position table as a weight of that size (recomputed, equal to the 512-row one on its first 512 rows), so a longer
input needs it; the ONNX export (dynamic batch and sequence axes) is made from that folder. Ours reads the same
folder (it computes the rotary positions itself).

What is timed: the encode, model load excluded. A peer runs in a process of its own (so that running out of memory
is recorded, not fatal to the run): one warm-up call at 16 tokens, then at each length --runs calls (2 at 8,192 and
over, --runs-long), the forward pass on token ids, softmax included; the row keeps the best and every time. Ours
alike, warm: a process per length runs the classifier pipeline on token ids once untimed at that length, then as many
timed calls, and the best is kept (before 2026-12-06's second run, ours were `embed` processes timing one cold
encode each). Each process's peak RSS is recorded too.

Writes a result file under benchmarks/results/ (`"kind": "long-peers"`, the rows' `long_inputs` field;
benchmarks/README.md) unless --no-result-file, and /tmp/BENCH_RUNNING exists while it times.
"""

import argparse
import json
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import result_file

ROOT = result_file.ROOT
OUT = ROOT / "target" / "bench-e2e"
THREADS = 2
MAX_POSITIONS = 16384
MARK = Path("/tmp/BENCH_RUNNING")
RUNS_LONG = [2]  # timed calls from 8,192 tokens (--runs-long)
PEERS = {
    "transformers f32": ("transformers", "transformers f32 (eager)"),
    "transformers bf16": ("transformers", "transformers bf16 (autocast, eager)"),
    "onnxruntime f32": ("onnxruntime", "ONNX Runtime f32"),
    "onnxruntime int8": ("onnxruntime", "ONNX Runtime int8 (dynamic)"),
    "openvino default": ("openvino", "OpenVINO default (it picks {precision})"),
}
OURS = {"f32": "roformer f32", "int8": "roformer int8", "bf16": "roformer bf16"}


def long_folder(vocab):
    """bench_e2e's base model with a position table of MAX_POSITIONS rows, under OUT/base-long."""
    import shutil

    import torch
    from transformers import RoFormerForSequenceClassification

    import bench_e2e

    folder = OUT / "base-long"
    if (folder / "model.safetensors").exists():
        return folder
    base = bench_e2e.build_base(vocab)
    model = RoFormerForSequenceClassification.from_pretrained(
        base, max_position_embeddings=MAX_POSITIONS, ignore_mismatched_sizes=True).eval()
    short = RoFormerForSequenceClassification.from_pretrained(base).eval()
    table, old = model.roformer.encoder.embed_positions.weight, short.roformer.encoder.embed_positions.weight
    assert table.shape[0] == MAX_POSITIONS and torch.equal(table[: old.shape[0]], old), "position table differs"
    for (name, a), (_, b) in zip(model.state_dict().items(), short.state_dict().items(), strict=True):
        assert "embed_positions" in name or torch.equal(a, b), name
    model.save_pretrained(folder)
    for name in ("vocab.txt", "tokenizer_config.json"):
        shutil.copy(base / name, folder / name)
    return folder


def ids_of(tokens):
    return [101] + [1000 + i % 20000 for i in range(tokens - 2)] + [102]


def worker(name, folder, lengths, runs):
    """In its own process: one peer at each length; prints one JSON line."""
    import torch

    import bench_e2e

    torch.set_num_threads(THREADS)
    tok = bench_e2e.tokenizer_for(folder)
    if name.startswith("transformers"):
        _, forward, info = bench_e2e.torch_runner(folder, tok, bf16=name.endswith("bf16"))
    else:
        f32, int8 = bench_e2e.export_onnx(folder, folder.name)
        if name == "onnxruntime f32":
            _, forward, info = bench_e2e.ort_runner(f32, tok, "f32")
        elif name == "onnxruntime int8":
            _, forward, info = bench_e2e.ort_runner(int8, tok, "int8 dynamic")
        else:
            _, forward, info = bench_e2e.openvino_runner(f32, tok, quantized=False)
    forward(ids_of(16))
    results = {}
    for n in lengths:
        ids = ids_of(n)
        times = []
        try:
            for _ in range(runs_at(n, runs)):
                start = time.perf_counter()
                forward(ids)
                times.append(time.perf_counter() - start)
            results[str(n)] = {"encode_s": round(min(times), 3), "times_s": [round(t, 3) for t in times]}
        except (RuntimeError, MemoryError) as e:
            results[str(n)] = {"error": "out of memory" if "memory" in str(e).lower() or isinstance(e, MemoryError)
                               else str(e)[:300]}
            break
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"info": {k: v for k, v in info.items()}, "results": results, "peak_rss_mib": round(peak)}))


def runs_at(n, runs):
    return RUNS_LONG[0] if n >= 8192 else runs


def run_peer(name, folder, lengths, runs):
    done = subprocess.run([sys.executable, __file__, "--worker", name, "--folder", str(folder),
                           "--lengths", ",".join(map(str, lengths)), "--runs", str(runs), "--runs-long", str(RUNS_LONG[0])],
                          capture_output=True, text=True, cwd=Path(__file__).parent)
    line = done.stdout.strip().split("\n")[-1] if done.stdout.strip() else ""
    if done.returncode == 0 and line.startswith("{"):
        return json.loads(line)
    why = "killed (out of memory)" if done.returncode in (-9, 137) else f"exit {done.returncode}"
    print(f"  {name}: {why}: {done.stderr.strip()[-600:]}", flush=True)
    return {"info": {}, "results": {}, "error": why}


def latency_binary():
    """The executable of `cargo bench --bench latency`, built if need be."""
    done = subprocess.run(["cargo", "bench", "--no-run", "--bench", "latency"], cwd=ROOT, capture_output=True,
                          text=True, check=True)
    return ROOT / re.search(r"Executable benches/latency.rs \((.+?)\)", done.stderr).group(1)


def run_ours(exe, folder, precision, lengths, runs):
    """Ours as the peers run: the classifier pipeline on token ids (`cargo bench --bench latency`), warm (one
    untimed call at the length first), the best of as many timed calls; one process per length."""
    results, peak = {}, 0
    with tempfile.TemporaryDirectory() as tmp:
        for n in lengths:
            done = subprocess.run(
                ["/usr/bin/time", "-f", "%M", "-o", f"{tmp}/time", str(exe), str(folder), str(n), precision,
                 str(runs_at(n, runs)), str(THREADS), "1"], capture_output=True, text=True)
            if done.returncode != 0:
                raise RuntimeError(done.stderr[-800:])
            best = float(re.search(r"best_ms=([\d.]+)", done.stdout).group(1)) / 1e3
            results[str(n)] = {"encode_s": round(best, 3)}
            peak = max(peak, int(Path(f"{tmp}/time").read_text().split()[-1]) / 1024)
    return {"info": {"precision": precision}, "results": results, "peak_rss_mib": round(peak)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lengths", default="512,2048,8192")
    parser.add_argument("--runs", type=int, default=3, help="timed calls per length below 8,192 tokens")
    parser.add_argument("--runs-long", type=int, default=2, help="timed calls per length from 8,192 tokens")
    parser.add_argument("--skip", default="", help="rows to leave out, comma-separated: transformers-bf16, roformer-int8, ...")
    parser.add_argument("--vocab", default=str(ROOT.parent / "shared/data/vocab/bert-base-uncased"))
    parser.add_argument("--latency", help="our `latency` bench executable, built elsewhere (default: built here)")
    parser.add_argument("--commit", help="the commit --latency was built from (default: this checkout's)")
    parser.add_argument("--no-result-file", action="store_true")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    args = parser.parse_args()
    lengths = [int(n) for n in args.lengths.split(",")]
    RUNS_LONG[0] = args.runs_long
    if args.worker:
        return worker(args.worker, Path(args.folder), lengths, args.runs)
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    folder = long_folder(args.vocab)
    import bench_e2e

    bench_e2e.export_onnx(folder, folder.name)  # before timing: the export and its int8 quantization
    latency = Path(args.latency) if args.latency else latency_binary()
    rows = {}
    MARK.touch()
    try:
        for name in PEERS:
            if name.replace(" ", "-") in skip:
                continue
            rows[name] = run_peer(name, folder, lengths, args.runs)
            print(f"{name:20} {summary(rows[name], lengths)}", flush=True)
        for precision in OURS:
            if f"roformer-{precision}" in skip:
                continue
            rows[f"roformer {precision}"] = run_ours(latency, folder, precision, lengths, args.runs)
            print(f"{'roformer ' + precision:20} {summary(rows[f'roformer {precision}'], lengths)}", flush=True)
    finally:
        MARK.unlink(missing_ok=True)
    print_table(rows, lengths)
    if not args.no_result_file:
        print(f"\nresult file: {write_result(rows, lengths, args, folder).relative_to(ROOT)}")


def summary(row, lengths):
    cells = []
    for n in lengths:
        r = row["results"].get(str(n), {})
        cells.append(f"{n}: " + (f"{r['encode_s']:.3f} s" if "encode_s" in r else r.get("error", row.get("error", "—"))))
    return "; ".join(cells) + f"; peak RSS {row.get('peak_rss_mib', '—')} MiB; {row['info'].get('precision', '')}"


def precision_of(name, row):
    return result_file.precision_of(row["info"].get("precision") or name.split()[-1])


def print_table(rows, lengths):
    print("\n| system | precision | " + " | ".join(f"{n:,} tokens (s)" for n in lengths) + " | peak RSS (MiB) |")
    print("| --- | --- |" + " ---: |" * (len(lengths) + 1))
    for name, row in rows.items():
        cells = []
        for n in lengths:
            r = row["results"].get(str(n), {})
            cells.append(f"{r['encode_s']:.3f}" if "encode_s" in r else r.get("error", row.get("error", "—")))
        print(f"| {name} | {precision_of(name, row)} | {' | '.join(cells)} | {row.get('peak_rss_mib', '—')} |")


def write_result(rows, lengths, args, folder):
    versions = {**bench_e2e_versions(), "roformer": result_file.crate_version()}
    systems = []
    for name, row in rows.items():
        system, label = PEERS.get(name, ("roformer", None))
        precision = precision_of(name, row)
        label = (label or OURS[name.split()[-1]]).format(precision=precision)
        extra = {k: row["info"][k] for k in ("inference_precision_hint", "matmul_precisions") if k in row["info"]}
        if row.get("error"):
            extra["error"] = row["error"]
        systems.append(result_file.system_row(
            system, versions.get(system), precision, label, None, threads=THREADS,
            peak_rss_mib=row.get("peak_rss_mib"), long_inputs=row["results"], **extra))
    level = result_file.kernels_level(set(result_file.cpu_info()["simd_flags"]))
    workload = (f"base-size RoFormer classifier ({folder.relative_to(ROOT)}: 12 layers, hidden 768, 12 heads, FFN 3072, "
                f"random init, max_position_embeddings {MAX_POSITIONS}) and its ONNX export, batch 1, one input of "
                f"{', '.join(f'{n:,}' for n in lengths)} tokens, {THREADS} threads each; the best of {args.runs} "
                f"timed calls per length ({args.runs_long} from 8,192 tokens), model load excluded: the peers warm (after a 16-token "
                "call, each peer in its own process), ours warm too (`cargo bench --bench latency`: the classifier "
                "pipeline on token ids, one untimed call at each length first, a process per length)")
    return result_file.write("scripts/bench/bench_long_peers.py", level, versions, workload, systems,
                             run=f"best of {args.runs} ({args.runs_long} from 8,192 tokens), back to back, idle",
                             kind="long-peers", commit=args.commit)


def bench_e2e_versions():
    import bench_e2e

    return bench_e2e.peer_versions()


if __name__ == "__main__":
    sys.exit(main())
