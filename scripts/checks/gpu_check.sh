#!/usr/bin/env bash
# The GPU checks, on a machine with an NVIDIA GPU and no Rust toolchain, from a checkout of this repository
# and the bundle scripts/build/build_cuda.sh made (copy target-cuda/gpu-bundle.tar.xz or the unpacked
# target-cuda/gpu-bundle there, or point BUNDLE at the folder):
#
#   scripts/checks/gpu_check.sh [--no-bench]
#
# 1. The driver: its CUDA version must be at least the bundle's (PTX from a newer nvcc does not load on an
#    older driver), and the GPU's compute capability the one the bundle was built for.
# 2. The CUDA libraries the binaries link (cuBLAS, cuBLASLt, cuRAND, NVRTC, the runtime; CUDA 13): the
#    bundle's lib/ (BUNDLE_LIBS=1 at build time), else the first of $CUDA_HOME/lib64, /usr/local/cuda/lib64,
#    /usr/local/cuda-13*/lib64, the nvidia/cu13/lib of a Python environment (torch's CUDA 13 wheels bring
#    them), or the system's (ldconfig). `ldd` must find every one.
# 3. The test suite on the GPU: ROFORMER_TEST_DEVICE=cuda runs the model and pipeline tests on it.
#    - f32: every transformers fixture (base, sharded, .bin, every head, v2, sim, RoPE scaling, pipelines)
#      within 1e-4 max abs and 1e-5 relative, as on the CPU;
#    - f16 and bf16: the base fixture within the bounds tests/integration/model_behaviour.rs states
#      (f16: 6e-2 max abs, 8e-3 relative on CUDA, whose f16 kernels compute in f16; bf16: 3e-1 max abs,
#      3e-2 relative), against transformers' f32;
#    - int8 (CPU only) says it is not run there (a `not run here:` line); quantizing a model on the
#      GPU must be refused by name.
#    The differences are printed (ROFORMER_PRINT_DIFFS) and kept in $OUT/tests.log; beside them,
#    scripts/checks/half_precision_gpu.py prints how far transformers' own f16 and bf16 land on this GPU.
# 4. The base-size end-to-end benchmark, scripts/bench/bench_e2e_cuda.py: ours (`classify --device cuda --dtype
#    f16`) against transformers' PyTorch eager in fp16 on the same GPU. It needs torch with CUDA 13 and
#    transformers. A machine with no network gets them as wheels, fetched elsewhere for its Python version:
#        pip download --dest wheels --python-version 3.11 --only-binary=:all: \
#            torch transformers safetensors numpy --index-url https://download.pytorch.org/whl/cu130 \
#            --extra-index-url https://pypi.org/simple
#        (carry wheels/ over)  python3 -m venv .bench-venv && .bench-venv/bin/pip install --no-index \
#            --find-links wheels torch transformers safetensors numpy
#    then PYTHON=.bench-venv/bin/python scripts/checks/gpu_check.sh. Without torch the benchmark is reported as not
#    run, and the script fails.
#    It also needs SST-2 dev and the BERT uncased vocab: DATA and VOCAB, by default from ../shared/data beside
#    the checkout, else from the bundle's data/ (build_cuda.sh copies them when the build machine has them).
# 5. The host's CPU, by scripts/checks/host_cpu_check.sh: the unit and integration tests at its best level (on the
#    Xeons with AMX these machines have had, the `amx` level on the real unit) and the kernels bench.
#
# Output: $OUT (default target-cuda/gpu-check) gets nvidia-smi.txt, tests.log, bench.log, results.json and the
# host-*.txt and host-*.log files; the exit status is 0 only when every test run passed and the benchmark ran.
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
BUNDLE=${BUNDLE:-$ROOT/target-cuda/gpu-bundle}
OUT=${OUT:-$ROOT/target-cuda/gpu-check}
PYTHON=${PYTHON:-python3}
# The benchmark's inputs: ../shared/data beside the checkout, else the copy build_cuda.sh put in the bundle.
data=$ROOT/../shared/data
[[ -e $data/glue/SST-2/dev.tsv ]] || data=$BUNDLE/data
DATA=${DATA:-$data/glue/SST-2/dev.tsv}
VOCAB=${VOCAB:-$data/vocab/bert-base-uncased}
BENCH=1
[[ ${1:-} == --no-bench ]] && BENCH=0
mkdir -p "$OUT"

say() { echo "gpu_check: $*"; }
die() {
    say "$*"
    exit 1
}

for packed in "$BUNDLE.tar.xz" "$BUNDLE.tar.gz"; do
    if [[ ! -e $BUNDLE && -e $packed ]]; then
        say "unpacking $packed"
        tar -C "$(dirname "$BUNDLE")" -xf "$packed" || die "cannot unpack $packed"
    fi
done
[[ -x $BUNDLE/deps/integration ]] || die "no test binary at $BUNDLE/deps/integration: run scripts/build/build_cuda.sh on the build machine and copy its target-cuda/gpu-bundle here (or set BUNDLE)"
cat "$BUNDLE/BUILD_INFO" 2>/dev/null | sed 's/^/  bundle: /'
want_cap=$(sed -n 's/^compute_cap=//p' "$BUNDLE/BUILD_INFO" 2>/dev/null)
want_cuda=$(sed -n 's/^cuda=//p' "$BUNDLE/BUILD_INFO" 2>/dev/null)

# 1. Driver and GPU.
command -v nvidia-smi >/dev/null || die "nvidia-smi is missing: no NVIDIA driver on this machine"
nvidia-smi | tee "$OUT/nvidia-smi.txt" | head -12
driver_cuda=$(sed -n 's/.*CUDA Version: *\([0-9.]*\).*/\1/p' "$OUT/nvidia-smi.txt" | head -1)
gpu=$(nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader | head -1)
cap=$(echo "$gpu" | awk -F', ' '{print $3}' | tr -d .)
say "GPU: $gpu; driver CUDA $driver_cuda; bundle built for CUDA ${want_cuda:-?}, compute capability ${want_cap:-?}"
if [[ -n $want_cuda && -n $driver_cuda ]]; then
    older=$(printf '%s\n%s\n' "$driver_cuda" "$want_cuda" | sort -V | head -1)
    [[ $older == "$want_cuda" ]] || die "the driver supports CUDA $driver_cuda, older than the bundle's $want_cuda: rebuild with CUDA_WHEELS=$driver_cuda"
fi
[[ -z $want_cap || $cap == "$want_cap" ]] || die "the GPU has compute capability $cap, the bundle was built for $want_cap: rebuild with CUDA_COMPUTE_CAP=$cap"

# 2. The CUDA libraries.
candidates=("$BUNDLE/lib")
[[ -n ${CUDA_HOME:-} ]] && candidates+=("$CUDA_HOME/lib64" "$CUDA_HOME/lib")
candidates+=(/usr/local/cuda/lib64 /usr/local/cuda-13*/lib64 /usr/local/cuda/targets/x86_64-linux/lib)
site=$("$PYTHON" -c 'import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], "cu13", "lib"))' 2>/dev/null || true)
[[ -n $site ]] && candidates+=("$site")
libdir=
for dir in "${candidates[@]}"; do
    if [[ -e $dir/libcublasLt.so.13 ]]; then
        libdir=$dir
        break
    fi
done
if [[ -n $libdir ]]; then
    say "CUDA libraries from $libdir"
    export LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
else
    say "no libcublasLt.so.13 in ${candidates[*]}: trying the system's"
fi
missing=$(ldd "$BUNDLE/deps/integration" "$BUNDLE/examples/classify" | grep 'not found' | sort -u)
[[ -z $missing ]] || die "libraries not found:
$missing
(build with BUNDLE_LIBS=1, or install CUDA 13's cuBLAS, cuRAND, NVRTC and runtime, or set CUDA_HOME)"

# 3. The test suite on the GPU.
status=0
say "tests on cuda (log: $OUT/tests.log)"
ROFORMER_TEST_DEVICE=cuda ROFORMER_SOURCE_DIR=$ROOT ROFORMER_PRINT_DIFFS=1 \
    "$BUNDLE/deps/integration" model_parity:: families:: pipelines:: model_behaviour:: quantization:: \
    --test-threads=4 --nocapture 2>&1 | tee "$OUT/tests.log" | grep -E '^test |test result|max abs|not run here|panicked'
[[ ${PIPESTATUS[0]} == 0 ]] || {
    status=1
    say "TESTS FAILED on the GPU"
}

# 3b. The reference's own half precision on this GPU, beside the bounds the tests hold ours to.
if "$PYTHON" -c 'import torch, transformers, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    "$PYTHON" scripts/checks/half_precision_gpu.py 2>&1 | grep -v Warning | tee "$OUT/half_precision.log"
fi

# 4. The benchmark.
if [[ $BENCH == 1 ]]; then
    if "$PYTHON" -c 'import torch, transformers, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
        say "base-size benchmark against PyTorch fp16 (log: $OUT/bench.log)"
        # The result file goes to $OUT, which comes back from the GPU machine: commit it under benchmarks/results/.
        "$PYTHON" scripts/bench/bench_e2e_cuda.py --classify "$BUNDLE/examples/classify" --data "$DATA" --vocab "$VOCAB" \
            --result-dir "$OUT" 2>&1 |
            tee "$OUT/bench.log"
        [[ ${PIPESTATUS[0]} == 0 ]] || status=1
        cp target/bench-e2e-cuda/results.json "$OUT/" 2>/dev/null
    else
        say "BENCHMARK NOT RUN: $PYTHON has no torch with CUDA, or no transformers (see the top of this script)"
        status=1
    fi
fi
# 5. The host's CPU.
BUNDLE=$BUNDLE OUT=$OUT scripts/checks/host_cpu_check.sh || status=1
say "done, status $status; figures in $OUT"
exit $status
