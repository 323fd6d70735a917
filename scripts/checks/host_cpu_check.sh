#!/usr/bin/env bash
# The CPU of the machine a GPU check runs on, with the same bundle (scripts/build/build_cuda.sh). The GPU machines
# lent to this project have had Intel Xeon hosts with AMX, which the build and CI machines mostly lack, so a GPU
# check is also the chance to run the `amx` level on the real unit:
#
#   scripts/checks/host_cpu_check.sh          (gpu_check.sh runs it last; BUNDLE and OUT as there)
#
# 1. The CPU: its model name, CPUID family and model, CPU count, and the flags the levels need ($OUT/host-cpu.txt).
# 2. The library's unit tests (the bundle's host/deps/roformer, built without CUDA). With a usable AMX unit they run
#    the `amx` level's tile programs on it, against the plain-Rust model of the unit and against the AVX-512 VNNI
#    kernel bit for bit; without one they print that the level ran on the model only ($OUT/host-unit.log).
# 3. The integration tests on the CPU (the bundle's host/deps/integration, with the examples they run beside it in
#    host/examples) at the CPU's best level, and each level below it that the levels test runs
#    ($OUT/host-tests.log).
# 4. `cargo bench --bench kernels -- gemm` (the bundle's host/bench/kernels, built without CUDA): the products per level and precision, the
#    `tdpbusd` loop, and the `amx` int8 product's share of that loop ($OUT/host-kernels.log). A GPU machine's host
#    is shared with other tenants, so its figures are not the idle 2-core Xeon's: say so beside any of them.
#
# The exit status is 0 only when both test runs passed; the bench's figures are reported, not judged.
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
BUNDLE=${BUNDLE:-$ROOT/target-cuda/gpu-bundle}
OUT=${OUT:-$ROOT/target-cuda/gpu-check}
mkdir -p "$OUT"

say() { echo "host_cpu_check: $*"; }

# 1. The CPU.
{
    grep -m1 '^model name' /proc/cpuinfo
    grep -m1 '^cpu family' /proc/cpuinfo
    grep -m1 '^model[[:space:]]' /proc/cpuinfo
    echo "cpus: $(nproc)"
    flags=$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' |
        grep -xE 'avx2|fma|avx512f|avx512bw|avx512_vnni|avx_vnni|avx512_bf16|amx_tile|amx_int8|amx_bf16' | tr '\n' ' ')
    echo "flags: $flags"
} | tee "$OUT/host-cpu.txt" | sed "s/^/host_cpu_check: /"
grep -q amx_int8 "$OUT/host-cpu.txt" || say "no amx_int8 in /proc/cpuinfo: the amx level cannot run here"

status=0
# Runs one test binary of the bundle into a log, prints what the log says about the levels and the totals, and
# records a failure.
run_tests() {
    local exe=$1 log=$2 name
    name=$(basename "$exe")
    shift 2
    if [[ ! -x $exe ]]; then
        say "NOT RUN: no $exe (rebuild the bundle with scripts/build/build_cuda.sh)"
        status=1
        return
    fi
    say "$name tests on the CPU (log: $log)"
    ROFORMER_SOURCE_DIR=$ROOT "$exe" "$@" >"$log" 2>&1
    local rc=$?
    # Which levels ran (each amx test says whether it ran on the unit or on the model only), then the totals and
    # the names of any failures.
    grep -E 'amx level|not run here|agree with /proc/cpuinfo' "$log" | sort -u | sed 's/^/  /'
    # The last "failures:" list and totals are the run's own (a test that runs this binary again at each level
    # prints the inner runs' too).
    awk '/^failures:$/ { list = "" } /^    [A-Za-z_:0-9]+$/ { list = list "\n  failed: " $1 }
         /^test result/ { total = $0 } END { print "  " total list }' "$log"
    [[ $rc == 0 ]] || {
        status=1
        say "$name TESTS FAILED on the host CPU"
    }
}

# 2. and 3. The tests. --nocapture, so that the amx tests' own lines (which level ran, or that it could not) reach
# the log.
run_tests "$BUNDLE/host/deps/roformer" "$OUT/host-unit.log" --nocapture
run_tests "$BUNDLE/host/deps/integration" "$OUT/host-tests.log" --nocapture

# 4. The kernels bench.
if [[ -x $BUNDLE/host/bench/kernels ]]; then
    say "cargo bench --bench kernels -- gemm (log: $OUT/host-kernels.log)"
    "$BUNDLE/host/bench/kernels" gemm 2>&1 | tee "$OUT/host-kernels.log"
    [[ ${PIPESTATUS[0]} == 0 ]] || say "the kernels bench failed (see the log)"
else
    say "NOT RUN: no $BUNDLE/host/bench/kernels (rebuild the bundle with scripts/build/build_cuda.sh)"
fi
say "done, status $status"
exit $status
