# The result file a benchmark run writes under benchmarks/results/ (schema: benchmarks/README.md). Imported by bench_e2e.py and bench_e2e_cuda.py.
"""What the benchmarks share: the machine's description (CPU model, CPUID family and model, SIMD flags, cores,
CPU family for the pages), the commit, and writing one result file per run, never over an earlier one.

`render_results.py` reads these files; a new file is not shown until it is marked `"headline": true`, so that
choosing the run a page shows is a commit of its own, not a side effect of running a bench."""

import datetime
import json
import os
import platform
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
SCHEMA = 1
# The flags that decide the kernels' level; the pages list these, not the CPU's hundred others.
SIMD_FLAGS = ["sse4_2", "avx2", "fma", "f16c", "avx_vnni", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16",
              "avx512_fp16", "amx_tile", "amx_int8", "amx_bf16", "asimd", "asimddp", "i8mm", "bf16", "sve"]


def cpu_info():
    """The CPU as /proc/cpuinfo gives it (its first processor), with the family the pages group it under."""
    fields = {}
    try:
        for line in open("/proc/cpuinfo"):
            if not line.strip():
                break
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    flags = set((fields.get("flags") or fields.get("Features") or "").split())
    vendor = fields.get("vendor_id", "")
    family = fields.get("cpu family")
    model = fields.get("model")
    cpuid = f"family {family} model {model}" if family and model and vendor else None
    return {
        "model": fields.get("model name") or platform.processor() or platform.machine(),
        "cpuid": cpuid,
        "microarchitecture": None,
        "cores": os.cpu_count(),
        "simd_flags": [f for f in SIMD_FLAGS if f in flags],
        "family": cpu_family(platform.machine(), vendor, family, flags),
    }


def kernels_level(flags):
    """The level our kernels run at on a CPU with these /proc/cpuinfo flags, as the crate detects it, or the one
    ROFORMER_CPU_LEVEL holds them to (marked forced)."""
    if os.environ.get("ROFORMER_CPU_LEVEL"):
        return os.environ["ROFORMER_CPU_LEVEL"] + " (forced)"
    if "avx512f" in flags:
        if "amx_int8" in flags and "avx512_vnni" in flags:
            return "amx"
        if "avx512_bf16" in flags:
            return "avx512-bf16"
        return "avx512-vnni" if "avx512_vnni" in flags else "avx512"
    if "avx2" in flags:
        return "avx-vnni" if "avx_vnni" in flags else "avx2"
    return "portable"


def crate_version():
    """The workspace's version, from Cargo.toml."""
    found = re.search(r'^version = "([^"]+)"', (ROOT / "Cargo.toml").read_text(), re.M)
    return found.group(1) if found else None


def cpu_family(machine, vendor, family, flags):
    """amx, zen4, zen5, avx512, avx2 or arm: the group a page's table puts this CPU in."""
    if machine in ("aarch64", "arm64"):
        return "arm"
    if "amx_int8" in flags:
        return "amx"
    if vendor == "AuthenticAMD" and family == "26":
        return "zen5"
    if vendor == "AuthenticAMD" and family == "25" and "avx512f" in flags:
        return "zen4"
    if "avx512f" in flags:
        return "avx512"
    return "avx2"


def git_commit():
    """HEAD's short hash, with "-dirty" when the working tree's tracked files differ from it; None outside git."""
    try:
        commit = subprocess.run(["git", "rev-parse", "--short=7", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                                check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return commit + ("-dirty" if dirty else "")


def precision_of(text):
    """f32, int8, bf16 or f16 from a row's own words ("bf16 (autocast)", "int8 static (NNCF), else bf16")."""
    text = str(text).lower()
    for p in ("int8", "q8", "bf16", "f16", "fp16"):
        if text.startswith(p) or f" {p}" in f" {text}":
            return {"q8": "int8", "fp16": "f16"}.get(p, p)
    return "f32"


def system_row(system, version, precision, label, sentences_per_s, model="base", latency_ms_16=None,
               latency_ms_128=None, label_agreement=None, max_abs_prob_diff=None, **extra):
    return {"system": system, "version": version, "precision": precision, "label": label, "model": model,
            "sentences_per_s": sentences_per_s, "latency_ms_16": latency_ms_16, "latency_ms_128": latency_ms_128,
            "label_agreement": label_agreement, "max_abs_prob_diff": max_abs_prob_diff, **extra}


def write(bench, level, versions, workload, systems, run="1", family=None, gpu=None, note=None, folder=RESULTS,
          kind=None, commit=None):
    """Writes benchmarks/results/DATE-FAMILY-COMMIT.json (-2, -3, ... when that exists) and returns its path;
    `commit` names the code that ran where it is not this checkout's (a binary built elsewhere)."""
    cpu = cpu_info()
    family = family or cpu.pop("family")
    cpu.pop("family", None)
    date = datetime.date.today().isoformat()
    commit = commit or git_commit()
    doc = {"schema": SCHEMA, "bench": bench, "family": family, "date": date, "commit": commit, "cpu": cpu,
           "gpu": gpu, "level": level, "run": run, "headline": False, "versions": versions, "workload": workload,
           "source": f"{bench}, run on this machine", "systems": systems}
    if note:
        doc["note"] = note
    if kind:
        doc["kind"] = kind
    folder.mkdir(parents=True, exist_ok=True)
    stem = f"{date}-{family}-{commit or 'nogit'}"
    path, n = folder / f"{stem}.json", 1
    while path.exists():
        n += 1
        path = folder / f"{stem}-{n}.json"
    path.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    return path
