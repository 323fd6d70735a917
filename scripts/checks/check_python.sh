#!/usr/bin/env bash
# The roformer-rs wheel as a Python user gets it: built by maturin from python/ (the README's
# `pip install ./python`), installed into a new virtual environment that holds nothing else but numpy,
# scipy, tqdm, pytest and mypy (no torch), then mypy's stubtest against the installed module and the
# pytest suite (python/tests) against the committed references the Rust tests use.
#   scripts/checks/check_python.sh           what .ci/run runs
# The suite holds the wheel to the Rust `embed` example bit for bit: `cargo test --release --workspace`
# (the line before this in .ci/run) builds it; elsewhere `cargo build --release --example embed` first.
set -euo pipefail
cd "$(dirname "$0")/../.."

target="${CARGO_TARGET_DIR:-target}"
venv="$target/python-check"
python3 -m venv --clear "$venv"
"$venv/bin/pip" install --quiet --upgrade pip
# pip builds the wheel with maturin in its own build environment, through cargo and the same target
# directory as the workspace: the library compiled by the line before is reused, and only the
# extension module (PyO3 with extension-module) is compiled here.
start=$(date +%s)
"$venv/bin/pip" install --quiet ./python
echo "check_python: built and installed the wheel in $(($(date +%s) - start)) s"
"$venv/bin/pip" install --quiet -r python/tests/requirements.txt
if "$venv/bin/python" -c "import torch" 2>/dev/null; then
    echo "check_python: torch is installed in the test environment, which must not need it" >&2
    exit 1
fi
# The stubs (roformer_rs/_native.pyi, py.typed) against the module as it loads; run outside the
# repository so that the installed package, not python/roformer_rs, is the one checked.
python="$(cd "$venv" && pwd)/bin/python"
(cd "$target" && "$python" -m mypy.stubtest roformer_rs)
"$python" -m pytest -q python/tests -p no:cacheprovider
