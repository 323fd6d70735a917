#!/usr/bin/env bash
# The roformer-rs wheel as a Python user gets it from PyPI: the manylinux_2_17 x86_64 abi3 wheel that
# scripts/build/build_wheels.sh builds (maturin --zig; auditwheel checks its tag there), installed into a
# new virtual environment with no Rust on PATH (cargo and rustc must not be found: pip must take the wheel
# as it is, never build it), holding nothing else but the packages python/tests/requirements.txt lists
# (numpy, scipy, tqdm, pytest, mypy; no torch), then mypy's stubtest against the installed module and the
# pytest suite (python/tests) against the committed references the Rust tests use.
#   scripts/checks/check_python.sh           what .ci/run runs
# The suite holds the wheel to the Rust `embed` example bit for bit: `cargo test --release --workspace`
# (the line before this in .ci/run) builds it; elsewhere `cargo build --release --example embed` first.
# The wheel's build compiles Candle and the library again for the explicit target with zig
# (target/x86_64-unknown-linux-gnu/): minutes from a cold target directory, seconds when warm.
set -euo pipefail
cd "$(dirname "$0")/../.."

target="${CARGO_TARGET_DIR:-target}"
venv="$target/python-check"
start=$(date +%s)
bash scripts/build/build_wheels.sh x86_64
wheel=$(ls "$target"/wheels/roformer_rs-*manylinux_2_17_x86_64.whl)
echo "check_python: built $(basename "$wheel") in $(($(date +%s) - start)) s"
python3 -m venv --clear "$venv"
# Everything from here on runs without Rust: the venv's bin and the system's, no ~/.cargo/bin, no rustup.
venv_bin="$(cd "$venv" && pwd)/bin"
norust=(env -u CARGO_HOME -u RUSTUP_HOME -u RUSTUP_TOOLCHAIN "PATH=$venv_bin:/usr/bin:/bin")
if "${norust[@]}" bash -c "command -v cargo || command -v rustc"; then
    echo "check_python: Rust is still on PATH of the test environment" >&2
    exit 1
fi
"${norust[@]}" pip install --quiet --upgrade pip
# --only-binary: pip takes roformer-rs from the wheel or fails, it never falls back to a source build.
"${norust[@]}" pip install --quiet --only-binary=roformer-rs "$wheel"
"${norust[@]}" pip install --quiet -r python/tests/requirements.txt
if "${norust[@]}" python -c "import torch" 2>/dev/null; then
    echo "check_python: torch is installed in the test environment, which must not need it" >&2
    exit 1
fi
# The stubs (roformer_rs/_native.pyi, py.typed) against the module as it loads; run outside the
# repository so that the installed package, not python/roformer_rs, is the one checked.
python="$(cd "$venv" && pwd)/bin/python"
(cd "$target" && "${norust[@]}" "$python" -m mypy.stubtest roformer_rs)
"${norust[@]}" "$python" -m pytest -q python/tests -p no:cacheprovider
