#!/usr/bin/env bash
# The CUDA build, on a machine with no GPU and no system CUDA toolkit: NVIDIA's own wheels from PyPI give
# nvcc, the headers and the libraries; this script puts them in a virtual environment, builds the crate with
# `--features cuda` for one compute capability, and gathers what a GPU machine without a Rust toolchain needs
# to run the test suite and the `classify` example into one folder (the GPU bundle), with a build without CUDA
# for the GPU machine's host CPU beside them (host/: the unit and integration tests, the examples those run, the
# kernels bench).
#
# Usage:   scripts/build/build_cuda.sh [env|build|bundle|all]        (default: all)
#   env     only create the venv and print the environment the build needs (`eval "$(scripts/build/build_cuda.sh env)"`)
#   build   env, then `cargo build --release --features cuda` and `cargo test --release --features cuda --no-run`
#   bundle  build, then copy the integration tests and the classify example (and, with BUNDLE_LIBS=1, the CUDA
#           libraries) into $BUNDLE, with the host CPU's binaries in $BUNDLE/host, and pack it as $BUNDLE.tar.xz
#
# Knobs (environment):
#   CUDA_COMPUTE_CAP   the GPU's compute capability, default 90 (H100). `nvidia-smi --query-gpu=compute_cap`.
#   CUDA_WHEELS        the CUDA line of the wheels, default 13.0: it must not be newer than the driver's CUDA
#                      version (`nvidia-smi` top right); PTX from a newer nvcc does not load on an older driver.
#   CUDA_VENV          default .cuda-venv;   CARGO_TARGET_DIR  default target-cuda;   BUNDLE  default $CARGO_TARGET_DIR/gpu-bundle
#   NICE               prefix for the heavy commands, default "nice -n 19".
#
# What the wheels do not give, made here: unversioned lib*.so links for the linker (the wheels ship only
# libcublas.so.13 and the like), and a stub libcuda.so (the driver library: the real one comes with the
# NVIDIA driver on the GPU machine; the stub only satisfies the link and names libcuda.so.1 as its soname).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)

MODE=${1:-all}
export CUDA_COMPUTE_CAP=${CUDA_COMPUTE_CAP:-90}
CUDA_WHEELS=${CUDA_WHEELS:-13.0}
CUDA_VENV=${CUDA_VENV:-$ROOT/.cuda-venv}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target-cuda}
BUNDLE=${BUNDLE:-$CARGO_TARGET_DIR/gpu-bundle}
NICE=${NICE-nice -n 19}
PYTHON=${PYTHON:-python3}

log() { echo "build_cuda: $*" >&2; }

# The wheels of one CUDA release, each pinned: nvcc pulls nvidia-cuda-crt and nvidia-nvvm in at their newest
# version unless they are pinned too. cuBLAS and cuRAND have their own version numbers.
case "$CUDA_WHEELS" in
13.0)
    WHEELS=(
        nvidia-cuda-nvcc==13.0.88 nvidia-cuda-crt==13.0.88 nvidia-nvvm==13.0.88
        nvidia-cuda-runtime==13.0.96 nvidia-cuda-cccl==13.0.85 nvidia-cuda-nvrtc==13.0.88
        nvidia-cublas==13.0.2.14 nvidia-curand==10.4.0.35
    )
    CU=cu13
    ;;
*)
    log "no pinned wheel set for CUDA $CUDA_WHEELS: add one to this script"
    exit 2
    ;;
esac

make_venv() {
    if [[ ! -x $CUDA_VENV/bin/python ]]; then
        log "creating $CUDA_VENV"
        $NICE "$PYTHON" -m venv "$CUDA_VENV"
    fi
    local want have
    want=$(printf '%s\n' "${WHEELS[@]}" | sort)
    have=$("$CUDA_VENV/bin/pip" list --format=freeze 2>/dev/null | grep '^nvidia-' | sort || true)
    if [[ $want != "$have" ]]; then
        log "installing ${WHEELS[*]}"
        $NICE "$CUDA_VENV/bin/pip" install --quiet --disable-pip-version-check "${WHEELS[@]}"
    fi
}

cuda_home() {
    "$CUDA_VENV/bin/python" -c 'import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], "'"$CU"'"))'
}

# Linker names and the libcuda stub, inside the wheels' toolkit folder (lib/ and lib/stubs/, where cudarc's
# build script looks under CUDA_HOME).
prepare_toolkit() {
    local home=$1 lib
    cd "$home/lib"
    for lib in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libnvrtc.so.13 libcurand.so.10; do
        [[ -e $lib ]] || { log "missing $home/lib/$lib"; exit 1; }
        ln -sf "$lib" "${lib%.so.*}.so"
    done
    cd "$ROOT"
    mkdir -p "$home/lib/stubs"
    if [[ ! -e $home/lib/stubs/libcuda.so ]]; then
        # Every driver entry point cudarc declares (its generated bindings list them one per `pub unsafe fn`).
        local cudarc
        cudarc=$(cargo metadata --format-version 1 --locked --features cuda | "$CUDA_VENV/bin/python" -c '
import json, os, sys
pkgs = json.load(sys.stdin)["packages"]
print(next(os.path.dirname(p["manifest_path"]) for p in pkgs if p["name"] == "cudarc"))')
        local src=$CARGO_TARGET_DIR/libcuda-stub.c
        mkdir -p "$CARGO_TARGET_DIR"
        grep -ohE '^pub unsafe fn cu[A-Za-z0-9_]+' "$cudarc/src/driver/sys/mod.rs" | sed 's/^pub unsafe fn //' |
            sort -u | sed 's/.*/int &(void) { return 999; }/' >"$src"
        log "libcuda stub: $(wc -l <"$src") entry points from $cudarc"
        gcc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$home/lib/stubs/libcuda.so" "$src"
    fi
}

print_env() {
    local home=$1
    cat <<EOF
export CUDA_HOME=$home
export CUDA_PATH=$home
export CUDA_ROOT=$home
export NVCC=$home/bin/nvcc
export PATH=$home/bin:\$PATH
export CUDA_COMPUTE_CAP=$CUDA_COMPUTE_CAP
export NVCC_CCBIN=${NVCC_CCBIN:-$(command -v g++)}
export CARGO_TARGET_DIR=$CARGO_TARGET_DIR
EOF
}

setup() {
    make_venv
    HOME_CUDA=$(cuda_home)
    prepare_toolkit "$HOME_CUDA"
    eval "$(print_env "$HOME_CUDA")"
    log "nvcc: $(nvcc --version | tail -2 | head -1)"
}

# The executables cargo built, from its JSON messages, one per line.
executables() {
    "$CUDA_VENV/bin/python" -c '
import json, sys
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("executable"):
        print(m["executable"])'
}

build() {
    setup
    local t0=$SECONDS
    log "cargo build --release --features cuda"
    $NICE cargo build --release --features cuda
    log "  done in $((SECONDS - t0)) s"
    t0=$SECONDS
    log "cargo test --release --features cuda --no-run, and the classify example"
    $NICE cargo test --release --features cuda --no-run --message-format=json-render-diagnostics |
        executables >"$CARGO_TARGET_DIR/cuda-test-binaries.txt"
    $NICE cargo build --release --features cuda --example classify --message-format=json-render-diagnostics |
        executables >>"$CARGO_TARGET_DIR/cuda-test-binaries.txt"
    log "  done in $((SECONDS - t0)) s"
    # For the host CPU (scripts/checks/host_cpu_check.sh), without CUDA, which would put its GPU kernels in every
    # binary: the unit tests (where the `amx` level meets the model of the unit and the VNNI kernel), the
    # integration tests with the examples they run, and the kernels bench. In the usual target folder, where a CPU
    # build usually is already.
    t0=$SECONDS
    log "the tests, examples and kernels bench without CUDA, in $ROOT/target"
    { CARGO_TARGET_DIR=$ROOT/target $NICE cargo test --release --no-run --message-format=json-render-diagnostics &&
        CARGO_TARGET_DIR=$ROOT/target $NICE cargo bench --bench kernels --no-run --message-format=json-render-diagnostics; } |
        executables >"$CARGO_TARGET_DIR/host-binaries.txt"
    log "  done in $((SECONDS - t0)) s"
}

bundle() {
    build
    log "bundle: $BUNDLE"
    rm -rf "$BUNDLE"
    # cargo's own layout (deps/ and examples/ side by side), which the tests that run examples expect. Only what
    # the GPU checks run: the integration tests and the classify example (the unit tests are CPU kernels').
    mkdir -p "$BUNDLE/deps" "$BUNDLE/examples"
    local exe name
    while read -r exe; do
        name=$(basename "$exe")
        name=${name%-[0-9a-f]*[0-9a-f]} # without cargo's hash suffix
        case "$exe" in
        */examples/classify*) cp "$exe" "$BUNDLE/examples/$name" ;;
        */deps/integration-*) cp "$exe" "$BUNDLE/deps/$name" ;;
        esac
    done <"$CARGO_TARGET_DIR/cuda-test-binaries.txt"
    # The host's set, in cargo's layout too. Only the examples the integration tests run.
    mkdir -p "$BUNDLE/host/deps" "$BUNDLE/host/examples" "$BUNDLE/host/bench"
    while read -r exe; do
        name=$(basename "$exe")
        name=${name%-[0-9a-f]*[0-9a-f]}
        case "$exe" in
        */deps/roformer-* | */deps/integration-*) cp "$exe" "$BUNDLE/host/deps/$name" ;;
        */examples/classify | */examples/embed | */examples/fill_mask | */examples/ner | */examples/qa | */examples/paraphrase)
            cp "$exe" "$BUNDLE/host/examples/$name"
            ;;
        */deps/kernels-*) cp "$exe" "$BUNDLE/host/bench/$name" ;;
        esac
    done <"$CARGO_TARGET_DIR/host-binaries.txt"
    [[ -x $BUNDLE/deps/integration && -x $BUNDLE/examples/classify ]] || {
        log "the integration test binary or the classify example is missing from the build"
        exit 1
    }
    [[ -x $BUNDLE/host/deps/roformer && -x $BUNDLE/host/deps/integration && -x $BUNDLE/host/bench/kernels &&
        $(ls "$BUNDLE/host/examples" | wc -l) == 6 ]] || {
        log "the host CPU's tests, examples or kernels bench are missing from the build"
        exit 1
    }
    # Stripped: the test binary carries debug info the GPU run does not need (the device tool carries 64 MiB).
    strip --strip-debug "$BUNDLE"/deps/* "$BUNDLE"/examples/* "$BUNDLE"/host/*/*
    # The CUDA libraries the binaries load (not libcuda: that one is the GPU machine's driver). About 800 MB,
    # cuBLASLt alone 540 MB, so only on request: a GPU machine with a CUDA 13 toolkit has them already, and
    # gpu_check.sh looks there first.
    if [[ ${BUNDLE_LIBS:-0} == 1 ]]; then
        mkdir -p "$BUNDLE/lib"
        cp -L "$HOME_CUDA"/lib/{libcudart.so.13,libcublas.so.13,libcublasLt.so.13,libcurand.so.10} "$BUNDLE/lib/"
        cp -L "$HOME_CUDA"/lib/libnvrtc.so.13 "$HOME_CUDA"/lib/libnvrtc-builtins.so.13.0 "$BUNDLE/lib/"
    fi
    # The benchmark's inputs, when this machine has them (../shared/data): SST-2 dev and the BERT uncased vocab.
    local data=$ROOT/../shared/data
    if [[ -e $data/glue/SST-2/dev.tsv && -e $data/vocab/bert-base-uncased/vocab.txt ]]; then
        mkdir -p "$BUNDLE/data/glue/SST-2" "$BUNDLE/data/vocab/bert-base-uncased"
        cp "$data/glue/SST-2/dev.tsv" "$BUNDLE/data/glue/SST-2/"
        cp "$data/vocab/bert-base-uncased/vocab.txt" "$BUNDLE/data/vocab/bert-base-uncased/"
    fi
    # The binaries read fixtures and the bundled model from the source tree; gpu_check.sh runs them from a
    # checkout of this repository (no Rust toolchain needed) and says where it is in ROFORMER_SOURCE_DIR.
    {
        echo "roformer GPU bundle, built $(date -u +%Y-%m-%dT%H:%MZ) on $(uname -n)"
        echo "git: $(git rev-parse --short HEAD)$(git diff --quiet || echo ' (dirty)')"
        echo "compute_cap=$CUDA_COMPUTE_CAP"
        echo "cuda=$CUDA_WHEELS"
        echo "wheels: ${WHEELS[*]}"
        echo "nvcc: $(nvcc --version | tail -2 | head -1)"
        echo "rustc: $(rustc --version)"
    } >"$BUNDLE/BUILD_INFO"
    # One compressed file to carry, under the device tool's 64 MiB. Every binary holds the same large blobs (the
    # CUDA ones the same PTX and kernels, all of them the 8.7 MB built-in model), which a 192 MiB window finds
    # again: the CUDA part alone came to 20 MB so, against 36 MB at xz's default window and 53 MB with gzip.
    tar -C "$(dirname "$BUNDLE")" -cf - "$(basename "$BUNDLE")" | xz -T1 --lzma2=preset=6,dict=192MiB >"$BUNDLE.tar.xz"
    log "bundle: $(du -sh "$BUNDLE" | cut -f1) in $BUNDLE, $(du -sh "$BUNDLE.tar.xz" | cut -f1) as $BUNDLE.tar.xz"
}

case "$MODE" in
env)
    make_venv >&2
    HOME_CUDA=$(cuda_home)
    prepare_toolkit "$HOME_CUDA" >&2
    print_env "$HOME_CUDA"
    ;;
build) build ;;
bundle | all) bundle ;;
*)
    echo "usage: $0 [env|build|bundle|all]" >&2
    exit 2
    ;;
esac
