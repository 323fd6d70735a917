#!/usr/bin/env bash
# The aarch64 wheel that scripts/build/build_wheels.sh makes, as a user on aarch64 Linux gets it: unpacked
# beside numpy's aarch64 manylinux wheel from PyPI and imported by Debian's arm64 CPython 3.11 under qemu's
# user-mode emulation, then encoding committed fixtures (a plain checkpoint with its three poolings, a
# sentence-transformers 6 folder) against their transformers / sentence-transformers references, within
# 1e-4 as the Rust tests allow. Emulated timings mean nothing: correctness only.
# Debian's arm64 packages (python3.11-minimal, libpython3.11-stdlib, libc6 and the libraries they load) are
# fetched with apt into a private apt state under target/aarch64-python/ (the machine's own apt
# configuration and dpkg database are left alone: no multiarch) and unpacked there with `dpkg -x` as the
# sysroot qemu's -L reads. qemu-user is installed with apt-get when missing.
# Usage: scripts/checks/check_wheel_aarch64.sh [--cpu MODEL] [WHEEL]
#   MODEL  qemu's CPU model (default max; cortex-a72 has neither dotprod nor i8mm)
#   WHEEL  default: target/wheels/roformer_rs-*manylinux_2_17_aarch64.whl
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$(pwd)

target="${CARGO_TARGET_DIR:-target}"
cpu=max
if [[ "${1:-}" == "--cpu" ]]; then cpu="$2"; shift 2; fi
wheel="${1:-$(ls "$target"/wheels/roformer_rs-*manylinux_2_17_aarch64.whl)}"
wheel=$(cd "$(dirname "$wheel")" && pwd)/$(basename "$wheel")
root="$(mkdir -p "$target/aarch64-python" && cd "$target/aarch64-python" && pwd)"
sysroot="$root/sysroot"
start=$(date +%s)

if ! command -v qemu-aarch64 >/dev/null; then
    apt-get update -qq
    apt-get install -y -qq qemu-user >/dev/null
fi

if [[ ! -x "$sysroot/usr/bin/python3.11" ]]; then
    apt_dir="$root/apt"
    mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$apt_dir/debs"
    touch "$apt_dir/status"
    apt_opts=(-o APT::Architecture=arm64 -o "APT::Architectures::=arm64"
        -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache"
        -o "Dir::State::status=$apt_dir/status")
    apt-get "${apt_opts[@]}" -qq update
    rm -f "$apt_dir"/debs/*.deb
    # The interpreter, its standard library and the shared libraries it and its extension modules load.
    (cd "$apt_dir/debs" && apt-get "${apt_opts[@]}" -qq download python3.11-minimal libpython3.11-minimal \
        libpython3.11-stdlib libc6 libgcc-s1 libstdc++6 zlib1g libexpat1 libffi8 libssl3 libbz2-1.0 liblzma5 \
        libuuid1 libcrypt1 2>&1 | grep -v "unsandboxed" || true)
    rm -rf "$sysroot"
    for deb in "$apt_dir"/debs/*.deb; do dpkg -x "$deb" "$sysroot"; done
fi

pip="$target/wheel-build-venv/bin/pip"
if [[ ! -x "$pip" ]]; then
    python3 -m venv "$target/wheel-build-venv"
fi
if [[ ! -d "$root/numpy/numpy" ]]; then
    rm -rf "$root/numpy" "$root/numpy-wheel"
    "$pip" download --quiet --dest "$root/numpy-wheel" --only-binary=:all: --implementation cp \
        --python-version 3.11 --platform manylinux2014_aarch64 --platform manylinux_2_28_aarch64 numpy
    python3 -m zipfile -e "$root"/numpy-wheel/numpy-*.whl "$root/numpy"
fi
rm -rf "$root/roformer"
python3 -m zipfile -e "$wheel" "$root/roformer"

echo "check_wheel_aarch64: $(basename "$wheel") on qemu's $cpu"
cd "$root"
PYTHONPATH="$root/roformer:$root/numpy" PYTHONDONTWRITEBYTECODE=1 FIXTURES="$repo/tests/fixtures" \
    qemu-aarch64 -cpu "$cpu" -L "$sysroot" "$sysroot/usr/bin/python3.11" - <<'EOF'
import json, os, platform, sys
from pathlib import Path

import numpy as np
import roformer_rs
from roformer_rs import SentenceEncoder

fixtures = Path(os.environ["FIXTURES"])
assert platform.machine() == "aarch64", platform.machine()
assert roformer_rs.__file__.startswith(os.environ["PYTHONPATH"].split(":")[0]), roformer_rs.__file__
print(f"python {platform.python_version()} {platform.machine()}, numpy {np.__version__}, {roformer_rs.__file__}")


def reference(*parts):
    return json.loads(fixtures.joinpath(*parts).read_text(encoding="utf-8"))


worst = {}
want = reference("pipelines", "sim", "expected.json")
for pooling in ("cls", "mean", "pooler"):
    model = SentenceEncoder(fixtures / "pipelines" / "sim", pooling=pooling, normalize=False)
    ours = model.encode(want["texts"], batch_size=4)
    assert ours.dtype == np.float32 and ours.shape == np.shape(want[pooling]), ours.shape
    worst[f"sim {pooling}"] = float(np.abs(ours - np.asarray(want[pooling])).max())
want = reference("sentence_transformers", "st6_cls_dense", "expected.json")
model = SentenceEncoder(fixtures / "sentence_transformers" / "st6_cls_dense")
ours = model.encode(want["texts"], batch_size=3)
worst["st6_cls_dense default"] = float(np.abs(ours - np.asarray(want["default"])).max())
ours = model.encode_query(want["texts"])
worst["st6_cls_dense query"] = float(np.abs(ours - np.asarray(want["prompt_name"]["query"])).max())
for what, diff in worst.items():
    print(f"  {what}: largest difference from the reference {diff:.2e}")
assert max(worst.values()) <= 1e-4, worst
EOF
echo "check_wheel_aarch64: passed in $(($(date +%s) - start)) s"
