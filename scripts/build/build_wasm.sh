#!/usr/bin/env bash
# Builds the browser package: roformer-wasm for wasm32-unknown-unknown twice, with simd128 (from
# .cargo/config.toml) and with simd128 + relaxed-simd, then wasm-bindgen --target web into
# target/wasm-pkg/: roformer_wasm.js (the ES module both share), roformer_wasm_bg.wasm,
# roformer_wasm_relaxed_bg.wasm and the TypeScript types; then the npm package
# (scripts/build/pack_npm.sh) into target/npm/roformer-wasm-<version>.tgz.
#
# Usage: bash scripts/build/build_wasm.sh
# It installs what is missing: the Rust target (rustup) and wasm-bindgen-cli at the version
# Cargo.lock pins for wasm-bindgen, which must match it exactly. No C compiler: nothing under
# roformer-wasm compiles C (`cargo tree --target wasm32-unknown-unknown -i cc` finds no cc).
set -euo pipefail
cd "$(dirname "$0")/../.."
TARGET_DIR=${CARGO_TARGET_DIR:-target}
OUT=$TARGET_DIR/wasm-pkg

rustup target list --installed | grep -qx wasm32-unknown-unknown || rustup target add wasm32-unknown-unknown
version=$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/[^0-9.]/, ""); print; exit }' Cargo.lock)
if [ "$(wasm-bindgen --version 2>/dev/null | awk '{print $2}')" != "$version" ]; then
    # Not --locked: the CLI's lock file can name versions a registry mirror does not hold yet.
    cargo install wasm-bindgen-cli --version "$version"
fi

cargo build -p roformer-wasm --target wasm32-unknown-unknown --profile wasm-release
# The relaxed build in a target folder of its own, so that neither build undoes the other.
CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUSTFLAGS="-C target-feature=+simd128,+relaxed-simd" \
    cargo build -p roformer-wasm --target wasm32-unknown-unknown --profile wasm-release \
    --target-dir "$TARGET_DIR/wasm-relaxed"
rm -rf "$OUT" "$OUT-relaxed"
wasm-bindgen --target web --out-dir "$OUT" "$TARGET_DIR/wasm32-unknown-unknown/wasm-release/roformer_wasm.wasm"
wasm-bindgen --target web --out-dir "$OUT-relaxed" \
    "$TARGET_DIR/wasm-relaxed/wasm32-unknown-unknown/wasm-release/roformer_wasm.wasm"
# One JavaScript module serves both .wasm files: the two builds differ only in instructions,
# not in what they import or export (the glue's comments number closure shims, which may differ).
# Should wasm-bindgen ever generate different code for them, stop here.
code() { grep -v '^ *//' "$1"; }
if ! cmp -s <(code "$OUT/roformer_wasm.js") <(code "$OUT-relaxed/roformer_wasm.js"); then
    echo "the simd128 and relaxed-simd builds have different JavaScript glue: diff $OUT/roformer_wasm.js $OUT-relaxed/roformer_wasm.js" >&2
    exit 1
fi
mv "$OUT-relaxed/roformer_wasm_bg.wasm" "$OUT/roformer_wasm_relaxed_bg.wasm"
rm -rf "$OUT-relaxed"
for wasm in "$OUT"/*.wasm; do
    echo "built $wasm: $(wc -c < "$wasm") bytes, $(gzip -9 -c "$wasm" | wc -c) gzipped (wasm-bindgen $version)"
done
bash scripts/build/pack_npm.sh
