#!/usr/bin/env python3
# Renders the speed tables and charts from benchmarks/results/. Run: python3 scripts/bench/render_results.py [--check]
"""The README's, docs/speed.md's and docs/features.md's speed tables, and one SVG chart per CPU family under
docs/charts/, rendered from the result files in benchmarks/results/ (benchmarks/README.md gives their schema); and
docs/long-inputs.md's long-input tables (`longinputs`: ours per precision and length, with memory; `longpeers`: ours
against the peers, with the chart docs/charts/long-peers.svg), from the headline `long-inputs` and `long-peers` runs.

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
PAGES = [ROOT / "README.md", ROOT / "docs" / "speed.md", ROOT / "docs" / "features.md", ROOT / "docs" / "long-inputs.md"]
# The kinds of run with a table of their own (not per family): the headline run of each is shown.
LONG_KINDS = ["long-inputs", "long-peers"]
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
        if doc.get("kind") in LONG_KINDS:
            by_family.setdefault(doc["kind"], []).append(doc)
            continue
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


def seconds(value):
    return "" if value is None else (f"{value:,.0f}" if value >= 100 else f"{value:.2f}" if value < 10 else f"{value:.1f}")


def lengths_of(doc):
    found = {int(n) for r in doc["systems"] for n in (r.get("long_inputs") or {})}
    return sorted(found)


def long_cell(row, n):
    r = (row.get("long_inputs") or {}).get(str(n)) or {}
    if "encode_s" in r:
        return r["encode_s"], seconds(r["encode_s"])
    return None, r.get("error") or row.get("error") or "—"


def others(docs):
    rest = [d["_file"] for d in docs[1:]]
    return ["", "Other runs: " + ", ".join(f.removesuffix(".json") for f in rest) + "."] if rest else []


def long_inputs_table(docs):
    """Ours on one long input, per length: each precision's encode time (and its speed-up over f32), peak RSS and RSS
    over that precision's 16-token run."""
    doc = headline(docs)
    rows = {r["precision"]: r for r in doc["systems"]}
    precisions = [p for p in PRECISIONS if p in rows]
    flags = " ".join((doc["cpu"] or {}).get("simd_flags") or [])
    out = [f"{where(doc)} (flags: {flags}); level `{doc['level']}`; {doc['run']}. From "
           f"`benchmarks/results/{doc['_file']}`.", ""]
    head = ["tokens"] + [f"{p} encode (s)" for p in precisions] + [f"{p} peak RSS, over 16 tokens (MiB)" for p in precisions]
    out += ["| " + " | ".join(head) + " |", "| ---: |" + " ---: |" * (len(head) - 1)]
    base = rows[precisions[0]]["baseline_16"] if "baseline_16" in rows[precisions[0]] else None
    for n in lengths_of(doc):
        f32 = long_cell(rows["f32"], n)[0] if "f32" in rows else None
        times, mems = [], []
        for p in precisions:
            value, text = long_cell(rows[p], n)
            if value is not None and f32 and p != "f32":
                text += f" ({f32 / value:.2f}×)"
            times.append(text)
            r = rows[p]["long_inputs"].get(str(n)) or {}
            mems.append(f"{r['peak_rss_mib']:,}, +{r['rss_over_16_mib']:,}" if "peak_rss_mib" in r else "—")
        out.append(f"| {n:,} | " + " | ".join(times + mems) + " |")
    if base is not None:
        out += ["", "The 16-token runs (load included) peak at " + ", ".join(
            f"{rows[p]['baseline_16']['peak_rss_mib']:,} MiB ({p})" for p in precisions) + "; (N×) is f32's time over "
            "that precision's."]
    return "\n".join(out + others(docs)) + "\n"


def long_peers_table(docs):
    """Ours against the peers on one long input, per length; ours against the fastest peer of its precision."""
    doc = headline(docs)
    lengths = lengths_of(doc)
    rows = sorted(doc["systems"], key=lambda r: (PRECISIONS.index(r["precision"]) if r["precision"] in PRECISIONS
                                                  else len(PRECISIONS), r["system"] not in OURS, r["label"]))
    versions = ", ".join(f"{k} {v}" for k, v in doc["versions"].items() if v)
    flags = " ".join((doc["cpu"] or {}).get("simd_flags") or [])
    out = [f"{where(doc)} (flags: {flags}); level `{doc['level']}`; {doc['run']}; {versions}. From "
           f"`benchmarks/results/{doc['_file']}`.", ""]
    head = ["system", "precision"] + [f"{n:,} tokens (s)" for n in lengths] + ["peak RSS (MiB)"]
    out += ["| " + " | ".join(head) + " |", "| --- | --- |" + " ---: |" * (len(head) - 2)]
    for row in rows:
        ours = row["system"] in OURS
        cells = []
        for n in lengths:
            value, text = long_cell(row, n)
            if ours and value is not None:
                peers = [long_cell(r, n)[0] for r in rows if r["precision"] == row["precision"] and r["system"] not in OURS]
                peers = [p for p in peers if p is not None]
                text = f"**{text}**" + (f" ({min(peers) / value:.2f}×)" if peers else "")
            cells.append(text)
        label = f"**{row['label']}**" if ours else row["label"]
        rss = row.get("peak_rss_mib")
        out.append(f"| {label} | {row['precision']} | " + " | ".join(cells) + f" | {'' if rss is None else f'{rss:,}'} |")
    out += ["", "(N×): the fastest peer of the same precision's time over ours; above 1, ours is ahead.", "",
            "![encode time by input length, ours and the peers](charts/long-peers.svg)"]
    return "\n".join(out + others(docs)) + "\n"


def long_peers_chart(doc):
    """One panel per length: horizontal bars of encode seconds (shorter is faster), ours dark, the peers light."""
    lengths = lengths_of(doc)
    rows = sorted(doc["systems"], key=lambda r: (PRECISIONS.index(r["precision"]) if r["precision"] in PRECISIONS
                                                  else len(PRECISIONS), r["system"] not in OURS, r["label"]))
    label_w, bar_w, row_h, top, gap = 300, 380, 20, 62, 28
    panel_h = gap + row_h * len(rows)
    width, height = label_w + bar_w + 110, top + panel_h * len(lengths) + 24
    title = "Encode time of one long input, batch 1, base-size model (seconds, shorter is faster)"
    out = svg_head(width, height, title, where(doc), doc)
    for k, n in enumerate(lengths):
        y0 = top + k * panel_h
        out.append(f'<text x="8" y="{y0 + 18}" font-weight="bold">{n:,} tokens</text>')
        values = [long_cell(r, n)[0] for r in rows]
        peak = max((v for v in values if v is not None), default=1) or 1
        for i, row in enumerate(rows):
            y = y0 + gap + i * row_h
            ours = row["system"] in OURS
            dark, light = COLOURS.get(row["precision"], ("#444444", "#bbbbbb"))
            weight = ' font-weight="bold"' if ours else ""
            value, text = long_cell(row, n)
            label = html.escape(row["label"].replace("`", ""))
            out.append(f'<text x="{label_w - 6}" y="{y + 14}" text-anchor="end"{weight}>{label}</text>')
            w = 0 if value is None else max(1, round(bar_w * value / peak))
            if w:
                out.append(f'<rect x="{label_w}" y="{y + 3}" width="{w}" height="{row_h - 6}" '
                           f'fill="{dark if ours else light}"/>')
            out.append(f'<text x="{label_w + w + 4}" y="{y + 14}"{weight}>'
                       f'{html.escape(text + (" s" if value is not None else ""))}</text>')
    out.append(f'<text x="8" y="{height - 8}" fill="#555555">'
               f'{html.escape("dark bars: roformer; light: the peers; colour: the precision. From benchmarks/results/" + doc["_file"])}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def order(row):
    """Rows grouped by precision, ours first in each, then the peers fastest first."""
    p = PRECISIONS.index(row["precision"]) if row["precision"] in PRECISIONS else len(PRECISIONS)
    return (p, row["system"] not in OURS, -row["sentences_per_s"], row["label"])


COLOURS = {"f32": ("#1f5f99", "#9fc0de"), "int8": ("#b3541e", "#efb98f"), "bf16": ("#2e7d32", "#a5d6a7"),
           "f16": ("#6a1b9a", "#ce93d8")}


def svg_head(width, height, title, sub, doc):
    """A chart's opening lines: the SVG element, a white ground, the title, `sub` and the run's CPU flags."""
    flags = "CPU flags: " + (" ".join((doc["cpu"] or {}).get("simd_flags") or []) or "not recorded")
    return [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
            f'<rect width="{width}" height="{height}" fill="#ffffff"/>',
            f'<text x="8" y="18" font-size="14" font-weight="bold">{html.escape(title)}</text>',
            f'<text x="8" y="35" fill="#555555">{html.escape(sub)}</text>',
            f'<text x="8" y="52" fill="#555555">{html.escape(flags)}</text>']


def chart(family, doc):
    """Horizontal bars of sentences/s, one per system and precision: ours dark, the peers light."""
    rows = sorted(base_rows(doc), key=order)
    label_w, bar_w, row_h, top = 300, 380, 22, 62
    width, height = label_w + bar_w + 80, top + row_h * len(rows) + 30
    peak = max((r["sentences_per_s"] for r in rows), default=1) or 1
    title = f"{FAMILIES[family]}: sentences/s, base-size model, SST-2 dev"
    sub = where(doc) + (f", level {doc['level']}" if doc["level"] else "")
    out = svg_head(width, height, title, sub, doc)
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
    long = {k: by_family.pop(k) for k in LONG_KINDS if k in by_family}
    tables = {"summary": summary_table(by_family)}
    charts = {}
    if "long-inputs" in long:
        tables["longinputs"] = long_inputs_table(long["long-inputs"])
    if "long-peers" in long:
        tables["longpeers"] = long_peers_table(long["long-peers"])
        charts[CHARTS / "long-peers.svg"] = long_peers_chart(headline(long["long-peers"]))
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
        if family != "cuda" and family not in LONG_KINDS and f"<!-- results:{family} -->" not in speed:
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
