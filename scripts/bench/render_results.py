#!/usr/bin/env python3
# Renders the speed tables and charts from benchmarks/results/. Run: python3 scripts/bench/render_results.py [--check]
"""The README's, docs/speed.md's and docs/features.md's speed tables, and one SVG chart per CPU family under
docs/charts/, rendered from the result files in benchmarks/results/ (benchmarks/README.md gives their schema).

Each table sits between `<!-- results:NAME -->` and `<!-- /results -->` in its page; what is between the markers is
this script's, and is replaced on every run. NAME is `summary` (the README: one row per CPU family), a family
(docs/speed.md: its headline run, system by system, with its chart) or `cuda` (docs/features.md: every GPU run).

    python3 scripts/bench/render_results.py          # rewrite the tables and charts
    python3 scripts/bench/render_results.py --check  # exit 1, naming each file and table that differs

Python's standard library only: CI has no plotting package, and the charts are plain SVG written here.
"""

import argparse
import html
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
CHARTS = ROOT / "docs" / "charts"
PAGES = [ROOT / "README.md", ROOT / "docs" / "speed.md", ROOT / "docs" / "features.md"]
# The CPU families, in the order the pages list them; a result's `family` must be one of these.
FAMILIES = {
    "amx": "Intel Xeon with AMX",
    "zen4": "AMD Zen 4",
    "zen5": "AMD Zen 5",
    "avx512": "Other AVX-512 CPUs (no AMX, no AVX512-BF16 on AMD)",
    "avx2": "AVX2 only (AMD Zen 3)",
    "arm": "ARM (aarch64)",
    "wasm": "WebAssembly (in the browser)",
    "cuda": "CUDA",
}
# A family the summary names even with no result, and why it has none.
NOT_MEASURED = {"arm": "not measured: its kernels are tested under qemu only"}
OURS = {"roformer", "roformer-wasm"}
PRECISIONS = ["f32", "int8", "bf16", "f16"]
REQUIRED = ["schema", "bench", "family", "date", "commit", "cpu", "level", "headline", "versions", "source", "systems"]
ROW_REQUIRED = ["system", "version", "precision", "label", "model", "sentences_per_s", "latency_ms_16",
                "latency_ms_128", "label_agreement"]
MARKER = re.compile(r"<!-- results:([a-z0-9]+) -->\n(.*?)<!-- /results -->", re.S)


class Invalid(Exception):
    pass


def load(folder=RESULTS):
    """Every result file, checked against the schema, by family (headline run first, then newest first)."""
    by_family = {}
    for path in sorted(folder.glob("*.json")):
        try:
            doc = json.loads(path.read_text())
        except json.JSONDecodeError as e:
            raise Invalid(f"{path.relative_to(ROOT)}: not JSON ({e})")
        missing = [k for k in REQUIRED if k not in doc]
        if missing:
            raise Invalid(f"{path.relative_to(ROOT)}: missing {', '.join(missing)}")
        if doc["family"] not in FAMILIES:
            raise Invalid(f"{path.relative_to(ROOT)}: family {doc['family']!r} is not one of {', '.join(FAMILIES)}")
        for i, row in enumerate(doc["systems"]):
            missing = [k for k in ROW_REQUIRED if k not in row]
            if missing:
                raise Invalid(f"{path.relative_to(ROOT)}: systems[{i}] lacks {', '.join(missing)}")
        doc["_file"] = path.name
        if doc.get("kind", "speed") != "speed":
            continue  # memory runs (bench_memory.mjs) are kept as data; no table shows them yet
        by_family.setdefault(doc["family"], []).append(doc)
    for family, docs in by_family.items():
        heads = [d["_file"] for d in docs if d["headline"]]
        if len(heads) > 1:
            raise Invalid(f"family {family}: more than one headline result ({', '.join(heads)})")
        docs.sort(key=lambda d: (not d["headline"], [-ord(c) for c in d["date"]], d["_file"]))
    return by_family


def headline(docs):
    return docs[0]


def base_rows(doc):
    """The rows the tables compare: the base-size model's (a result may hold others, such as the browser's small)."""
    return [r for r in doc["systems"] if r.get("model", "base") == "base" and r["sentences_per_s"] is not None]


def num(value):
    if value is None:
        return ""
    return f"{value:,.0f}" if value >= 1000 else f"{value:.1f}"


def best(rows, precision, ours):
    pick = [r for r in rows if r["precision"] == precision and (r["system"] in OURS) == ours]
    return max(pick, key=lambda r: r["sentences_per_s"], default=None)


def peer_name(row):
    return {"onnxruntime": "ONNX Runtime", "openvino": "OpenVINO", "pytorch": "PyTorch"}.get(row["system"], row["system"])


def where(doc):
    """'2026-11-29, AMD EPYC (2-core VM), family 26 model 2, at ab9ec2b': the date and the machine of a result."""
    cpu = doc["cpu"] or {}
    parts = [doc["date"], doc.get("gpu") or "", cpu.get("model") or "", cpu.get("cpuid") or ""]
    text = ", ".join(p for p in parts if p)
    return text + (f", at {doc['commit']}" if doc.get("commit") else "")


def summary_table(by_family):
    lines = ["| CPU family | measured | level | roformer f32 | int8 | bf16 |", "| --- | --- | --- | --- | --- | --- |"]
    for family, title in FAMILIES.items():
        if family == "cuda":
            continue
        docs = by_family.get(family)
        if not docs:
            if family in NOT_MEASURED:
                lines.append(f"| {title} | {NOT_MEASURED[family]} | | | | |")
            continue
        doc = headline(docs)
        rows = base_rows(doc)
        cells = []
        for precision in ["f32", "int8", "bf16"]:
            ours, peer = best(rows, precision, True), best(rows, precision, False)
            if ours is None:
                cells.append("")
            elif peer is None:
                cells.append(f"**{num(ours['sentences_per_s'])}**")
            else:
                cells.append(f"**{num(ours['sentences_per_s'])}** ({peer_name(peer)} {num(peer['sentences_per_s'])})")
        lines.append(f"| {title} | {where(doc)} | `{doc['level']}` | {' | '.join(cells)} |")
    return "\n".join(lines) + "\n"


def family_table(family, docs):
    doc = headline(docs)
    rows = base_rows(doc)
    versions = ", ".join(f"{k} {v}" for k, v in doc["versions"].items() if v)
    out = [f"{where(doc)}; level `{doc['level']}`; run {doc['run']}"
           + (f"; {versions}" if versions else "") + f". From `benchmarks/results/{doc['_file']}`.", ""]
    out += ["| system | sentences/s | against the fastest peer | batch-1 latency 16 / 128 tokens | labels |",
            "| --- | --- | --- | --- | --- |"]
    for row in sorted(rows, key=order):
        rate = num(row["sentences_per_s"])
        ratio = ""
        if row["system"] in OURS:
            rate = f"**{rate}**"
            peer = best(rows, row["precision"], False)
            if peer:
                ratio = f"{row['sentences_per_s'] / peer['sentences_per_s']:.2f}× {peer['label']}"
        lat = ""
        if row["latency_ms_16"] is not None or row["latency_ms_128"] is not None:
            lat = f"{num(row['latency_ms_16']) or '—'} / {num(row['latency_ms_128']) or '—'} ms"
        agree = "" if row["label_agreement"] is None else f"{row['label_agreement'] * 100:.1f}%"
        out.append(f"| {row['label']} | {rate} | {ratio} | {lat} | {agree} |")
    out += ["", f"![sentences/s on {FAMILIES[family]}](charts/{family}.svg)"]
    others = [d["_file"] for d in docs[1:]]
    if others:
        out += ["", "Other runs: " + ", ".join(f.removesuffix(".json") for f in others) + "."]
    return "\n".join(out) + "\n"


def cuda_table(docs):
    out = ["| date | GPU, host | commit | roformer f16 | PyTorch eager fp16 | ratio | PyTorch batch-1 16 / 128 tokens |",
           "| --- | --- | --- | --- | --- | --- | --- |"]
    for doc in sorted(docs, key=lambda d: (d["date"], d["headline"], d["_file"])):
        rows = base_rows(doc)
        ours, peer = best(rows, "f16", True), best(rows, "f16", False)
        ratio = f"{ours['sentences_per_s'] / peer['sentences_per_s']:.2f}×" if ours and peer else ""
        lat = f"{num(peer['latency_ms_16'])} / {num(peer['latency_ms_128'])} ms" if peer else ""
        out.append(f"| {doc['date']} | {doc.get('gpu')}, {doc['cpu']['model']} | {doc['commit'] or '—'} | "
                   f"**{num(ours['sentences_per_s']) if ours else ''}** | {num(peer['sentences_per_s']) if peer else ''} | "
                   f"{ratio} | {lat} |")
    out += ["", "![sentences/s on CUDA](charts/cuda.svg)"]
    return "\n".join(out) + "\n"


def order(row):
    """Rows grouped by precision, ours first in each, then the peers fastest first."""
    p = PRECISIONS.index(row["precision"]) if row["precision"] in PRECISIONS else len(PRECISIONS)
    return (p, row["system"] not in OURS, -row["sentences_per_s"], row["label"])


COLOURS = {"f32": ("#1f5f99", "#9fc0de"), "int8": ("#b3541e", "#efb98f"), "bf16": ("#2e7d32", "#a5d6a7"),
           "f16": ("#6a1b9a", "#ce93d8")}


def chart(family, doc):
    """Horizontal bars of sentences/s, one per system and precision: ours dark, the peers light."""
    rows = sorted(base_rows(doc), key=order)
    label_w, bar_w, row_h, top = 300, 380, 22, 62
    width, height = label_w + bar_w + 80, top + row_h * len(rows) + 30
    peak = max((r["sentences_per_s"] for r in rows), default=1) or 1
    title = f"{FAMILIES[family]}: sentences/s, base-size model, SST-2 dev"
    sub = where(doc) + (f", level {doc['level']}" if doc["level"] else "")
    flags = "CPU flags: " + (" ".join((doc["cpu"] or {}).get("simd_flags") or []) or "not recorded")
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="#ffffff"/>',
           f'<text x="8" y="18" font-size="14" font-weight="bold">{html.escape(title)}</text>',
           f'<text x="8" y="35" fill="#555555">{html.escape(sub)}</text>',
           f'<text x="8" y="52" fill="#555555">{html.escape(flags)}</text>']
    for i, row in enumerate(rows):
        y = top + i * row_h
        ours = row["system"] in OURS
        dark, light = COLOURS.get(row["precision"], ("#444444", "#bbbbbb"))
        w = max(1, round(bar_w * row["sentences_per_s"] / peak))
        weight = ' font-weight="bold"' if ours else ""
        label = html.escape(row["label"].replace("`", ""))
        out.append(f'<text x="{label_w - 6}" y="{y + 15}" text-anchor="end"{weight}>{label}</text>')
        out.append(f'<rect x="{label_w}" y="{y + 3}" width="{w}" height="{row_h - 6}" fill="{dark if ours else light}"/>')
        out.append(f'<text x="{label_w + w + 4}" y="{y + 15}"{weight}>{num(row["sentences_per_s"])}</text>')
    out.append(f'<text x="8" y="{height - 10}" fill="#555555">'
               f'{html.escape("dark bars: roformer; light: the peers; colour: the precision. From benchmarks/results/" + doc["_file"])}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def render(by_family):
    """What every marked table and every chart should hold: {(page, name): text}, {chart path: text}."""
    tables = {"summary": summary_table(by_family)}
    charts = {}
    for family, docs in by_family.items():
        if family == "cuda":
            tables["cuda"] = cuda_table(docs)
        else:
            tables[family] = family_table(family, docs)
        charts[CHARTS / f"{family}.svg"] = chart(family, headline(docs))
    return tables, charts


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 where a table or chart differs")
    args = parser.parse_args()
    try:
        by_family = load()
    except Invalid as e:
        print(f"benchmarks/results: {e}", file=sys.stderr)
        return 1
    tables, charts = render(by_family)
    problems, seen = [], set()
    for page in PAGES:
        text = page.read_text()
        rel = page.relative_to(ROOT)

        def replace(m):
            name = m.group(1)
            seen.add(name)
            if name not in tables:
                problems.append(f"{rel}: table results:{name} has no result in benchmarks/results/")
                return m.group(0)
            if args.check and m.group(2) != tables[name]:
                problems.append(f"{rel}: table results:{name} differs from what benchmarks/results/ renders")
            return f"<!-- results:{name} -->\n{tables[name]}<!-- /results -->"

        new = MARKER.sub(replace, text)
        if not args.check and new != text:
            page.write_text(new)
    speed = (ROOT / "docs" / "speed.md").read_text()
    for family in by_family:
        if family != "cuda" and f"<!-- results:{family} -->" not in speed:
            problems.append(f"docs/speed.md: no table results:{family}, though benchmarks/results/ has that family")
    for name in tables:
        if name not in seen:
            problems.append(f"no page has the table results:{name} (<!-- results:{name} --> ... <!-- /results -->)")
    if not args.check:
        CHARTS.mkdir(parents=True, exist_ok=True)
    for path, svg in charts.items():
        rel = path.relative_to(ROOT)
        if not path.exists() or path.read_text() != svg:
            if args.check:
                problems.append(f"{rel}: chart differs from what benchmarks/results/ renders")
            else:
                path.write_text(svg)
    for path in sorted(CHARTS.glob("*.svg")) if CHARTS.exists() else []:
        if path not in charts:
            problems.append(f"{path.relative_to(ROOT)}: a chart of no family in benchmarks/results/")
    if args.check and problems:
        print("\n".join(problems), file=sys.stderr)
        print("run `python3 scripts/bench/render_results.py` and commit what it writes", file=sys.stderr)
        return 1
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
