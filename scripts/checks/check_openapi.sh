#!/usr/bin/env bash
# schemathesis, with every check at its default expected statuses, against the release server's own
# OpenAPI document, once per kind of model: a classifier, a cross-encoder, a sentence-transformers
# embedding folder with prompts, and a masked LM with SPLADE pooling. Each server listens on 127.0.0.1 on a free port and is stopped afterwards. Not run by
# CI (it needs Python packages); serve/tests/serve/openapi.rs checks the same properties in Rust.
#   scripts/checks/check_openapi.sh                 100 examples per operation, at most 300 s per model
#   EXAMPLES=30 MAX_TIME=120 scripts/checks/check_openapi.sh   fewer examples, seconds per model
#   VENV=path scripts/checks/check_openapi.sh       schemathesis from (or installed into) that venv
#
# Each document lists only the operations its model serves (no /rerank for a classifier), so no
# request the document allows gets the 424 of a route the model does not serve. One refusal no
# JSON schema can state is left as it is: an input past the model's max length in tokens with
# `"truncate": false` gets 422.
set -euo pipefail
cd "$(dirname "$0")/../.."

examples=${EXAMPLES:-100}
max_time=${MAX_TIME:-300}
venv=${VENV:-.venv-schemathesis}
if [[ ! -x "$venv/bin/schemathesis" ]]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet schemathesis
fi
cargo build --release -p roformer-serve --quiet
bin="${CARGO_TARGET_DIR:-target}/release/roformer-serve"

work=$(mktemp -d)
server=""
cleanup() {
    if [[ -n "$server" ]]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

status=0
for model in models/roformer-sst2 \
    tests/fixtures/sentence_transformers/cross_encoder \
    tests/fixtures/sentence_transformers/st6_cls_dense \
    "tests/fixtures/pipelines/mlm --pooling splade"; do
    # shellcheck disable=SC2086 # the model's flags split
    "$bin" --model $model --host 127.0.0.1 --port 0 >"$work/out" 2>"$work/err" &
    server=$!
    address=""
    for _ in $(seq 1 300); do
        address=$(sed -n 's/^listening on //p' "$work/out")
        [[ -n "$address" ]] && break
        kill -0 "$server" 2>/dev/null || { cat "$work/err" >&2; exit 1; }
        sleep 0.1
    done
    [[ -n "$address" ]] || { echo "check_openapi: $model did not start" >&2; exit 1; }
    echo "check_openapi: $model on $address"
    if ! "$venv/bin/schemathesis" run \
        "http://$address/api-doc/openapi.json" --checks all --max-examples "$examples" \
        --request-timeout 30 --max-time "$max_time" --generation-database none --no-color; then
        status=1
    fi
    kill "$server"
    wait "$server" 2>/dev/null || true
    server=""
done
exit $status
