#!/usr/bin/env bash
# The roformer-rs wheels that install without Rust: abi3 (CPython 3.9 and later) wheels tagged
# manylinux_2_17 (manylinux2014: glibc 2.17 and later) for x86_64 and aarch64 Linux, and the sdist, in
# target/wheels/. maturin links with zig (ziglang from PyPI) against glibc 2.17's symbols, so that no
# manylinux container is needed; auditwheel then checks each wheel: it must be consistent with
# manylinux_2_17 and need no library outside the manylinux whitelist. maturin, ziglang and auditwheel
# are installed into target/wheel-build-venv on first use; the Rust target with rustup when missing.
# Usage: scripts/build/build_wheels.sh [x86_64] [aarch64] [sdist]     (no argument: all three)
# Each target compiles Candle and the library again in target/<triple>/ (an explicit --target, and zig
# as C compiler and linker): several minutes on 2 cores from a cold target directory.
set -euo pipefail
cd "$(dirname "$0")/../.."

target="${CARGO_TARGET_DIR:-target}"
venv="$target/wheel-build-venv"
out="$target/wheels"
what=("$@")
if ((${#what[@]} == 0)); then what=(x86_64 aarch64 sdist); fi

if [[ ! -x "$venv/bin/maturin" || ! -x "$venv/bin/auditwheel" || ! -x "$venv/bin/python-zig" ]]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --upgrade pip
    "$venv/bin/pip" install --quiet "maturin>=1.9,<2" ziglang auditwheel
fi
# maturin finds zig through the `python3 -m ziglang` of the environment it runs in.
export PATH="$(cd "$venv" && pwd)/bin:$PATH"
mkdir -p "$out"

for arch in "${what[@]}"; do
    start=$(date +%s)
    case "$arch" in
    x86_64 | aarch64)
        triple="$arch-unknown-linux-gnu"
        if ! rustup target list --installed | grep -qx "$triple"; then
            rustup target add "$triple"
        fi
        rm -f "$out"/roformer_rs-*-manylinux*_"$arch".whl
        nice -n 10 maturin build --release --zig --compatibility manylinux2014 --target "$triple" \
            -m python/Cargo.toml --out "$out"
        wheel=$(ls "$out"/roformer_rs-*manylinux_2_17_"$arch".whl)
        # auditwheel's verdict: the wheel must need nothing newer than glibc 2.17 (Rust's std and the
        # crates reach newer symbols only through weak links or syscalls) and no library outside the
        # manylinux whitelist; either would make it name a higher policy or plain linux_<arch>.
        report=$(auditwheel show "$wheel")
        echo "$report"
        if ! tr -s ' \n' '  ' <<<"$report" | grep -q "consistent with the following platform tag: \"manylinux_2_17_$arch\""; then
            echo "build_wheels: auditwheel does not find $(basename "$wheel") manylinux_2_17" >&2
            exit 1
        fi
        ;;
    sdist)
        rm -f "$out"/roformer_rs-*.tar.gz
        nice -n 10 maturin sdist -m python/Cargo.toml --out "$out"
        ;;
    *)
        echo "build_wheels: unknown target $arch (x86_64, aarch64 or sdist)" >&2
        exit 2
        ;;
    esac
    echo "build_wheels: $arch in $(($(date +%s) - start)) s"
done
ls -l "$out"
