#!/usr/bin/env python3
# Embeds a TSV column through a running roformer-serve with Ray Data. Run: scripts/scale/ray_embed.py --url URL --input FILE.tsv
"""Embeds a TSV column through a running roformer-serve with Ray Data, on a local Ray.

    scripts/scale/ray_embed.py --url http://127.0.0.1:8080 --input ../shared/data/glue/SST-2/dev.tsv --rows 300

Each actor of a pool (ActorPoolStrategy, a fractional CPU each, so that a 2-core machine can hold
them) keeps one HTTP session and sends batches of `--batch-size` texts with `truncate: true`; the
dataset is repartitioned so that every actor has blocks to work on and the server's queue stays
busy. Checks that every input row comes back with one embedding, in order.
"""

import argparse
import sys
import time

import ray
import requests

from tsv_texts import read_texts


class Embed:
    def __init__(self, url, api_key):
        self.url = url.rstrip("/") + "/embed"
        self.session = requests.Session()
        if api_key:
            self.session.headers["Authorization"] = f"Bearer {api_key}"

    def __call__(self, batch):
        texts = [str(t) for t in batch["text"]]
        r = self.session.post(self.url, json={"inputs": texts, "truncate": True}, timeout=120)
        r.raise_for_status()
        embeddings = r.json()
        if len(embeddings) != len(texts):
            raise RuntimeError(f"{len(texts)} texts, {len(embeddings)} embeddings")
        batch["embedding"] = embeddings
        return batch


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8080")
    parser.add_argument("--input", default="../shared/data/glue/SST-2/dev.tsv")
    parser.add_argument("--column", default="sentence")
    parser.add_argument("--rows", type=int, default=300)
    parser.add_argument("--batch-size", type=int, default=32, help="texts per request (<= --max-client-batch-size)")
    parser.add_argument("--actors", type=int, default=4)
    parser.add_argument("--api-key", default=None)
    args = parser.parse_args()

    texts = read_texts(args.input, args.column, args.rows)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    start = time.time()
    ds = ray.data.from_items([{"id": i, "text": t} for i, t in enumerate(texts)])
    ds = ds.repartition(args.actors * 2).map_batches(
        Embed,
        fn_constructor_args=(args.url, args.api_key),
        batch_size=args.batch_size,
        batch_format="pandas",
        compute=ray.data.ActorPoolStrategy(size=args.actors),
        num_cpus=0.25,
    )
    rows = sorted(ds.take_all(), key=lambda r: r["id"])
    elapsed = time.time() - start
    ray.shutdown()

    ids = [r["id"] for r in rows]
    dims = {len(r["embedding"]) for r in rows}
    ok = ids == list(range(len(texts))) and [r["text"] for r in rows] == texts and len(dims) == 1
    print(f"ray {ray.__version__}: {len(texts)} rows in, {len(rows)} embeddings out (dim {sorted(dims)}), "
          f"{args.actors} actors, batches of {args.batch_size}, {elapsed:.1f} s")
    print("one embedding per input row: " + ("ok" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
