# The roformer-rs wheel against sentence-transformers and transformers (torch), and against the Rust embed example, on SST-2 dev. Run: .venv/bin/python scripts/bench/bench_python.py [--runs 3]
"""Side by side on this machine, in one run, 2 threads each, on SST-2 dev (872 sentences) and a base-size RoFormer
(12 layers, hidden 768, 12 heads, FFN 3072, random init, BERT uncased vocab), as a sentence-transformers folder
(Transformer, mean Pooling, max_seq_length 128) that every system loads:
- `encode`: roformer_rs.SentenceEncoder at float32, int8 and bfloat16, against sentence-transformers 6 on torch
  (f32; bf16 under torch.autocast where the CPU has AVX512-BF16 or AMX; int8 by torch's dynamic quantization of
  the Linear layers), and against the crate's own `embed` example at each precision (the binding's cost: both
  timed the same way, one `encode` call over the whole file in a new process);
- `pipeline("text-classification")`: roformer_rs against transformers' pipeline on torch f32, the sentences given
  to both sorted by length, batches of 32;
- fastembed (ONNX Runtime), where installed, on the same encoder exported to ONNX (f32) with mean pooling.

Usage:
    python3 -m venv .venv && .venv/bin/pip install ./python torch "transformers>=5" "sentence-transformers>=6"
    cargo build --release --example embed
    .venv/bin/python scripts/bench/bench_python.py [--data ../shared/data/glue/SST-2/dev.tsv] [--runs 3]

Each figure is sentences/s, the median of --runs passes after a warm-up pass (model load excluded; tokenization
included); the binding's cost is the median of --cold-runs new processes on each side, the wheel's and the embed
example's alternated, each timing its one `encode` call. Agreement is
against sentence-transformers f32 (the largest absolute difference of an embedding value, and the smallest cosine
similarity of a row), or transformers' f32 pipeline (labels equal, largest score difference). A result file goes
to benchmarks/results/ (`"kind": "python"`) unless --no-result-file.
"""

import argparse
import json
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import result_file  # noqa: E402
from bench_e2e import build_base, read_sentences, tokenizer_for  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "target" / "bench-python"
THREADS = 2
BATCH = 32
EMBED = ROOT / "target" / "release" / "examples" / "embed"


def sentence_transformers_folder(base, tok):
    """The base classifier as a sentence-transformers folder: its weights, the tokenizer as tokenizer.json (the
    fast tokenizer built from the vocab dict), mean pooling, max_seq_length 128."""
    folder = OUT / "st-base"
    if (folder / "modules.json").exists():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("config.json", "model.safetensors"):
        (folder / name).write_bytes((base / name).read_bytes())
    tok.model_max_length = 512
    tok.save_pretrained(folder)
    (folder / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ]))
    (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 128, "do_lower_case": False}))
    (folder / "1_Pooling").mkdir(exist_ok=True)
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({
        "word_embedding_dimension": 768, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": True,
        "pooling_mode_max_tokens": False, "pooling_mode_mean_sqrt_len_tokens": False,
    }))
    return folder


def fastembed_folder(folder):
    """The encoder of the sentence-transformers folder exported to ONNX (f32, the last hidden state) beside its
    tokenizer files: what fastembed loads from a local path."""
    out = OUT / "fastembed-base"
    if (out / "model.onnx").exists():
        return out
    from transformers import RoFormerModel

    out.mkdir(parents=True, exist_ok=True)
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "config.json"):
        if (folder / name).exists():
            (out / name).write_bytes((folder / name).read_bytes())
    config = json.loads((out / "tokenizer_config.json").read_text())
    config["model_max_length"] = 128  # the sentence-transformers folder's max_seq_length
    (out / "tokenizer_config.json").write_text(json.dumps(config))
    model = RoFormerModel.from_pretrained(folder).eval()
    ids = torch.ones(2, 8, dtype=torch.long)
    axes = {0: "batch", 1: "sequence"}
    torch.onnx.export(model, (ids, torch.ones_like(ids), torch.zeros_like(ids)), str(out / "model.onnx"),
                      input_names=["input_ids", "attention_mask", "token_type_ids"],
                      output_names=["last_hidden_state"], opset_version=17, dynamo=False,
                      dynamic_axes={"input_ids": axes, "attention_mask": axes, "token_type_ids": axes,
                                    "last_hidden_state": axes})
    return out


def median_rate(count, run, runs):
    """Sentences/s of `run` (the median of `runs` passes after a warm-up), and the last pass's result."""
    run()
    times, result = [], None
    for _ in range(runs):
        start = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - start)
    return count / statistics.median(times), result


def cpu_has_bf16():
    flags = open("/proc/cpuinfo").read()
    return "avx512_bf16" in flags or "amx_bf16" in flags


def embed_example_rate(folder, sentences_file, flags, runs):
    """The Rust embed example's own rate (its `encode` call), the median of `runs` processes; and its output."""
    out = OUT / f"embed{'-'.join([''] + [f.strip('-') for f in flags])}.npy"
    rates = []
    for _ in range(runs):
        done = subprocess.run([str(EMBED), "--model", str(folder), "--input", str(sentences_file), "--output", str(out),
                               "--threads", str(THREADS), "--batch-size", str(BATCH), *flags],
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(done.stderr)
        rates.append(float(re.search(r"\(([\d.]+) sentences/s\)", done.stderr).group(1)))
    return statistics.median(rates), np.load(out)


COLD = """
import sys, time
from roformer_rs import SentenceEncoder
folder, precision, path = sys.argv[1:4]
sentences = open(path, encoding="utf-8").read().split("\\n")[:-1]
model = SentenceEncoder(folder, precision=precision, threads=%d)
start = time.perf_counter()
model.encode(sentences, batch_size=%d)
print(len(sentences) / (time.perf_counter() - start))
""" % (THREADS, BATCH)


def binding_cold_rate(folder, sentences_file, precision, runs):
    """The wheel as the embed example is timed: one `encode` call in a fresh process, the median of `runs`
    processes (the first call pays for the thread pool's start and the first touches of the weights)."""
    rates = []
    for _ in range(runs):
        done = subprocess.run([sys.executable, "-c", COLD, str(folder), precision, str(sentences_file)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(done.stderr)
        rates.append(float(done.stdout.strip().splitlines()[-1]))
    return statistics.median(rates)


def agreement(ours, reference):
    ours, reference = np.asarray(ours, dtype=np.float64), np.asarray(reference, dtype=np.float64)
    cos = (ours * reference).sum(1) / (np.linalg.norm(ours, axis=1) * np.linalg.norm(reference, axis=1))
    return {"max_abs_diff": float(np.abs(ours - reference).max()), "min_cosine": float(cos.min())}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(ROOT.parent / "shared" / "data" / "glue" / "SST-2" / "dev.tsv"))
    parser.add_argument("--vocab", default=str(ROOT.parent / "shared" / "data" / "vocab" / "bert-base-uncased"))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--cold-runs", type=int, default=5, help="new processes per side for the binding's cost")
    parser.add_argument("--no-result-file", action="store_true")
    args = parser.parse_args()

    import roformer_rs
    import sentence_transformers
    import transformers
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(THREADS)
    sentences = read_sentences(args.data)
    n = len(sentences)
    OUT.mkdir(parents=True, exist_ok=True)
    base = build_base(args.vocab, OUT)
    tok = tokenizer_for(base)
    folder = sentence_transformers_folder(base, tok)
    sentences_file = OUT / "sentences.txt"
    sentences_file.write_text("\n".join(sentences) + "\n", encoding="utf-8")
    rows, results = [], {}

    def row(name, rate, **more):
        results[name] = {"sentences_per_s": rate, **more}
        extra = "  ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in more.items())
        print(f"{name:<44} {rate:8.1f} sentences/s  {extra}", flush=True)

    # sentence-transformers on torch.
    st = SentenceTransformer(str(folder), device="cpu")
    assert st.max_seq_length == 128, st.max_seq_length
    st_rate, st_f32 = median_rate(n, lambda: st.encode(sentences, batch_size=BATCH), args.runs)
    row("sentence-transformers f32", st_rate)
    if cpu_has_bf16():
        def st_bf16():
            with torch.autocast("cpu", dtype=torch.bfloat16):
                return st.encode(sentences, batch_size=BATCH)
        rate, out = median_rate(n, st_bf16, args.runs)
        row("sentence-transformers bf16 (autocast)", rate, **agreement(out, st_f32))
    st_int8 = torch.ao.quantization.quantize_dynamic(st, {torch.nn.Linear}, dtype=torch.qint8)
    rate, out = median_rate(n, lambda: st_int8.encode(sentences, batch_size=BATCH), args.runs)
    row("sentence-transformers int8 (torch dynamic)", rate, **agreement(out, st_f32))
    del st, st_int8

    # fastembed (ONNX Runtime) on the same encoder exported to ONNX, mean pooling; sentences sorted by length,
    # since it batches in the order given.
    try:
        from fastembed import TextEmbedding
        from fastembed.common.model_description import ModelSource, PoolingType
    except ImportError:
        print("fastembed is not installed: its row is left out")
    else:
        import fastembed

        TextEmbedding.add_custom_model(model="local/roformer-base", pooling=PoolingType.MEAN, normalization=False,
                                       sources=ModelSource(hf="local/roformer-base"), dim=768, model_file="model.onnx")
        fe = TextEmbedding(model_name="local/roformer-base", specific_model_path=str(fastembed_folder(folder)),
                           threads=THREADS)
        order = sorted(range(n), key=lambda i: len(sentences[i]))
        rate, out = median_rate(n, lambda: np.stack(list(fe.embed([sentences[i] for i in order], batch_size=BATCH))),
                                args.runs)
        back = np.empty_like(out)
        back[order] = out
        row(f"fastembed {fastembed.__version__} f32 (ONNX Runtime)", rate, **agreement(back, st_f32))
        del fe

    # The wheel, and the Rust example at the same precision: the wheel's own rate (warm, as the peers'), and
    # one call in a new process for both, alternated so that the machine's drift falls on both alike.
    for precision, flags in (("float32", []), ("int8", ["--quantize", "int8"]), ("bfloat16", ["--dtype", "bf16"])):
        model = roformer_rs.SentenceEncoder(folder, precision=precision, threads=THREADS)
        rate, ours = median_rate(n, lambda: model.encode(sentences, batch_size=BATCH), args.runs)
        del model
        cold, rust_rates, rust = [], [], None
        for _ in range(args.cold_runs):
            rust_rate, rust = embed_example_rate(folder, sentences_file, flags, 1)
            rust_rates.append(rust_rate)
            cold.append(binding_cold_rate(folder, sentences_file, precision, 1))
        cold_rate, rust_rate = statistics.median(cold), statistics.median(rust_rates)
        row(f"roformer_rs {precision}", rate, **agreement(ours, st_f32),
            vs_sentence_transformers_f32=rate / st_rate, equal_to_embed_example=bool(np.array_equal(ours, rust)))
        row(f"roformer_rs {precision}, one call in a new process", cold_rate, vs_embed_example=cold_rate / rust_rate)
        row(f"embed example {precision}, one call in a new process", rust_rate)

    # transformers' text-classification pipeline against the wheel's.
    by_length = sorted(sentences, key=len)
    hf = transformers.pipeline("text-classification", model=str(base), tokenizer=tok, device="cpu",
                               batch_size=BATCH, truncation=True, max_length=128)
    hf_rate, hf_out = median_rate(n, lambda: hf(by_length), args.runs)
    row("transformers pipeline f32", hf_rate)
    ours_pipe = roformer_rs.pipeline("text-classification", model=base, threads=THREADS, batch_size=BATCH,
                                     max_seq_length=128)
    rate, out = median_rate(n, lambda: ours_pipe(by_length), args.runs)
    labels = float(np.mean([a["label"] == b["label"] for a, b in zip(out, hf_out)]))
    diff = float(max(abs(a["score"] - b["score"]) for a, b in zip(out, hf_out)))
    row("roformer_rs pipeline float32", rate, label_agreement=labels, max_abs_score_diff=diff,
        vs_transformers=rate / hf_rate)

    cpu = result_file.cpu_info()
    print(f"\n{time.strftime('%Y-%m-%d')}, {cpu['model']} ({cpu['cpuid']}, {cpu['cores']} cores, "
          f"{' '.join(cpu['simd_flags'])}), torch {torch.__version__}, transformers {transformers.__version__}, "
          f"sentence-transformers {sentence_transformers.__version__}, roformer_rs {roformer_rs.__version__}")
    (OUT / "results.json").write_text(json.dumps(results, indent=2))
    if not args.no_result_file:
        systems = []
        for name, r in results.items():
            system = ("roformer" if name.startswith("roformer_rs") else "roformer-embed" if name.startswith("embed")
                      else "transformers" if name.startswith("transformers") else "fastembed"
                      if name.startswith("fastembed") else "sentence-transformers")
            extra = {k: v for k, v in r.items() if k != "sentences_per_s"}
            precision = result_file.precision_of(name.replace("bfloat16", "bf16").replace("float32", "f32"))
            systems.append(result_file.system_row(system, None, precision, name, r["sentences_per_s"], **extra))
        versions = {"torch": torch.__version__, "transformers": transformers.__version__,
                    "sentence-transformers": sentence_transformers.__version__, "roformer": roformer_rs.__version__}
        workload = (f"base-size RoFormer (12 layers, hidden 768, random init, BERT uncased vocab) as a "
                    f"sentence-transformers folder (mean pooling, max_seq_length 128) on SST-2 dev ({n} sentences), "
                    f"{THREADS} threads each, batches of {BATCH}, median of {args.runs} passes after a warm-up")
        path = result_file.write("scripts/bench/bench_python.py", None, versions, workload, systems,
                                 run=f"median of {args.runs} passes", kind="python")
        print(f"result file: {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
