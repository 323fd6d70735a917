#!/usr/bin/env python3
# Embeds a TSV column through a running roformer-serve with Ray Data. Run: scripts/scale/ray_embed.py --url URL --input FILE.tsv
"""Embeds a TSV column through a running roformer-serve with Ray Data, on a local Ray.

    scripts/scale/ray_embed.py --url http://127.0.0.1:8080 --input ../shared/data/glue/SST-2/dev.tsv --rows 300

Each actor of a pool (ActorPoolStrategy, a fractional CPU each, so that a 2-core machine can hold
them) keeps one HTTP session and sends batches of `--batch-size` texts with `truncate: true`; the
dataset is repartitioned so that every actor has blocks to work on and the server's queue stays
busy. Checks that every input row comes back with one embedding, in order.
"""

import sys
import time

import ray

from scale_client import EmbedClient, client_arguments, read_texts


class Embed:
    def __init__(self, url, api_key):
        self.client = EmbedClient(url, api_key)

    def __call__(self, batch):
        batch["embedding"] = self.client.embed([str(t) for t in batch["text"]])
        return batch


def main():
    parser = client_arguments(__doc__.splitlines()[0])
    parser.add_argument("--actors", type=int, default=4)
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
