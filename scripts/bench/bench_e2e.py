# End-to-end CPU benchmark on SST-2 dev: transformers, ONNX Runtime and ours, f32 and int8. Run: .venv/bin/python scripts/bench/bench_e2e.py [--runs 3] [--level avx2]
"""Side by side on this machine, in one run: transformers (PyTorch eager), ONNX Runtime f32 and dynamic int8,
and this crate's `classify` example in f32 and int8, on SST-2 dev (872 sentences), CPU, 2 threads each.

Usage:
    python3 -m venv .venv && .venv/bin/pip install -r scripts/requirements.txt
    .venv/bin/python scripts/bench/bench_e2e.py [--data ../shared/data/glue/SST-2/dev.tsv] [--runs 3]

It builds a base-size RoFormer classifier (12 layers, hidden 768, 12 heads, FFN 3072, random init, BERT uncased
vocab) under target/bench-e2e, exports it to ONNX (f32, and int8 by onnxruntime's quantize_dynamic), and prints:
- sentences/s on the dev file in length-sorted batches of 32 (tokenization, forward and softmax; load excluded),
  the median of --runs passes after one warm-up pass (ours: the median of --runs `classify` processes);
- batch-1 latency at 16 and 128 tokens (median of 50 runs after 5 warm-up runs);
- the same throughput at batch 1 and 32 on the bundled model's shape (models/roformer-sst2 itself).
Results also go to target/bench-e2e/results.json, with the date and the machine.
"""

import argparse
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import time
import warnings
from pathlib import Path

import numpy as np
import torch

warnings.filterwarnings("ignore")
ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "target" / "bench-e2e"
THREADS = 2


def read_sentences(path):
    lines = Path(path).read_text(encoding="utf-8").split("\n")
    header = lines[0].split("\t")
    col = header.index("sentence")
    return [l.split("\t")[col] for l in lines[1:] if l.strip()]


def build_base(vocab_dir, out=OUT):
    """A base-size random-init classifier folder (under `out`) with the BERT uncased vocab."""
    from transformers import RoFormerConfig, RoFormerForSequenceClassification

    folder = out / "base"
    if (folder / "model.safetensors").exists():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    vocab = (Path(vocab_dir) / "vocab.txt").read_text(encoding="utf-8")
    (folder / "vocab.txt").write_text(vocab, encoding="utf-8")
    (folder / "tokenizer_config.json").write_text(
        json.dumps({"tokenizer_class": "BertTokenizer", "do_lower_case": True, "model_max_length": 512})
    )
    config = RoFormerConfig(
        vocab_size=len(vocab.split("\n")) - (1 if vocab.endswith("\n") else 0),
        hidden_size=768,
        num_hidden_layers=12,
        num_attention_heads=12,
        intermediate_size=3072,
        max_position_embeddings=512,
        num_labels=2,
    )
    torch.manual_seed(0)
    RoFormerForSequenceClassification(config).eval().save_pretrained(folder)
    return folder


def tokenizer_for(folder):
    """A fast BERT tokenizer built from the vocab dict (transformers 5's vocab_file path is unreliable)."""
    from transformers import BertTokenizerFast

    tokens = (folder / "vocab.txt").read_text(encoding="utf-8").split("\n")
    vocab = {t: i for i, t in enumerate(tokens) if t or i < len(tokens) - 1}
    tok = BertTokenizerFast(vocab=vocab, do_lower_case=True)
    ids = tok("hello world")["input_ids"]
    assert ids[0] == vocab["[CLS]"] and ids[-1] == vocab["[SEP]"] and len(set(ids)) == len(ids), ids
    return tok


def export_onnx(folder, name):
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from transformers import RoFormerForSequenceClassification

    f32, int8 = OUT / f"{name}.onnx", OUT / f"{name}-int8.onnx"
    if not f32.exists():
        model = RoFormerForSequenceClassification.from_pretrained(folder).eval()
        ids = torch.ones(2, 16, dtype=torch.long)
        names = ["input_ids", "attention_mask", "token_type_ids"]
        torch.onnx.export(
            model,
            (ids, torch.ones_like(ids), torch.zeros_like(ids)),
            str(f32),
            input_names=names,
            output_names=["logits"],
            dynamic_axes={n: {0: "batch", 1: "seq"} for n in names},
            opset_version=17,
            dynamo=False,
        )
    if not int8.exists():
        quantize_dynamic(str(f32), str(int8), weight_type=QuantType.QInt8)
    return f32, int8


def batches(sentences, batch_size):
    order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]))
    return [[sentences[i] for i in order[s : s + batch_size]] for s in range(0, len(order), batch_size)]


def median_rate(count, run, runs):
    run()  # warm-up
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return count / statistics.median(times)


def torch_runner(folder, tok, max_length=128):
    from transformers import RoFormerForSequenceClassification

    model = RoFormerForSequenceClassification.from_pretrained(folder).eval()

    def classify(texts):
        enc = tok(texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
        with torch.no_grad():
            return torch.softmax(model(**enc).logits, -1)

    def forward_ids(ids):
        with torch.no_grad():
            t = torch.tensor([ids])
            return model(input_ids=t, attention_mask=torch.ones_like(t), token_type_ids=torch.zeros_like(t)).logits

    return classify, forward_ids


def ort_runner(path, tok, max_length=128):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = THREADS
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])

    def run(ids, mask, types):
        logits = session.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": types})[0]
        e = np.exp(logits - logits.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    def classify(texts):
        enc = tok(texts, padding=True, truncation=True, max_length=max_length, return_tensors="np")
        return run(enc["input_ids"], enc["attention_mask"], enc["token_type_ids"])

    def forward_ids(ids):
        ids = np.array([ids], dtype=np.int64)
        return run(ids, np.ones_like(ids), np.zeros_like(ids))

    return classify, forward_ids


def peer_systems(folder, name):
    """The peers on the model in `folder`, by name: transformers, and ONNX Runtime on its f32 and int8 exports."""
    tok = tokenizer_for(folder)
    f32, int8 = export_onnx(folder, name)
    return {
        "transformers": torch_runner(folder, tok),
        "onnxruntime f32": ort_runner(f32, tok),
        "onnxruntime int8": ort_runner(int8, tok),
    }


def ours_rate(folder, data, batch_size, quantize, runs):
    exe = ROOT / "target" / "release" / "examples" / "classify"
    args = [str(exe), "--model", str(folder), "--input", str(data), "--task", "sst2",
            "--batch-size", str(batch_size), "--format", "jsonl", "--output", "/dev/null"]
    if quantize != "f32":
        args += ["--quantize", quantize]
    rates = []
    for _ in range(runs):
        done = subprocess.run(args, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(done.stderr)
        rates.append(float(re.search(r"\(([\d.]+) rows/s\)", done.stderr).group(1)))
    return statistics.median(rates)


def ours_latency(folder, lengths, quantize):
    done = subprocess.run(
        ["cargo", "bench", "-q", "--bench", "latency", "--", str(folder), ",".join(map(str, lengths)), quantize],
        capture_output=True, text=True, cwd=ROOT,
    )
    if done.returncode != 0:
        raise RuntimeError(done.stderr)
    found = dict(re.findall(r"tokens=(\d+) median_ms=([\d.]+)", done.stdout))
    return {int(k): float(v) for k, v in found.items()}


def latency(forward_ids, tokens, runs=50):
    ids = [101] + [1000 + i for i in range(tokens - 2)] + [102]
    for _ in range(5):
        forward_ids(ids)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        forward_ids(ids)
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", default=str(ROOT.parent / "shared/data/glue/SST-2/dev.tsv"))
    parser.add_argument("--vocab", default=str(ROOT.parent / "shared/data/vocab/bert-base-uncased"))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--skip-small", action="store_true", help="leave out the bundled model's shape")
    parser.add_argument(
        "--level",
        choices=["portable", "avx2", "avx-vnni", "avx512", "avx512-vnni"],
        help="hold our kernels to this SIMD level (ROFORMER_CPU_LEVEL); with avx2 or avx-vnni, PyTorch's oneDNN "
        "and MKL are held to AVX2 too (ONEDNN_MAX_CPU_ISA, MKL_ENABLE_INSTRUCTIONS); ONNX Runtime has no such switch",
    )
    args = parser.parse_args()
    if args.level:
        os.environ["ROFORMER_CPU_LEVEL"] = args.level
        if args.level in ("avx2", "avx-vnni"):
            os.environ["ONEDNN_MAX_CPU_ISA"] = "AVX2"
            os.environ["MKL_ENABLE_INSTRUCTIONS"] = "AVX2"
    torch.set_num_threads(THREADS)
    OUT.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cargo", "build", "-q", "--release", "--example", "classify"], cwd=ROOT, check=True)
    subprocess.run(["cargo", "bench", "-q", "--no-run", "--bench", "latency"], cwd=ROOT, check=True)
    sentences = read_sentences(args.data)
    results = {
        "date": datetime.date.today().isoformat(),
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, {THREADS} threads each",
        "cpu": next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?"),
        "versions": {"torch": torch.__version__},
        "sentences": len(sentences),
        "simd": simd_summary(),
    }
    import onnxruntime
    import transformers

    results["versions"].update(transformers=transformers.__version__, onnxruntime=onnxruntime.__version__)

    base = build_base(args.vocab)
    base_rows = {}
    for name, (classify, forward_ids) in peer_systems(base, "base").items():
        rate = median_rate(len(sentences), lambda: [classify(b) for b in batches(sentences, 32)], args.runs)
        base_rows[name] = {"sentences_per_s": rate, **{f"latency_ms_{n}": latency(forward_ids, n) for n in (16, 128)}}
        print(f"base  {name:18} {rate:8.1f} sentences/s", flush=True)
    for quantize in ("f32", "int8"):
        name = f"roformer {quantize}"
        rate = ours_rate(base, args.data, 32, quantize, args.runs)
        lat = ours_latency(base, [16, 128], quantize)
        base_rows[name] = {"sentences_per_s": rate, **{f"latency_ms_{n}": lat[n] for n in (16, 128)}}
        print(f"base  {name:18} {rate:8.1f} sentences/s", flush=True)
    results["base"] = base_rows

    if not args.skip_small:
        small = ROOT / "models" / "roformer-sst2"
        small_rows = {}
        for name, (classify, _) in peer_systems(small, "small").items():
            small_rows[name] = {
                f"batch_{b}": median_rate(len(sentences), lambda: [classify(x) for x in batches(sentences, b)], 5)
                for b in (1, 32)
            }
            print(f"small {name:18} {small_rows[name]}", flush=True)
        for quantize in ("f32", "int8"):
            name = f"roformer {quantize}"
            small_rows[name] = {f"batch_{b}": ours_rate(small, args.data, b, quantize, 5) for b in (1, 32)}
            print(f"small {name:18} {small_rows[name]}", flush=True)
        results["small"] = small_rows

    (OUT / "results.json").write_text(json.dumps(results, indent=2))
    print_tables(results)


def simd_summary():
    """The CPU's SIMD extensions that matter to the kernels, and the level ours run at."""
    flags = set()
    for line in open("/proc/cpuinfo"):
        if line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
            break
    wanted = ["avx2", "fma", "avx_vnni", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16"]
    has = [f for f in wanted if f in flags]
    if os.environ.get("ROFORMER_CPU_LEVEL"):
        level = os.environ["ROFORMER_CPU_LEVEL"] + " (forced)"
    elif "avx512f" in flags:
        level = "avx512-vnni" if "avx512_vnni" in flags else "avx512"
    elif "avx2" in flags:
        level = "avx-vnni" if "avx_vnni" in flags else "avx2"
    else:
        level = "portable"
    peers = "PyTorch held to AVX2" if os.environ.get("ONEDNN_MAX_CPU_ISA") else "peers at their own best"
    return f"CPU has {' '.join(has) or 'none of ' + ' '.join(wanted)}; roformer level {level}; {peers}"


def print_tables(results):
    print(f"\n{results['date']}, {results['cpu']}, {results['machine']}; {results['versions']}")
    print(results.get("simd", ""))
    print("\nBase size, SST-2 dev, batch 32 | sentences/s | batch-1 latency 16 tokens | 128 tokens")
    for name, row in results["base"].items():
        print(f"| {name} | {row['sentences_per_s']:.1f} | {row['latency_ms_16']:.1f} ms | {row['latency_ms_128']:.1f} ms |")
    if "small" in results:
        print("\nBundled model's shape, SST-2 dev | batch 1 | batch 32 (sentences/s)")
        for name, row in results["small"].items():
            print(f"| {name} | {row['batch_1']:.0f} | {row['batch_32']:.0f} |")


if __name__ == "__main__":
    main()
