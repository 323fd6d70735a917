#!/usr/bin/env bash
# Builds the browser package: roformer-wasm for wasm32-unknown-unknown (simd128, from
# .cargo/config.toml), then wasm-bindgen --target web into target/wasm-pkg/:
# roformer_wasm.js (an ES module), roformer_wasm_bg.wasm and the TypeScript types.
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
rm -rf "$OUT"
wasm-bindgen --target web --out-dir "$OUT" "$TARGET_DIR/wasm32-unknown-unknown/wasm-release/roformer_wasm.wasm"
wasm=$OUT/roformer_wasm_bg.wasm
echo "built $OUT: $(wc -c < "$wasm") bytes of .wasm, $(gzip -9 -c "$wasm" | wc -c) gzipped (wasm-bindgen $version)"
