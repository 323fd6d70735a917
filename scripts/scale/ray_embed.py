#!/usr/bin/env python3
# Embeds a TSV column with Ray Data: in process (--model, the roformer_rs wheel) or through a running roformer-serve (--url).
"""Embeds a TSV column with Ray Data on a local Ray (ray.init(num_cpus=2)), in process or through a server.

    scripts/scale/ray_embed.py --model models/roformer-sst2 --input ../shared/data/glue/SST-2/dev.tsv --rows 872
    scripts/scale/ray_embed.py --url http://127.0.0.1:8080 --input ../shared/data/glue/SST-2/dev.tsv --rows 872

In process (`--model`), `map_batches` runs a class that holds one roformer_rs.SentenceEncoder per actor
(`--actors` actors of `--threads` threads, each asking Ray for `--actor-cpus` CPUs, so that Ray Data's own
tasks still find one); Ray passes numpy batches
and gets a [rows, dim] float32 array back. Through a server, each actor keeps one HTTP session and sends
batches of `--batch-size` texts with `truncate: true`. Either way, every input row must come back once,
in order; in process, each embedding must equal the one a direct `encode` gives.
"""

import sys
import time

import ray

from scale_client import EmbedClient, check_rows, client_arguments, read_texts


class Encode:
    """One encoder per actor, loaded once; the GIL is released while it computes."""

    def __init__(self, model, precision, threads, batch_size):
        from roformer_rs import SentenceEncoder

        self.encoder = SentenceEncoder(model, precision=precision, threads=threads)
        self.batch_size = batch_size

    def __call__(self, batch):
        batch["embedding"] = self.encoder.encode(list(batch["text"]), batch_size=self.batch_size)
        return batch


class Embed:
    """One HTTP session per actor to a roformer-serve."""

    def __init__(self, url, api_key):
        self.client = EmbedClient(url, api_key)

    def __call__(self, batch):
        batch["embedding"] = self.client.embed([str(t) for t in batch["text"]])
        return batch


def main():
    parser = client_arguments(__doc__.splitlines()[0])
    parser.add_argument("--actors", type=int, default=None,
                        help="actors (default: 1 in process, with --threads 2; 4 through a server)")
    parser.add_argument("--actor-cpus", type=float, default=1.0,
                        help="in process: the CPUs each actor asks Ray for (of ray.init's 2)")
    args = parser.parse_args()
    in_process = args.model is not None
    actors = args.actors or (1 if in_process else 4)
    if in_process and args.threads is None:
        args.threads = max(1, 2 // actors)

    texts = read_texts(args.input, args.column, args.rows)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    start = time.time()
    ds = ray.data.from_items([{"id": i, "text": t} for i, t in enumerate(texts)])
    if in_process:
        ds = ds.repartition(actors * 2).map_batches(
            Encode,
            fn_constructor_args=(args.model, args.precision, args.threads, args.batch_size),
            batch_size=args.batch_size * 8,
            batch_format="numpy",
            concurrency=actors,
            # Ray's count, not the encoder's threads: an actor that reserved both of ray.init's CPUs
            # would leave none for Ray Data's own read and repartition tasks, and the run would wait.
            num_cpus=args.actor_cpus,
        )
    else:
        ds = ds.repartition(actors * 2).map_batches(
            Embed,
            fn_constructor_args=(args.url, args.api_key),
            batch_size=args.batch_size,
            batch_format="pandas",
            compute=ray.data.ActorPoolStrategy(size=actors),
            num_cpus=0.25,
        )
    rows = sorted(ds.take_all(), key=lambda r: r["id"])
    elapsed = time.time() - start
    version = ray.__version__
    ray.shutdown()

    ok = [r["text"] for r in rows] == texts
    ok = check_rows(args, texts, [r["id"] for r in rows], [r["embedding"] for r in rows]) and ok
    mode = (f"in process ({args.model}, {args.precision}, {actors} actors x {args.threads} threads)"
            if in_process else f"through {args.url} ({actors} actors)")
    print(f"ray {version} {mode}: {len(texts)} rows in, {len(rows)} embeddings out, batches of {args.batch_size}, "
          f"{elapsed:.1f} s, {len(texts) / elapsed:.1f} rows/s (start-up included)")
    print("one embedding per input row: " + ("ok" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
