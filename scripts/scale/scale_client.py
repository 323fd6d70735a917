# What ray_embed.py and spark_embed.py share (their arguments, the TSV reader, the /embed client); not run on its own.
"""The pieces both scale-out scripts (ray_embed.py, spark_embed.py) use: their common arguments, the first rows
of one column of a GLUE-style TSV, and a client of a roformer-serve's /embed that checks every text gets one
embedding."""

import argparse
import csv

import requests


def client_arguments(description):
    """A parser with the arguments both scripts take; each adds its own parallelism."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--url", default="http://127.0.0.1:8080")
    parser.add_argument("--input", default="../shared/data/glue/SST-2/dev.tsv")
    parser.add_argument("--column", default="sentence")
    parser.add_argument("--rows", type=int, default=300)
    parser.add_argument("--batch-size", type=int, default=32, help="texts per request (<= --max-client-batch-size)")
    parser.add_argument("--api-key", default=None)
    return parser


def read_texts(path, column, rows):
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        return [row[column] for _, row in zip(range(rows), reader)]


class EmbedClient:
    """One HTTP session to a roformer-serve's /embed."""

    def __init__(self, url, api_key):
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
