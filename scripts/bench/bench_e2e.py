# End-to-end CPU benchmark on SST-2 dev: transformers (f32, bf16), ONNX Runtime, OpenVINO and ours (f32, int8, bf16). Run: .venv/bin/python scripts/bench/bench_e2e.py [--runs 3] [--level amx] [--skip-peers NAME,...] [--ours f32,int8,bf16] [--skip-small | --skip-base]
"""Side by side on this machine, in one run, each peer at its own settings for this CPU (AMX and bf16 where it has
them), CPU, 2 threads each, on SST-2 dev (872 sentences):
- transformers (PyTorch eager) in f32, and in bf16 under `torch.autocast("cpu", dtype=torch.bfloat16)`;
- ONNX Runtime on the f32 export and its dynamic int8 quantization (onnxruntime's quantize_dynamic);
- OpenVINO at its defaults on the f32 export (its CPU plugin picks bf16 where the CPU has AVX512-BF16 or AMX), and
  static int8 by NNCF (calibrated on --calibration-size sentences of SST-2 *train*);
- this crate's `classify` example in f32, int8 (`--quantize int8`) and bf16 (`--dtype bf16`), as --ours says.

Usage:
    python3 -m venv .venv && .venv/bin/pip install -r scripts/requirements.txt
    .venv/bin/python scripts/bench/bench_e2e.py [--data ../shared/data/glue/SST-2/dev.tsv] [--runs 3]
        [--level amx] [--skip-peers openvino-int8,transformers-bf16] [--ours f32,int8] [--skip-small | --skip-base]

It builds a base-size RoFormer classifier (12 layers, hidden 768, 12 heads, FFN 3072, random init, BERT uncased
vocab) under target/bench-e2e, exports it to ONNX (f32; int8 by onnxruntime's quantize_dynamic; OpenVINO IR int8 by
NNCF), and prints, per row:
- sentences/s on the dev file in length-sorted batches of 32 (tokenization, forward and softmax; load excluded),
  the median of --runs passes after one warm-up pass (ours: the median of --runs `classify` processes);
- batch-1 latency at 16 and 128 tokens (median of 50 runs after 5 warm-up runs);
- the precision it ran at (OpenVINO: the INFERENCE_PRECISION_HINT its compiled model reports, and the precisions its
  matrix products run at);
- agreement with the f32 reference of its family on the dev set: the share of argmax labels equal to the
  reference's, and the largest absolute difference of a class probability. transformers bf16, ONNX Runtime and
  OpenVINO (the same weights) against transformers f32; ours against roformer f32;
- the same throughput at batch 1 and 32 on the bundled model's shape (models/roformer-sst2 itself), with the
  agreement of its batch-32 pass.
Results also go to target/bench-e2e/results.json, with the date and the machine; the predictions of each of ours
under target/bench-e2e/predictions/. Each run also writes a result file under benchmarks/results/ (the schema is in
benchmarks/README.md: the systems and their versions, the CPU's model and flags, the date, the commit, sentences/s,
latency and label agreement), which scripts/bench/render_results.py turns into the pages' tables once it is marked
as its family's headline; --no-result-file leaves it out.
"""

import argparse
import collections
import contextlib
import datetime
import json
import os
import platform
import random
import re
import statistics
import subprocess
import time
import warnings
from pathlib import Path

import numpy as np
import torch

import result_file

warnings.filterwarnings("ignore")
ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "target" / "bench-e2e"
THREADS = 2
# The programs of ours that the benchmark runs: cargo builds them, unless --prebuilt names a folder holding them.
BINARIES = {"classify": ROOT / "target" / "release" / "examples" / "classify", "latency": None}
ONNX_INPUTS = ["input_ids", "attention_mask", "token_type_ids"]
PEERS = ["transformers f32", "transformers bf16", "onnxruntime f32", "onnxruntime int8", "openvino default",
         "openvino int8"]
OURS = ["f32", "int8", "bf16"]


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
        torch.onnx.export(
            model,
            (ids, torch.ones_like(ids), torch.zeros_like(ids)),
            str(f32),
            input_names=ONNX_INPUTS,
            output_names=["logits"],
            dynamic_axes={n: {0: "batch", 1: "seq"} for n in ONNX_INPUTS},
            opset_version=17,
            dynamo=False,
        )
    if not int8.exists():
        quantize_dynamic(str(f32), str(int8), weight_type=QuantType.QInt8)
    return f32, int8


def export_openvino_int8(f32, tok, calibration, size, name, max_length=128):
    """OpenVINO IR of the f32 export in static int8 by NNCF, calibrated on `size` sentences drawn (seed 0) from
    `calibration` (SST-2 train, never dev); cached as OUT/{name}-int8-nncf{size}.xml."""
    path = OUT / f"{name}-int8-nncf{size}.xml"
    if path.exists():
        return path
    import nncf
    import openvino as ov

    sentences = read_sentences(calibration)
    sample = random.Random(0).sample(sentences, min(size, len(sentences)))

    def transform(text):
        enc = tok(text, truncation=True, max_length=max_length, return_tensors="np")
        return {n: enc[n].astype(np.int64) for n in ONNX_INPUTS}

    model = ov.Core().read_model(str(f32))
    quantized = nncf.quantize(
        model, nncf.Dataset(sample, transform), model_type=nncf.ModelType.TRANSFORMER, subset_size=len(sample)
    )
    ov.save_model(quantized, str(path), compress_to_fp16=False)
    return path


def sorted_batches(count, key, batch_size):
    """Indices 0..count-1 sorted by `key` (stable), cut into batches of `batch_size`."""
    order = sorted(range(count), key=key)
    return [order[s : s + batch_size] for s in range(0, count, batch_size)]


def predict(classify, sentences, batch_size):
    """Class probabilities of every sentence, in file order, from length-sorted batches of `batch_size`."""
    probs = [None] * len(sentences)
    for batch in sorted_batches(len(sentences), lambda i: len(sentences[i]), batch_size):
        out = np.asarray(classify([sentences[i] for i in batch]), dtype=np.float32)
        for i, p in zip(batch, out, strict=True):
            probs[i] = p
    return np.stack(probs)


def median_rate(count, run, runs):
    """Items per second of `run` (the median of `runs` passes after a warm-up), and the last pass's result."""
    run()  # warm-up
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - start)
    return count / statistics.median(times), result


def softmax(logits):
    e = np.exp(logits - logits.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def torch_runner(folder, tok, bf16=False, max_length=128):
    """transformers in f32, or in bf16 under CPU autocast (oneDNN's AMX-BF16 where the CPU has it)."""
    from transformers import RoFormerForSequenceClassification

    model = RoFormerForSequenceClassification.from_pretrained(folder).eval()

    def context():
        return torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()

    def classify(texts):
        enc = tok(texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
        with torch.no_grad(), context():
            logits = model(**enc).logits
        return torch.softmax(logits.float(), -1)

    def forward_ids(ids):
        with torch.no_grad(), context():
            t = torch.tensor([ids])
            return model(input_ids=t, attention_mask=torch.ones_like(t), token_type_ids=torch.zeros_like(t)).logits

    return classify, forward_ids, {"precision": "bf16 (autocast)" if bf16 else "f32"}


def numpy_runner(infer, tok, max_length=128):
    """classify and forward_ids over `infer`, which maps the ONNX inputs (int64 arrays) to logits."""

    def run(ids, mask, types):
        return softmax(infer({"input_ids": ids, "attention_mask": mask, "token_type_ids": types}))

    def classify(texts):
        enc = tok(texts, padding=True, truncation=True, max_length=max_length, return_tensors="np")
        return run(*(np.asarray(enc[n], dtype=np.int64) for n in ONNX_INPUTS))

    def forward_ids(ids):
        ids = np.array([ids], dtype=np.int64)
        return run(ids, np.ones_like(ids), np.zeros_like(ids))

    return classify, forward_ids


def ort_runner(path, tok, precision):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = THREADS
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return *numpy_runner(lambda inputs: session.run(None, inputs)[0], tok), {"precision": precision}


def openvino_runner(path, tok, quantized):
    """OpenVINO's CPU plugin at its defaults but for the thread count; the row says which precision it picked.
    Held to AVX2 (ONEDNN_MAX_CPU_ISA, which its oneDNN reads too), it is asked for f32: at its default bf16 it then
    fails to compile (no Softmax kernel)."""
    import openvino as ov

    config = {"INFERENCE_NUM_THREADS": THREADS}
    if os.environ.get("ONEDNN_MAX_CPU_ISA"):
        config["INFERENCE_PRECISION_HINT"] = "f32"
    core = ov.Core()
    compiled = core.compile_model(core.read_model(str(path)), "CPU", config)
    request = compiled.create_infer_request()
    info = openvino_precision(compiled)
    if quantized:
        info["precision"] = f"int8 static (NNCF), else {info['precision']}"
    return *numpy_runner(lambda inputs: request.infer(inputs)[0], tok), info


def openvino_precision(compiled):
    """The INFERENCE_PRECISION_HINT a compiled model reports, and how many of its runtime graph's matrix products
    (FullyConnected, MatMul) run at each precision."""
    hint = compiled.get_property("INFERENCE_PRECISION_HINT")
    counts = collections.Counter()
    for op in compiled.get_runtime_model().get_ops():
        info = op.get_rt_info()
        layer = info["layerType"].astype(str) if "layerType" in info else op.get_type_name()
        if layer in ("FullyConnected", "MatMul"):
            counts[f"{layer} {info['runtimePrecision'].astype(str)}"] += 1
    precision = hint.get_type_name() if hasattr(hint, "get_type_name") else str(hint)
    matmuls = dict(sorted(counts.items()))
    return {"precision": precision, "inference_precision_hint": precision, "matmul_precisions": matmuls}


def peer_systems(folder, name, skip=(), calibration=None, calibration_size=300):
    """The peers on the model in `folder` that `skip` leaves in, by name, each as a function that loads it and
    returns (classify, forward_ids, info): transformers in f32 and bf16, ONNX Runtime on its f32 and dynamic int8
    exports, OpenVINO on the f32 export at its defaults and on NNCF's static int8 model."""
    tok = tokenizer_for(folder)

    def onnx(i):
        return export_onnx(folder, name)[i]

    systems = {
        "transformers f32": lambda: torch_runner(folder, tok),
        "transformers bf16": lambda: torch_runner(folder, tok, bf16=True),
        "onnxruntime f32": lambda: ort_runner(onnx(0), tok, "f32"),
        "onnxruntime int8": lambda: ort_runner(onnx(1), tok, "int8 dynamic"),
        "openvino default": lambda: openvino_runner(onnx(0), tok, quantized=False),
        "openvino int8": lambda: openvino_runner(
            export_openvino_int8(onnx(0), tok, calibration, calibration_size, name), tok, quantized=True
        ),
    }
    assert list(systems) == PEERS
    return {n: build for n, build in systems.items() if not skipped(n, skip)}


def skipped(name, skip):
    """Whether `skip` names the peer `name`: by its name with a dash for the space (openvino-int8), or by its family
    (openvino)."""
    slug = name.replace(" ", "-")
    return any(slug == s or slug.startswith(s + "-") for s in skip)


def ours_args(precision):
    return {"f32": [], "int8": ["--quantize", "int8"], "bf16": ["--dtype", "bf16"]}[precision]


def ours_rate(folder, data, batch_size, precision, runs):
    """Sentences/s of `classify` (the median of `runs` processes), and the probabilities of the last one, in file
    order (its jsonl output, kept under OUT/predictions)."""
    exe = BINARIES["classify"]
    output = OUT / "predictions" / f"{Path(folder).name}-b{batch_size}-{precision}.jsonl"
    output.parent.mkdir(parents=True, exist_ok=True)
    args = [str(exe), "--model", str(folder), "--input", str(data), "--task", "sst2", "--threads", str(THREADS),
            "--batch-size", str(batch_size), "--format", "jsonl", "--output", str(output), *ours_args(precision)]
    rates = []
    for _ in range(runs):
        done = subprocess.run(args, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(done.stderr)
        rates.append(float(re.search(r"\(([\d.]+) rows/s\)", done.stderr).group(1)))
    return statistics.median(rates), read_predictions(output)


def read_predictions(path):
    """The `probabilities` of `classify --format jsonl` output, in the order of the rows' `index`."""
    lines = Path(path).read_text().splitlines()
    rows = sorted((json.loads(line) for line in lines if line.strip()), key=lambda r: r["index"])
    return np.array([r["probabilities"] for r in rows], dtype=np.float32)


def ours_latency(folder, lengths, precision):
    """Batch-1 latency by `cargo bench --bench latency` (precision f32, int8 or bf16), in ms by length; empty, with
    the error printed, when the bench fails (as with a precision it does not take)."""
    bench = [str(BINARIES["latency"])] if BINARIES["latency"] else ["cargo", "bench", "-q", "--bench", "latency", "--"]
    done = subprocess.run(
        [*bench, str(folder), ",".join(map(str, lengths)), precision, "50", str(THREADS)],
        capture_output=True, text=True, cwd=ROOT,
    )
    if done.returncode != 0:
        print(f"      latency bench failed for {precision}: {done.stderr.strip()[-500:]}", flush=True)
        return {}
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


def reference_of(name):
    """The f32 row of the same family: ours against ours, the peers (the same weights) against transformers."""
    return "roformer f32" if name.startswith("roformer") else "transformers f32"


def add_agreement(rows, probs):
    """Adds to each row its agreement with its reference row on the same sentences: the share of equal argmax
    labels, and the largest absolute difference of a class probability (nothing when the reference did not run)."""
    for name, row in rows.items():
        ref = reference_of(name)
        if name == ref or ref not in probs:
            continue
        a, b = probs[name], probs[ref]
        assert a.shape == b.shape, (name, a.shape, ref, b.shape)
        row.update(
            reference=ref,
            label_agreement=float(np.mean(a.argmax(-1) == b.argmax(-1))),
            max_abs_prob_diff=float(np.abs(a - b).max()),
        )


def comma_list(choices):
    def parse(text):
        items = [t.strip() for t in text.split(",") if t.strip()]
        bad = [t for t in items if t not in choices]
        if bad:
            raise argparse.ArgumentTypeError(f"{', '.join(bad)}: not among {', '.join(choices)}")
        return items

    return parse


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", default=str(ROOT.parent / "shared/data/glue/SST-2/dev.tsv"))
    parser.add_argument("--vocab", default=str(ROOT.parent / "shared/data/vocab/bert-base-uncased"))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--skip-small", action="store_true", help="leave out the bundled model's shape")
    parser.add_argument("--skip-base", action="store_true", help="leave out the base-size model (the bundled one alone)")
    parser.add_argument(
        "--skip-peers",
        type=comma_list(sorted({n.replace(" ", "-") for n in PEERS} | {n.split()[0] for n in PEERS})),
        default=[],
        help="peers to leave out, comma-separated, by name (transformers-bf16, openvino-int8, ...) or family "
        "(openvino); without transformers-f32 the peers get no agreement columns",
    )
    parser.add_argument(
        "--ours",
        type=comma_list(OURS),
        default=OURS,
        help="our precisions, comma-separated (default f32,int8,bf16; bf16 is `classify --dtype bf16`); without f32 "
        "ours get no agreement columns",
    )
    parser.add_argument(
        "--calibration",
        default=str(ROOT.parent / "shared/data/glue/SST-2/train.tsv"),
        help="sentences NNCF calibrates OpenVINO's int8 model on (SST-2 train; never the dev file)",
    )
    parser.add_argument("--calibration-size", type=int, default=300)
    parser.add_argument("--no-result-file", action="store_true", help="write no file under benchmarks/results/")
    parser.add_argument(
        "--prebuilt",
        help="a folder with our `classify` and `latency` executables built elsewhere (`cargo build --release "
        "--example classify`, `cargo bench --no-run --bench latency`), for a machine without a Rust toolchain; "
        "else cargo builds them",
    )
    parser.add_argument(
        "--level",
        choices=["portable", "avx2", "avx-vnni", "avx512", "avx512-vnni", "avx512-bf16", "amx"],
        help="hold our kernels to this SIMD level (ROFORMER_CPU_LEVEL); with avx2 or avx-vnni, PyTorch's and "
        "OpenVINO's oneDNN and MKL are held to AVX2 too (ONEDNN_MAX_CPU_ISA, MKL_ENABLE_INSTRUCTIONS; OpenVINO then "
        "at f32); ONNX Runtime has no such switch",
    )
    args = parser.parse_args()
    if Path(args.calibration).resolve() == Path(args.data).resolve():
        parser.error("--calibration must not be the file the benchmark scores")
    ours = [p for p in OURS if p in args.ours]
    if args.level:
        os.environ["ROFORMER_CPU_LEVEL"] = args.level
        if args.level in ("avx2", "avx-vnni"):
            os.environ["ONEDNN_MAX_CPU_ISA"] = "AVX2"
            os.environ["MKL_ENABLE_INSTRUCTIONS"] = "AVX2"
    torch.set_num_threads(THREADS)
    OUT.mkdir(parents=True, exist_ok=True)
    if args.prebuilt:
        BINARIES.update(classify=Path(args.prebuilt) / "classify", latency=Path(args.prebuilt) / "latency")
        for name, exe in BINARIES.items():
            if not os.access(exe, os.X_OK):
                parser.error(f"--prebuilt: no executable {name} at {exe}")
    else:
        subprocess.run(["cargo", "build", "-q", "--release", "--example", "classify"], cwd=ROOT, check=True)
        subprocess.run(["cargo", "bench", "-q", "--no-run", "--bench", "latency"], cwd=ROOT, check=True)
    sentences = read_sentences(args.data)
    results = {
        "date": datetime.date.today().isoformat(),
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, {THREADS} threads each",
        "cpu": next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?"),
        "versions": peer_versions(),
        "sentences": len(sentences),
        "simd": simd_summary(),
        "calibration": f"{args.calibration_size} sentences of {Path(args.calibration).name} (seed 0)",
    }
    peers = {"skip": args.skip_peers, "calibration": args.calibration, "calibration_size": args.calibration_size}

    if not args.skip_base:
        base = build_base(args.vocab)
        rows, probs = {}, {}
        for name, build in peer_systems(base, "base", **peers).items():
            classify, forward_ids, info = build()
            rate, probs[name] = median_rate(len(sentences), lambda: predict(classify, sentences, 32), args.runs)
            rows[name] = {"sentences_per_s": rate, **{f"latency_ms_{n}": latency(forward_ids, n) for n in (16, 128)},
                          **info}
            del classify, forward_ids
            print(f"base  {name:18} {rate:8.1f} sentences/s  {info['precision']}", flush=True)
        for precision in ours:
            name = f"roformer {precision}"
            rate, probs[name] = ours_rate(base, args.data, 32, precision, args.runs)
            lat = ours_latency(base, [16, 128], precision)
            rows[name] = {"sentences_per_s": rate, **{f"latency_ms_{n}": lat.get(n) for n in (16, 128)},
                          "precision": precision}
            print(f"base  {name:18} {rate:8.1f} sentences/s", flush=True)
        add_agreement(rows, probs)
        results["base"] = rows

    if not args.skip_small:
        small = ROOT / "models" / "roformer-sst2"
        rows, probs = {}, {}
        for name, build in peer_systems(small, "small", **peers).items():
            classify, forward_ids, info = build()
            rows[name] = {"precision": info["precision"]}
            for b in (1, 32):
                rows[name][f"batch_{b}"], probs[name] = median_rate(
                    len(sentences), lambda: predict(classify, sentences, b), 5
                )
            del classify, forward_ids
            print(f"small {name:18} {rows[name]}", flush=True)
        for precision in ours:
            name = f"roformer {precision}"
            rows[name] = {"precision": precision}
            for b in (1, 32):
                rows[name][f"batch_{b}"], probs[name] = ours_rate(small, args.data, b, precision, 5)
            print(f"small {name:18} {rows[name]}", flush=True)
        add_agreement(rows, probs)
        results["small"] = rows

    (OUT / "results.json").write_text(json.dumps(results, indent=2))
    print_tables(results)
    if not args.no_result_file:
        print(f"\nresult file: {write_result_file(results, args.runs).relative_to(ROOT)}")


# Each row's system (for its version) and the label the pages give it.
SYSTEMS = {
    "transformers f32": ("transformers", "transformers f32"),
    "transformers bf16": ("transformers", "transformers bf16 (autocast)"),
    "onnxruntime f32": ("onnxruntime", "ONNX Runtime f32"),
    "onnxruntime int8": ("onnxruntime", "ONNX Runtime int8 (dynamic)"),
    "openvino default": ("openvino", "OpenVINO default (it picks {precision})"),
    "openvino int8": ("openvino", "OpenVINO int8 (NNCF static)"),
}


crate_version = result_file.crate_version


def write_result_file(results, runs):
    """One result file for this run (benchmarks/README.md gives the schema): the base model's rows and the
    bundled model's (its batch-32 rate as sentences/s, beside its batch-1 rate)."""
    versions = {**results["versions"], "roformer": crate_version()}
    systems = []
    for model, rows in (("base", results.get("base", {})), ("small", results.get("small", {}))):
        for name, row in rows.items():
            system, label = SYSTEMS.get(name, ("roformer", name))
            precision = result_file.precision_of(row.get("precision", "f32"))
            extra = {"batch_1": row["batch_1"]} if model == "small" else {}
            if row.get("inference_precision_hint"):
                extra["inference_precision_hint"] = row["inference_precision_hint"]
            systems.append(result_file.system_row(
                system, versions.get(system), precision, label.format(precision=precision),
                row.get("sentences_per_s", row.get("batch_32")), model=model,
                latency_ms_16=row.get("latency_ms_16"), latency_ms_128=row.get("latency_ms_128"),
                label_agreement=row.get("label_agreement"), max_abs_prob_diff=row.get("max_abs_prob_diff"), **extra))
    level = re.search(r"roformer level (.+?);", results.get("simd", ""))
    workload = ("base-size RoFormer classifier (12 layers, hidden 768, 12 heads, FFN 3072, random init, BERT uncased "
                f"vocab) on SST-2 dev ({results['sentences']} sentences), {THREADS} threads each, length-sorted batches "
                "of 32, tokenization included, model load excluded; batch-1 latency at 16 and 128 tokens, median of 50; "
                "small: the bundled model, batch 32 (and batch 1)")
    return result_file.write("scripts/bench/bench_e2e.py", level.group(1) if level else None, versions, workload,
                             systems, run=f"median of {runs} passes; {results.get('simd', '')}",
                             note=f"OpenVINO int8 calibration: {results.get('calibration')}")


def peer_versions():
    """The versions of the peers that import (a skipped one need not be installed)."""
    versions = {"torch": torch.__version__}
    for module in ("transformers", "onnxruntime", "openvino", "nncf"):
        with contextlib.suppress(ImportError):
            versions[module] = __import__(module).__version__
    return versions


def simd_summary():
    """The CPU's SIMD extensions that matter to the kernels, and the level ours run at."""
    flags = set()
    for line in open("/proc/cpuinfo"):
        if line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
            break
    wanted = ["avx2", "fma", "avx_vnni", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_int8",
              "amx_bf16"]
    has = [f for f in wanted if f in flags]
    level = result_file.kernels_level(flags)
    held = "PyTorch and OpenVINO (at f32) held to AVX2"
    peers = held if os.environ.get("ONEDNN_MAX_CPU_ISA") else "peers at their own best"
    return f"CPU has {' '.join(has) or 'none of ' + ' '.join(wanted)}; roformer level {level}; {peers}"


def fmt(value, spec, suffix=""):
    return "—" if value is None else f"{value:{spec}}{suffix}"


def agreement_cells(row):
    """The agreement columns of a row: 'ref' for a reference row, '—' where its reference did not run."""
    if "reference" not in row:
        return ["—", "—"]
    return [f"{row['label_agreement'] * 100:.1f}%", f"{row['max_abs_prob_diff']:.2g}"]


def print_tables(results):
    print(f"\n{results['date']}, {results['cpu']}, {results['machine']}; {results['versions']}")
    print(results.get("simd", ""))
    print(f"OpenVINO int8 calibration: {results.get('calibration', '?')}")
    print("\nAgreement: the share of argmax labels equal to the f32 reference of the family (transformers f32 for "
          "the peers, roformer f32 for ours), and the largest |Δ probability|.")
    base = results.get("base", {})
    if base:
        print("\nBase size, SST-2 dev, batch 32 | precision | sentences/s | batch-1 latency 16 tokens | 128 tokens "
              "| labels agree | max |Δp| |")
    for name, row in base.items():
        cells = ["ref", "ref"] if name == reference_of(name) else agreement_cells(row)
        print(f"| {name} | {row.get('precision', '?')} | {row['sentences_per_s']:.1f} "
              f"| {fmt(row['latency_ms_16'], '.1f', ' ms')} | {fmt(row['latency_ms_128'], '.1f', ' ms')} "
              f"| {' | '.join(cells)} |")
    for name, row in base.items():
        if row.get("matmul_precisions"):
            print(f"  {name}: INFERENCE_PRECISION_HINT {row['inference_precision_hint']}; matrix products "
                  f"{', '.join(f'{k} ×{v}' for k, v in row['matmul_precisions'].items())}")
    if "small" in results:
        print("\nBundled model's shape, SST-2 dev | precision | batch 1 | batch 32 (sentences/s) | labels agree "
              "| max |Δp| |")
        for name, row in results["small"].items():
            cells = ["ref", "ref"] if name == reference_of(name) else agreement_cells(row)
            print(f"| {name} | {row.get('precision', '?')} | {row['batch_1']:.0f} | {row['batch_32']:.0f} "
                  f"| {' | '.join(cells)} |")


if __name__ == "__main__":
    main()
