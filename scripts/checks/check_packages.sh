#!/usr/bin/env bash
# The published packages, as crates.io would receive them: every member's .crate must stay within
# crates.io's 10 MiB and carry no tests, fixtures, scripts, benches, examples or docs, and (unless
# --quick) `cargo publish --workspace --dry-run` must pass, building each package against the others'.
#   scripts/checks/check_packages.sh           sizes, file lists and the dry run (what .ci/run runs)
#   scripts/checks/check_packages.sh --quick   sizes and file lists only (seconds)
set -euo pipefail
cd "$(dirname "$0")/../.."

limit=$((10 * 1024 * 1024))
packages="${CARGO_TARGET_DIR:-target}/package"
members=(roformer roformer-cli roformer-serve)

rm -f "$packages"/*.crate
# --allow-dirty: the check is of the working tree as it stands, committed or not.
cargo package --workspace --no-verify --allow-dirty --quiet

status=0
for name in "${members[@]}"; do
    crate=$(ls "$packages"/"$name"-[0-9]*.crate 2>/dev/null | head -n 1 || true)
    if [[ -z "$crate" ]]; then
        echo "check_packages: no .crate for $name: is it still published?" >&2
        status=1
        continue
    fi
    size=$(stat -c %s "$crate")
    awk -v n="$(basename "$crate")" -v s="$size" 'BEGIN { printf "check_packages: %-32s %8.2f MiB (limit 10 MiB)\n", n, s / 1048576 }'
    if ((size > limit)); then
        echo "check_packages: $crate is $size bytes, past crates.io's $limit" >&2
        status=1
    fi
    # Paths inside the .crate are <name>-<version>/<path>.
    files=$(tar -tzf "$crate" | cut -d/ -f2-)
    stray=$(grep -E '^(tests|benches|examples|scripts|docs|web|target)/|fixtures/|\.py$' <<<"$files" || true)
    if [[ -n "$stray" ]]; then
        echo "check_packages: $crate carries files that belong to the repository only:" >&2
        echo "$stray" >&2
        status=1
    fi
    for required in Cargo.toml README.md LICENSE-MIT LICENSE-APACHE; do
        if ! grep -qx "$required" <<<"$files"; then
            echo "check_packages: $crate lacks $required" >&2
            status=1
        fi
    done
done
if ! tar -tzf "$packages"/roformer-[0-9]*.crate | grep 'models/roformer-sst2/model.safetensors$' >/dev/null; then
    echo "check_packages: the roformer package lacks the built-in model its bundled-sst2 feature reads" >&2
    status=1
fi
((status == 0)) || exit "$status"

if [[ "${1:-}" != "--quick" ]]; then
    # The dry run builds each package against the others' from a local registry that cargo unpacks
    # under $CARGO_HOME/registry/src/-<hash>/ and, for the same version, never unpacks again: a
    # second run would build against the first run's sources. Those folders are cargo's own scratch.
    version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)
    # Cargo also keeps what it built from them, fingerprinted by version alone, in the dev profile
    # (the tests build release): clean our packages there.
    for name in "${members[@]}"; do
        rm -rf "${CARGO_HOME:-$HOME/.cargo}"/registry/src/-*/"$name-$version"
    done
    cargo clean --quiet --profile dev -p roformer -p roformer-cli -p roformer-serve
    # The dry run builds every dependency in the dev profile, which nothing else in .ci/run uses:
    # without debug info, since nothing runs or debugs what it builds (357 s with it, 257 without,
    # on a 2-core Zen 3).
    CARGO_PROFILE_DEV_DEBUG=0 cargo publish --workspace --dry-run --allow-dirty
fi
echo "check_packages: ok"
