# Generation speed, ours against junnyu's generate. Run: PYTHONPATH=/tmp/jr:/tmp/tf418 .venv/bin/python scripts/bench/bench_generate.py [--runs 3]
"""Generation speed: a base-size sim checkpoint generating 32 samples of up to 32 tokens for one source, ours against
junnyu's `generate` (his `roformer` 0.4.3 under transformers 4.18, with its key-value cache), in one run on one CPU.

    PYTHONPATH=/tmp/jr:/tmp/tf418 .venv/bin/python scripts/bench/bench_generate.py [--runs 3] [--threads 2]

(see ../shared/notes/reference-envs.md for the side folders). Both sample with top_p 0.95 and top_k 50 (the authors'
recipe: `generate(do_sample=True, top_p=0.95)`, whose top_k defaults to 50) and no end token, so every sample runs to
32 tokens. Batch 1 is the recipe's way, one sample per call; batch 32 is one call decoding the 32 samples together
(`num_return_sequences=32` for the peer). Throughput is the best of --runs, in generated tokens per second.
"""

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time
import types
from pathlib import Path

stub = types.ModuleType("transformers.dependency_versions_check")
stub.dep_version_check = lambda *args, **kwargs: None
sys.modules["transformers.dependency_versions_check"] = stub

import torch  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402
from transformers import BertTokenizer  # noqa: E402

from roformer import RoFormerConfig, RoFormerForCausalLM  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SAMPLES, MAX_NEW = 32, 32
TEXT = "广州和深圳哪个好？"


def cpu_line():
    flags = set(re.findall(r"avx512[a-z_]*|avx2|avx_vnni", Path("/proc/cpuinfo").read_text()))
    model = next((l.split(":", 1)[1].strip() for l in Path("/proc/cpuinfo").read_text().splitlines()
                  if l.startswith("model name")), platform.processor())
    return f"{model}, {os.cpu_count()} cores, SIMD: {' '.join(sorted(flags))}"


def checkpoint(folder):
    """A base-size sim checkpoint (12 layers, hidden 768, 12 heads, FFN 3072, a 12000-token char vocab, pooler),
    random init, saved as the published ones are (no decoder weight, is_decoder true)."""
    if (folder / "model.safetensors").exists():
        return
    folder.mkdir(parents=True, exist_ok=True)
    real = (ROOT.parent / "shared/data/vocab/roformer_chinese_base/vocab.txt").read_text(encoding="utf-8").split("\n")
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    chars = [t for t in real if len(t) == 1 and t not in specials]
    rest = [t for t in real if len(t) > 1 and t not in specials and t.strip()]
    vocab = (specials + chars + rest)[:12000]
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    (folder / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "BertTokenizer"}))
    config = RoFormerConfig(vocab_size=len(vocab), embedding_size=768, hidden_size=768, num_hidden_layers=12,
                            num_attention_heads=12, intermediate_size=3072, max_position_embeddings=512,
                            is_decoder=True, pooler_activation="linear", pad_token_id=0)
    torch.manual_seed(0)
    model = RoFormerForCausalLM(config).eval()
    skip = {"cls.predictions.decoder.weight", "cls.predictions.decoder.bias"}
    state = {k: v.clone().contiguous() for k, v in model.state_dict().items() if k not in skip}
    save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})
    cfg = json.loads(config.to_json_string())
    cfg["architectures"] = ["RoFormerForCausalLM"]
    (folder / "config.json").write_text(json.dumps(cfg, indent=1))


def peer(folder, source, runs):
    config = RoFormerConfig.from_pretrained(str(folder))
    # transformers 4.18 reads no safetensors: load the state by hand, the decoder tied to the word embeddings.
    model = RoFormerForCausalLM(config)
    missing, unexpected = model.load_state_dict(load_file(str(folder / "model.safetensors")), strict=False)
    assert set(missing) <= {"cls.predictions.decoder.weight", "cls.predictions.decoder.bias"} and not unexpected
    model.tie_weights()
    model.eval()
    ids = torch.tensor([source])
    kwargs = dict(do_sample=True, top_p=0.95, top_k=50, max_length=len(source) + MAX_NEW, min_length=0,
                  pad_token_id=0, eos_token_id=None)
    out = {}
    with torch.no_grad():
        model.generate(ids, **kwargs)  # warm-up
        for batch in (1, SAMPLES):
            best = 0.0
            for run in range(runs):
                torch.manual_seed(run)
                start, tokens = time.perf_counter(), 0
                for _ in range(SAMPLES // batch):
                    generated = model.generate(ids, num_return_sequences=batch, **kwargs)
                    tokens += generated[:, len(source):].numel()
                best = max(best, tokens / (time.perf_counter() - start))
            out[batch] = best
    return out


def ours(folder, source, runs, quantize):
    cmd = ["cargo", "bench", "-q", "--bench", "generate", "--", str(folder), ",".join(map(str, source)), str(MAX_NEW),
           quantize, str(runs)]
    text = subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, text=True).stdout
    return {int(b): float(t) for b, t in re.findall(r"batch=(\d+) tokens_per_s=([\d.]+)", text)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--folder", default=str(ROOT / "target/bench-generate/sim_base"))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    os.environ["RAYON_NUM_THREADS"] = str(args.threads)
    folder = Path(args.folder)
    checkpoint(folder)
    source = BertTokenizer(str(folder / "vocab.txt"))(TEXT)["input_ids"]
    # Ours first builds the bench binary: build outside the timing, then run alone.
    subprocess.run(["cargo", "bench", "--no-run", "-q", "--bench", "generate"], cwd=ROOT, check=True)
    rows = {"junnyu generate (torch " + torch.__version__ + ")": peer(folder, source, args.runs),
            "ours f32": ours(folder, source, args.runs, "f32"),
            "ours int8": ours(folder, source, args.runs, "int8")}
    print(f"{time.strftime('%Y-%m-%d')}, {cpu_line()}, {args.threads} threads")
    print(f"base-size sim, source of {len(source)} tokens, {SAMPLES} samples x {MAX_NEW} new tokens, tokens/s "
          f"(best of {args.runs})")
    base = rows["junnyu generate (torch " + torch.__version__ + ")"]
    print("| system | batch 1 | batch 32 |")
    print("| --- | --- | --- |")
    for name, r in rows.items():
        cells = [f"{r[b]:.1f}" + ("" if r is base else f" ({r[b] / base[b]:.2f}x)") for b in (1, SAMPLES)]
        print(f"| {name} | {cells[0]} | {cells[1]} |")


if __name__ == "__main__":
    main()
