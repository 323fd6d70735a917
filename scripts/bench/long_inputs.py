# One long input through the `embed` example, per precision and length: encode time and peak RSS. Run by scripts/bench/long_inputs.sh.
"""Ours on one long input, batch 1, at each length and precision, each run in its own process:
- the encode time is what `embed` reports on stderr ("1 sentences in X s": tokenization and the forward pass,
  model load excluded);
- the peak RSS is /usr/bin/time's (the process's whole life: the model, its packed weights and the pass);
- a 16-token run per precision gives the baseline (load and a short pass), and "RSS over 16" subtracts it.

Precisions: f32 (no flag), int8 (`--quantize int8`), bf16 (`--dtype bf16`), as bench_e2e.py runs `classify`.
Prints a table per precision and writes a result file under benchmarks/results/ (`"kind": "long-inputs"`, the rows'
`long_inputs` field; benchmarks/README.md) unless --no-result-file.
"""

import argparse
import re
import subprocess
import tempfile
from pathlib import Path

import result_file

ROOT = result_file.ROOT
WORDS = "the quick brown fox jumps over a lazy dog and then".split()
FLAGS = {"f32": [], "int8": ["--quantize", "int8"], "bf16": ["--dtype", "bf16"]}
MARK = Path("/tmp/BENCH_RUNNING")


def text(tokens):
    """A line of `tokens` - 2 single-token words (the tokenizer adds [CLS] and [SEP])."""
    return " ".join(WORDS[i % len(WORDS)] for i in range(tokens - 2)) + "\n"


def run(exe, model, tokens, precision, threads, folder):
    """(encode seconds, peak RSS MiB) of one `embed` process on one input of `tokens` tokens."""
    src, out, timing = folder / f"in-{tokens}.txt", folder / "out.jsonl", folder / "time"
    src.write_text(text(tokens))
    done = subprocess.run(
        ["/usr/bin/time", "-f", "%e %M", "-o", str(timing), str(exe), "--model", str(model), "--max-length",
         str(tokens), "--batch-size", "1", "--threads", str(threads), "--input", str(src), "--output", str(out),
         *FLAGS[precision]],
        capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"embed {precision} {tokens}: {done.stderr.strip()[-800:]}")
    found = re.search(r"sentences in ([\d.]+) s", done.stderr)
    _, kb = timing.read_text().split()[-2:]
    return float(found.group(1)), int(kb) / 1024


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=str(ROOT / "target" / "bench-e2e" / "base"))
    parser.add_argument("--embed", default=str(ROOT / "target" / "release" / "examples" / "embed"))
    parser.add_argument("--precisions", default="f32,int8,bf16")
    parser.add_argument("--lengths", default="512,2048,8192,16384")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--commit", help="the commit the --embed binary was built from (default: this checkout's)")
    parser.add_argument("--no-result-file", action="store_true")
    args = parser.parse_args()
    lengths = [int(n) for n in args.lengths.split(",")]
    precisions = args.precisions.split(",")
    rows = []
    level = None
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for precision in precisions:
            MARK.touch()
            try:
                base_s, base_mib = run(args.embed, args.model, 16, precision, args.threads, folder)
                results = {}
                for n in lengths:
                    s, mib = run(args.embed, args.model, n, precision, args.threads, folder)
                    results[str(n)] = {"encode_s": round(s, 3), "peak_rss_mib": round(mib),
                                       "rss_over_16_mib": round(mib - base_mib)}
            finally:
                MARK.unlink(missing_ok=True)
            print(f"\n{precision}: model {args.model}; 16-token run: peak RSS {base_mib:.0f} MiB, encode {base_s:.3f} s")
            print("| tokens | encode (s) | peak RSS (MiB) | RSS over the 16-token run (MiB) |")
            print("| ---: | ---: | ---: | ---: |")
            for n, r in results.items():
                print(f"| {int(n):,} | {r['encode_s']:.2f} | {r['peak_rss_mib']:,} | {r['rss_over_16_mib']:,} |",
                      flush=True)
            label = {"f32": "roformer f32", "int8": "roformer int8 (`--quantize int8`)",
                     "bf16": "roformer bf16 (`--dtype bf16`)"}[precision]
            rows.append(result_file.system_row(
                "roformer", result_file.crate_version(), precision, label, None, threads=args.threads,
                baseline_16={"encode_s": round(base_s, 3), "peak_rss_mib": round(base_mib)}, long_inputs=results))
    if not args.no_result_file:
        level = result_file.kernels_level(set(result_file.cpu_info()["simd_flags"]))
        workload = (f"base-size RoFormer ({args.model}: 12 layers, hidden 768, 12 heads, FFN 3072, random init), "
                    f"the `embed` example, batch 1, one input of {', '.join(map(str, lengths))} tokens, "
                    f"{args.threads} threads, each length in its own process; encode time as embed reports it "
                    "(tokenization and forward, load excluded); peak RSS by /usr/bin/time, and over the same "
                    "precision's 16-token run")
        path = result_file.write("scripts/bench/long_inputs.sh", level, {"roformer": result_file.crate_version()}, workload,
                                 rows, run=f"one process per length, back to back, idle; binary {args.embed}",
                                 kind="long-inputs", commit=args.commit)
        print(f"\nresult file: {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
