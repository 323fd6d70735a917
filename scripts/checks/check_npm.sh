#!/usr/bin/env bash
# The npm package as a user gets it: installs target/npm/roformer-wasm-<version>.tgz (from
# scripts/build/pack_npm.sh) into a new project in a scratch folder outside the repository, checks
# the tarball's file list, and runs wasm/npm/test/package.test.mjs there with `node --test`, which
# imports the package by name and reads the repository's fixtures (ROFORMER_REPO).
#
# Usage: bash scripts/checks/check_npm.sh   (after pack_npm.sh; CARGO_TARGET_DIR is honoured)
# Needs Node 20 or later and npm; no network (the tarball has no dependencies).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
TARGET_DIR=${CARGO_TARGET_DIR:-target}

die() {
    echo "check_npm.sh: $*" >&2
    exit 1
}

command -v node >/dev/null && command -v npm >/dev/null || die "needs node and npm (Node 20 or later)"
major=$(node -p 'process.versions.node.split(".")[0]')
((major >= 20)) || die "needs Node 20 or later, not $(node --version)"
version=$(awk '/^\[workspace\.package\]/ { section = 1; next } /^\[/ { section = 0 }
    section && $1 == "version" { gsub(/"/, "", $3); print $3; exit }' Cargo.toml)
tarball=$TARGET_DIR/npm/roformer-wasm-$version.tgz
[[ -f "$tarball" ]] || die "no $tarball: run scripts/build/pack_npm.sh first"
tarball=$(cd "$(dirname "$tarball")" && pwd)/$(basename "$tarball")

want="LICENSE-APACHE LICENSE-MIT README.md index.d.ts index.js package.json roformer_wasm.js roformer_wasm_bg.wasm roformer_wasm_relaxed_bg.wasm worker.js"
got=$(tar -tzf "$tarball" | sed 's|^package/||' | sort | xargs)
[[ "$got" == "$want" ]] || die "the tarball holds [$got], not [$want]"

scratch=$(mktemp -d "${TMPDIR:-/tmp}/roformer-npm.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
case "$scratch/" in "$root"/*) die "the scratch folder $scratch is inside the repository" ;; esac
app=$scratch/app
mkdir "$app"
cd "$app"
npm init -y >/dev/null
npm install --offline --no-audit --no-fund --loglevel=error "$tarball"
cp "$root/wasm/npm/test/package.test.mjs" .
echo "check_npm.sh: node $(node --version), $(basename "$tarball") installed in $app"
ROFORMER_REPO=$root node --test package.test.mjs
