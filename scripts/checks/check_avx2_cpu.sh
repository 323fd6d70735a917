#!/usr/bin/env bash
# Runs the library's tests on an emulated AVX2-only CPU: qemu-user's Haswell model has AVX2, FMA
# and F16C and no AVX-512 or VNNI, so the crate's own feature detection (not ROFORMER_CPU_LEVEL)
# picks the avx2 level, and any AVX-512 instruction that slipped into a path would stop the run
# with SIGILL. Timings under emulation mean nothing; this checks correctness only.
# Needs Debian's qemu-user. Extra arguments go to the test binaries (a filter, --skip NAME).
set -euo pipefail
cd "$(dirname "$0")/../.."
runner="qemu-x86_64 -cpu Haswell"
export CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUNNER="$runner"
export ROFORMER_TEST_RUNNER="$runner"
# qemu names each Haswell feature its TCG lacks (TSX, PCID, ...), none of which the crate uses.
export QEMU_LOG_FILENAME=/dev/null
# The 34k-token input of bad_input runs for many minutes under emulation; it is the same code on
# every CPU as the long-input tests that do run.
cargo test --release --target x86_64-unknown-linux-gnu -p roformer -- \
  --skip attention_that_would_not_fit_is_an_error_before_allocating "$@" \
  2> >(grep -v "^qemu-x86_64: warning: TCG doesn't support requested feature" >&2)
