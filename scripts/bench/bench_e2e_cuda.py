# The base-size benchmark on a CUDA GPU, ours against PyTorch fp16. Run: scripts/checks/gpu_check.sh (or python3 scripts/bench/bench_e2e_cuda.py --classify BIN)
"""The base-size end-to-end benchmark on a CUDA GPU: this crate's `classify` example (CUDA build, f16)
against transformers' PyTorch eager in fp16 on the same GPU, on SST-2 dev (872 sentences).

Usage (scripts/checks/gpu_check.sh runs it; it needs torch with CUDA, transformers, safetensors, numpy):
    python3 scripts/bench/bench_e2e_cuda.py --classify target-cuda/gpu-bundle/bin/classify \
        [--data ../shared/data/glue/SST-2/dev.tsv] [--vocab ../shared/data/vocab/bert-base-uncased] [--runs 3]

The model is bench_e2e.py's: a base-size RoFormer classifier (12 layers, hidden 768, 12 heads, FFN 3072,
random init, BERT uncased vocab), built under target/bench-e2e-cuda with torch (seed 0) and saved in f32;
both sides load that folder and run it in fp16.

What is measured, for both: sentences/s over the dev file in length-sorted batches of 32, tokenization,
forward and softmax included, the probabilities copied back to the host, load excluded.
- PyTorch: the median of --runs passes after one warm-up pass.
- Ours: `classify` reports its own rows/s over the whole input, first batch (CUDA module loading, cuBLAS
  handles) included. To leave that warm-up out as on the PyTorch side, it runs twice per measurement, on the
  dev file and on the dev file repeated --repeat times, and the rate is the extra rows over the extra time;
  the median of --runs such pairs. The one-pass figure (warm-up included) is printed beside it.
Also printed: batch-1 latency of PyTorch at 16 and 128 tokens. Results go to target/bench-e2e-cuda/results.json
with the date, the GPU and the driver, and to a result file under --result-dir (benchmarks/results/ by default;
benchmarks/README.md gives the schema), whose family is `cuda`: docs/features.md's GPU table is rendered from
those (scripts/bench/render_results.py).
"""

import argparse
import datetime
import json
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "target" / "bench-e2e-cuda"

# The dev file reader, the model builder and the tokenizer are the CPU benchmark's.
sys.path.insert(0, str(ROOT / "scripts" / "bench"))
import bench_e2e  # noqa: E402
import result_file  # noqa: E402
from bench_e2e import read_sentences, tokenizer_for  # noqa: E402


def build_base(vocab_dir):
    # The same model as the CPU benchmark's (seed 0), in this script's own folder.
    return bench_e2e.build_base(vocab_dir, OUT)


def batches(sentences, size):
    ordered = sorted(sentences, key=len)
    return [ordered[i : i + size] for i in range(0, len(ordered), size)]


def torch_rate(folder, sentences, runs, max_length=128):
    import torch
    from transformers import RoFormerForSequenceClassification

    tok = tokenizer_for(folder)
    model = RoFormerForSequenceClassification.from_pretrained(folder, dtype=torch.float16).cuda().eval()

    def classify(texts):
        enc = tok(texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt").to("cuda")
        with torch.inference_mode():
            return torch.softmax(model(**enc).logits.float(), -1).cpu()

    def one_pass():
        for b in batches(sentences, 32):
            classify(b)

    one_pass()
    rates = []
    for _ in range(runs):
        torch.cuda.synchronize()
        start = time.perf_counter()
        one_pass()
        torch.cuda.synchronize()
        rates.append(len(sentences) / (time.perf_counter() - start))

    def latency(tokens, n=50):
        ids = torch.tensor([[101] + [1000 + i for i in range(tokens - 2)] + [102]], device="cuda")
        times = []
        with torch.inference_mode():
            for i in range(n + 5):
                torch.cuda.synchronize()
                start = time.perf_counter()
                model(input_ids=ids, attention_mask=torch.ones_like(ids), token_type_ids=torch.zeros_like(ids))
                torch.cuda.synchronize()
                if i >= 5:
                    times.append((time.perf_counter() - start) * 1e3)
        return statistics.median(times)

    return statistics.median(rates), {16: latency(16), 128: latency(128)}


def ours_run(exe, folder, data):
    args = [str(exe), "--model", str(folder), "--input", str(data), "--task", "sst2", "--device", "cuda",
            "--dtype", "f16", "--batch-size", "32", "--format", "jsonl", "--output", "/dev/null"]
    done = subprocess.run(args, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}\n{done.stderr}")
    rows, secs = re.search(r"(\d+) rows in ([\d.]+) s", done.stderr).groups()
    return int(rows), float(secs)


def ours_rate(exe, folder, data, runs, repeat):
    lines = Path(data).read_text(encoding="utf-8").rstrip("\n").split("\n")
    repeated = OUT / f"dev_x{repeat}.tsv"
    repeated.write_text("\n".join([lines[0]] + lines[1:] * repeat) + "\n", encoding="utf-8")
    steady, single = [], []
    for _ in range(runs):
        rows1, t1 = ours_run(exe, folder, data)
        rows_n, t_n = ours_run(exe, folder, repeated)
        single.append(rows1 / t1)
        steady.append((rows_n - rows1) / max(t_n - t1, 1e-9))
    return statistics.median(steady), statistics.median(single)


def gpu_info():
    try:
        q = "name,driver_version,compute_cap"
        out = subprocess.run(["nvidia-smi", f"--query-gpu={q}", "--format=csv,noheader"],
                             capture_output=True, text=True, check=True).stdout.strip().split("\n")[0]
        return dict(zip(q.split(","), [s.strip() for s in out.split(",")]))
    except (OSError, subprocess.CalledProcessError):
        return {}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--classify", required=True, help="the CUDA build's classify example")
    parser.add_argument("--data", default=str(ROOT.parent / "shared/data/glue/SST-2/dev.tsv"))
    parser.add_argument("--vocab", default=str(ROOT.parent / "shared/data/vocab/bert-base-uncased"))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=5, help="copies of the dev file in the long run")
    parser.add_argument("--skip-torch", action="store_true", help="ours only (no PyTorch on this machine)")
    parser.add_argument("--result-dir", default=str(result_file.RESULTS),
                        help="where the run's result file goes (benchmarks/results/); '' for none")
    args = parser.parse_args()

    OUT.mkdir(parents=True, exist_ok=True)
    sentences = read_sentences(args.data)
    folder = build_base(args.vocab)
    results = {"date": datetime.date.today().isoformat(), "gpu": gpu_info(), "sentences": len(sentences)}
    if not args.skip_torch:
        import torch

        results["torch"] = torch.__version__
        rate, lat = torch_rate(folder, sentences, args.runs)
        results["pytorch_fp16_eager"] = {"sentences_per_s": rate, "batch1_latency_ms": lat}
        print(f"PyTorch fp16 eager : {rate:8.1f} sentences/s   batch-1 latency: "
              f"{lat[16]:.2f} ms at 16 tokens, {lat[128]:.2f} ms at 128")
    steady, single = ours_rate(args.classify, folder, args.data, args.runs, args.repeat)
    results["ours_cuda_f16"] = {"sentences_per_s": steady, "one_pass_with_warmup": single}
    print(f"ours (candle) f16  : {steady:8.1f} sentences/s   (one pass of the dev file, warm-up included: "
          f"{single:.1f})")
    if "pytorch_fp16_eager" in results:
        ratio = steady / results["pytorch_fp16_eager"]["sentences_per_s"]
        results["ours_over_pytorch"] = ratio
        print(f"ours / PyTorch     : {ratio:.2f}x  (target: >= 1)")
    (OUT / "results.json").write_text(json.dumps(results, indent=2))
    print(f"results: {OUT / 'results.json'}")
    if args.result_dir:
        print(f"result file: {write_result_file(results, Path(args.result_dir))}")
    return 0


def write_result_file(results, folder):
    """The run as a result file (benchmarks/README.md): ours and PyTorch's rows, the GPU and the host CPU."""
    gpu = results["gpu"]
    ours = results["ours_cuda_f16"]
    systems = [result_file.system_row(
        "roformer", bench_e2e.crate_version(), "f16", "roformer f16 (`classify --device cuda`)",
        ours["sentences_per_s"],
        note=f"a single pass, warm-up and CUDA's module loading included: {ours['one_pass_with_warmup']:.0f}")]
    torch_row = results.get("pytorch_fp16_eager")
    if torch_row:
        lat = torch_row["batch1_latency_ms"]
        systems.append(result_file.system_row("pytorch", results["torch"], "f16", "PyTorch eager fp16",
                                              torch_row["sentences_per_s"], latency_ms_16=lat.get(16),
                                              latency_ms_128=lat.get(128)))
    return result_file.write(
        "scripts/bench/bench_e2e_cuda.py", None,
        {"torch": results.get("torch"), "driver": gpu.get("driver_version"), "roformer": bench_e2e.crate_version()},
        "base-size RoFormer classifier on SST-2 dev, length-sorted batches of 32, tokenization included, in f16 on "
        "the GPU", systems, run="median of the runs", family="cuda",
        gpu=f"{gpu.get('name', '?')} (compute capability {gpu.get('compute_cap', '?')})", folder=folder)


if __name__ == "__main__":
    sys.exit(main())
