#!/usr/bin/env bash
# Cross-builds the library, its examples and its tests for aarch64 Linux and runs the tests under
# qemu's user-mode emulation, programs the tests start included (ROFORMER_TEST_RUNNER). This checks
# that the portable kernels build and give the fixtures' answers on an ARM CPU, on both engines;
# emulated timings mean nothing, so it measures no speed.
# Needs: rustup target aarch64-unknown-linux-gnu, and Debian's gcc-aarch64-linux-gnu,
# g++-aarch64-linux-gnu, libc6-dev-arm64-cross and qemu-user.
# Extra arguments go to the test binaries (a filter, --skip NAME).
set -euo pipefail
cd "$(dirname "$0")/../.."
runner="qemu-aarch64 -L /usr/aarch64-linux-gnu"
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="$runner"
export CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc
export CXX_aarch64_unknown_linux_gnu=aarch64-linux-gnu-g++
export ROFORMER_TEST_RUNNER="$runner"
# The 34k-token input of bad_input runs for many minutes under emulation; it is the same code on
# every CPU as the long-input tests that do run.
cargo test --release --target aarch64-unknown-linux-gnu -p roformer -- \
  --skip attention_that_would_not_fit_is_an_error_before_allocating "$@"
