#!/usr/bin/env python3
# Embeds a TSV column with Spark: in process (--model, the roformer_rs wheel) or through a running roformer-serve (--url).
"""Embeds a TSV column with Spark on a local Spark (local[2]), in process or through a server.

    scripts/scale/spark_embed.py --model models/roformer-sst2 --input ../shared/data/glue/SST-2/dev.tsv --rows 872
    scripts/scale/spark_embed.py --url http://127.0.0.1:8080 --input ../shared/data/glue/SST-2/dev.tsv --rows 872

In process (`--model`), `mapInPandas` runs on each partition with one roformer_rs.SentenceEncoder per
Python worker (an executor's task slot; Spark reuses its workers, so the model loads once per slot),
of `--threads` threads (1 by default: local[2] runs two slots). Through a server, a pandas UDF sends
each Arrow batch in requests of `--batch-size` texts with `truncate: true`. Needs Java (Debian's
openjdk-17-jre-headless). Every input row must come back once, in order; in process, each embedding
must equal the one a direct `encode` gives.
"""

import os
import sys
import time

import pandas as pd
from pyspark.sql import SparkSession
from pyspark.sql.functions import col, pandas_udf, size

from scale_client import EmbedClient, check_rows, client_arguments, read_texts

_ENCODERS = {}


def encode_partitions(model, precision, threads, batch_size):
    """mapInPandas' function: each worker process keeps its encoder across the partitions it runs."""

    def run(frames):
        key = (model, precision, threads)
        if key not in _ENCODERS:
            from roformer_rs import SentenceEncoder

            _ENCODERS[key] = SentenceEncoder(model, precision=precision, threads=threads)
        encoder = _ENCODERS[key]
        for frame in frames:
            embeddings = encoder.encode(frame["text"].tolist(), batch_size=batch_size)
            yield frame.assign(embedding=list(embeddings))

    return run


def embed_udf(url, batch_size, api_key):
    @pandas_udf("array<float>")
    def embed(texts: pd.Series) -> pd.Series:
        client, out = EmbedClient(url, api_key), []
        for i in range(0, len(texts), batch_size):
            out.extend(client.embed(texts[i:i + batch_size].tolist()))
        return pd.Series(out)

    return embed


def main():
    parser = client_arguments(__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=4)
    args = parser.parse_args()
    in_process = args.model is not None
    if in_process and args.threads is None:
        args.threads = 1

    # The workers run this interpreter (the one with pandas, and roformer_rs or requests).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    texts = read_texts(args.input, args.column, args.rows)
    spark = (SparkSession.builder.master("local[2]").appName("roformer-embed")
             .config("spark.ui.enabled", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    start = time.time()
    df = spark.createDataFrame(pd.DataFrame({"id": range(len(texts)), "text": texts})).repartition(args.partitions)
    if in_process:
        out = df.mapInPandas(encode_partitions(args.model, args.precision, args.threads, args.batch_size),
                             schema="id long, text string, embedding array<float>")
        rows = out.orderBy("id").collect()
    else:
        out = df.withColumn("embedding", embed_udf(args.url, args.batch_size, args.api_key)(col("text")))
        rows = out.select("id", "text", "embedding", size("embedding").alias("dim")).orderBy("id").collect()
    elapsed = time.time() - start
    version = spark.version
    spark.stop()

    ok = [r["text"] for r in rows] == texts
    ok = check_rows(args, texts, [r["id"] for r in rows], [r["embedding"] for r in rows]) and ok
    mode = (f"in process ({args.model}, {args.precision}, {args.threads} thread(s) per slot)"
            if in_process else f"through {args.url}")
    print(f"spark {version} local[2] {mode}: {len(texts)} rows in, {len(rows)} embeddings out, "
          f"{args.partitions} partitions, batches of {args.batch_size}, {elapsed:.1f} s, "
          f"{len(texts) / elapsed:.1f} rows/s (start-up included)")
    print("one embedding per input row: " + ("ok" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
