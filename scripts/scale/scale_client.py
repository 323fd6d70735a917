# What ray_embed.py and spark_embed.py share (their arguments, the TSV reader, the /embed client, the row check); not run on its own.
"""The pieces both scale-out scripts (ray_embed.py, spark_embed.py) use: their common arguments, the first rows
of one column of a GLUE-style TSV, a client of a roformer-serve's /embed that checks every text gets one
embedding, and the check of a run's rows against one direct `encode` in this process."""

import argparse
import csv


def client_arguments(description):
    """A parser with the arguments both scripts take; each adds its own parallelism."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--url", default="http://127.0.0.1:8080")
    parser.add_argument("--input", default="../shared/data/glue/SST-2/dev.tsv")
    parser.add_argument("--column", default="sentence")
    parser.add_argument("--rows", type=int, default=300)
    parser.add_argument("--batch-size", type=int, default=32, help="texts per request (<= --max-client-batch-size)")
    parser.add_argument("--api-key", default=None)
    parser.add_argument("--model", default=None,
                        help="run in process: the roformer_rs wheel's SentenceEncoder on this folder or Hub id, "
                             "instead of the server at --url")
    parser.add_argument("--precision", default="float32", help="in process: float32, int8 or bfloat16")
    parser.add_argument("--threads", type=int, default=None, help="in process: threads of each encoder")
    return parser


def check_rows(args, texts, ids, embeddings):
    """Every input row once, in order, each with the embedding one direct `encode` of all the texts
    gives in this process (in process: within 1e-6, and how many bit for bit); through a server, one
    embedding of one length per row."""
    import numpy as np

    if ids != list(range(len(texts))):
        print(f"rows out of order or missing: {len(ids)} of {len(texts)}")
        return False
    if args.model is None:
        dims = {len(e) for e in embeddings}
        return len(dims) == 1 and -1 not in dims
    from roformer_rs import SentenceEncoder

    direct = SentenceEncoder(args.model, precision=args.precision, threads=args.threads).encode(
        texts, batch_size=args.batch_size)
    ours = np.stack([np.asarray(e, dtype=np.float32) for e in embeddings])
    equal = int(sum(np.array_equal(a, b) for a, b in zip(ours, direct)))
    worst = float(np.abs(ours - direct).max()) if len(texts) else 0.0
    print(f"against one direct encode: {equal} of {len(texts)} rows equal bit for bit, max |diff| {worst:.2e}")
    return ours.shape == direct.shape and worst <= 1e-6


def read_texts(path, column, rows):
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        return [row[column] for _, row in zip(range(rows), reader)]


class EmbedClient:
    """One HTTP session to a roformer-serve's /embed."""

    def __init__(self, url, api_key):
        import requests

        self.url = url.rstrip("/") + "/embed"
        self.session = requests.Session()
        if api_key:
            self.session.headers["Authorization"] = f"Bearer {api_key}"

    def embed(self, texts):
        """One embedding per text, in order (truncating long texts); an error when the count is off."""
        r = self.session.post(self.url, json={"inputs": texts, "truncate": True}, timeout=120)
        r.raise_for_status()
        embeddings = r.json()
        if len(embeddings) != len(texts):
            raise RuntimeError(f"{len(texts)} texts, {len(embeddings)} embeddings")
        return embeddings
