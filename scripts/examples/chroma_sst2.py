#!/usr/bin/env python3
# Indexes SST-2 dev in a Chroma collection on disk with roformer_rs.chroma, then prints the top 3 for a query.
"""Retrieval with Chroma and the roformer_rs wheel: SST-2 dev's sentences in a persistent collection, embedded
by RoformerEmbeddingFunction (the bundled models/roformer-sst2 by default, mean-pooled and scaled to unit
length), and the nearest sentences to a query by cosine distance.

    pip install ./python chromadb
    python scripts/examples/chroma_sst2.py [--query "a moving and beautifully acted film"] [--top 3]
        [--model models/roformer-sst2] [--tsv ../shared/data/glue/SST-2/dev.tsv] [--path target/chroma-sst2]

The first run indexes the file; a later one reopens the collection from disk, where Chroma builds the
embedding function again from the collection's config (importing roformer_rs.chroma registers it), and
only queries. `--reindex` starts over."""

import argparse
import csv
import os
import sys

import chromadb
from chromadb.config import Settings
from roformer_rs.chroma import RoformerEmbeddingFunction

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COLLECTION = "sst2_dev"


def read_sst2(path):
    """SST-2's (sentence, label) rows, the header skipped."""
    with open(path, encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    if not rows or rows[0][:2] != ["sentence", "label"]:
        sys.exit(f"{path}: not SST-2's TSV (sentence, label)")
    return [(sentence.strip(), int(label)) for sentence, label in rows[1:]]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--query", default="a moving and beautifully acted film")
    parser.add_argument("--top", type=int, default=3)
    parser.add_argument("--model", default=os.path.join(REPO, "models", "roformer-sst2"))
    parser.add_argument("--tsv", default=os.path.join(REPO, "..", "shared", "data", "glue", "SST-2", "dev.tsv"))
    parser.add_argument("--path", default=os.path.join(REPO, "target", "chroma-sst2"), help="the Chroma folder")
    parser.add_argument("--batch", type=int, default=256, help="documents per add()")
    parser.add_argument("--reindex", action="store_true", help="delete the collection and index again")
    args = parser.parse_args()

    client = chromadb.PersistentClient(path=args.path, settings=Settings(anonymized_telemetry=False))
    names = [c.name for c in client.list_collections()]
    if args.reindex and COLLECTION in names:
        client.delete_collection(COLLECTION)
        names.remove(COLLECTION)
    if COLLECTION in names:
        # Chroma reads the embedding function's name and config from the collection and builds it again.
        collection = client.get_collection(COLLECTION)
        print(f"reopened {collection.count()} sentences in {os.path.relpath(args.path, REPO)} (collection {COLLECTION})")
    else:
        rows = read_sst2(args.tsv)
        function = RoformerEmbeddingFunction(model_name=os.path.abspath(args.model), normalize_embeddings=True)
        collection = client.create_collection(
            COLLECTION, embedding_function=function, configuration={"hnsw": {"space": "cosine"}}
        )
        for start in range(0, len(rows), args.batch):
            batch = rows[start:start + args.batch]
            collection.add(
                ids=[f"dev-{start + i}" for i in range(len(batch))],
                documents=[sentence for sentence, _ in batch],
                metadatas=[{"label": "positive" if label else "negative"} for _, label in batch],
            )
        print(f"indexed {collection.count()} sentences of {os.path.relpath(args.tsv, REPO)} in "
              f"{os.path.relpath(args.path, REPO)} (collection {COLLECTION})")
    function = collection.configuration["embedding_function"]
    print(f"embedding function: {type(function).__name__} {function.get_config()}")
    found = collection.query(query_texts=[args.query], n_results=args.top, include=["documents", "metadatas", "distances"])
    print(f"query: {args.query!r}")
    for rank, (id_, text, meta, distance) in enumerate(
        zip(found["ids"][0], found["documents"][0], found["metadatas"][0], found["distances"][0]), 1
    ):
        print(f"{rank}. {id_:<8} cosine {1 - distance:.4f}  [{meta['label']}] {text}")


if __name__ == "__main__":
    main()
