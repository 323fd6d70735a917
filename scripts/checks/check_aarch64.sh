#!/usr/bin/env bash
# Cross-builds the library's tests for aarch64 Linux and runs them under qemu's user-mode
# emulation, programs the tests start included (ROFORMER_TEST_RUNNER), on an emulated CPU model:
# `max` (NEON, dotprod, i8mm: every aarch64 level, which the levels test runs one by one),
# `cortex-a76` (dotprod without i8mm) or `cortex-a72` (NEON alone), so that the crate's own
# feature detection is what picks the level. Emulated timings mean nothing: correctness only.
# Usage: scripts/checks/check_aarch64.sh [--cpu MODEL] [--installs] [test binary arguments: a filter, --skip NAME]
#   --installs  first install what it needs (rustup target aarch64-unknown-linux-gnu; Debian's
#               gcc-aarch64-linux-gnu, g++-aarch64-linux-gnu, libc6-dev-arm64-cross, qemu-user).
set -euo pipefail
cd "$(dirname "$0")/../.."
cpu=max
if [[ "${1:-}" == "--cpu" ]]; then cpu="$2"; shift 2; fi
if [[ "${1:-}" == "--installs" ]]; then
    shift
    rustup target add aarch64-unknown-linux-gnu >/dev/null
    if ! command -v qemu-aarch64 >/dev/null || ! command -v aarch64-linux-gnu-g++ >/dev/null; then
        apt-get update -qq
        apt-get install -y -qq qemu-user gcc-aarch64-linux-gnu g++-aarch64-linux-gnu libc6-dev-arm64-cross >/dev/null
    fi
fi
runner="qemu-aarch64 -cpu $cpu -L /usr/aarch64-linux-gnu"
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="$runner"
export CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc
export CXX_aarch64_unknown_linux_gnu=aarch64-linux-gnu-g++
export ROFORMER_TEST_RUNNER="$runner"
echo "aarch64 tests on qemu's $cpu"
# The 34k-token input of bad_input runs for many minutes under emulation; it is the same code on
# every CPU as the long-input tests that do run.
cargo test --release --target aarch64-unknown-linux-gnu -p roformer -- \
  --skip attention_that_would_not_fit_is_an_error_before_allocating "$@"
