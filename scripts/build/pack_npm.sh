#!/usr/bin/env bash
# Packs the npm package roformer-wasm: target/npm/package/ from wasm/npm/ (entry, worker, types,
# README, package.json), what scripts/build/build_wasm.sh built into target/wasm-pkg/ (the glue
# roformer_wasm.js, the simd128 module roformer_wasm_bg.wasm and the relaxed-SIMD module
# roformer_wasm_relaxed_bg.wasm) and the repository's licence files, at the version of Cargo.toml's
# [workspace.package]; then `npm pack` into target/npm/roformer-wasm-<version>.tgz.
#
# Usage: bash scripts/build/pack_npm.sh   (after build_wasm.sh; CARGO_TARGET_DIR is honoured)
# scripts/checks/check_npm.sh installs the tarball in a scratch project and runs its tests.
set -euo pipefail
cd "$(dirname "$0")/../.."
TARGET_DIR=${CARGO_TARGET_DIR:-target}
WASM_PKG=$TARGET_DIR/wasm-pkg
OUT=$TARGET_DIR/npm

die() {
    echo "pack_npm.sh: $*" >&2
    exit 1
}

command -v npm >/dev/null || die "npm is not installed (Node 20 or later ships it)"
version=$(awk '/^\[workspace\.package\]/ { section = 1; next } /^\[/ { section = 0 }
    section && $1 == "version" { gsub(/"/, "", $3); print $3; exit }' Cargo.toml)
[[ -n "$version" ]] || die "no version in Cargo.toml's [workspace.package]"

sources=(wasm/npm/package.json wasm/npm/index.js wasm/npm/worker.js wasm/npm/index.d.ts wasm/npm/README.md)
built=("$WASM_PKG/roformer_wasm.js" "$WASM_PKG/roformer_wasm_bg.wasm" "$WASM_PKG/roformer_wasm_relaxed_bg.wasm")
licenses=(LICENSE-MIT LICENSE-APACHE)
for file in "${sources[@]}" "${licenses[@]}"; do
    [[ -f "$file" ]] || die "missing $file"
done
for file in "${built[@]}"; do
    [[ -f "$file" ]] || die "missing $file: run scripts/build/build_wasm.sh first"
done

rm -rf "$OUT/package" "$OUT"/roformer-wasm-*.tgz
mkdir -p "$OUT/package"
cp "${sources[@]}" "${built[@]}" "${licenses[@]}" "$OUT/package/"
(cd "$OUT/package" && npm pkg set version="$version")
tarball=$(cd "$OUT/package" && npm pack --pack-destination .. --silent)
[[ -f "$OUT/$tarball" ]] || die "npm pack did not write $OUT/$tarball"
echo "packed $OUT/$tarball: $(wc -c < "$OUT/$tarball") bytes ($(tar -tzf "$OUT/$tarball" | wc -l) files)"
