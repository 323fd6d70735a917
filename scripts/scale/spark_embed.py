#!/usr/bin/env python3
# Embeds a TSV column through a running roformer-serve with Spark. Run: scripts/scale/spark_embed.py --url URL --input FILE.tsv
"""Embeds a TSV column through a running roformer-serve with Spark, on a local Spark (local[2]).

    scripts/scale/spark_embed.py --url http://127.0.0.1:8080 --input ../shared/data/glue/SST-2/dev.tsv --rows 300

A pandas UDF sends each Arrow batch to the server in requests of `--batch-size` texts with
`truncate: true`; the rows are repartitioned so that both local cores send at once and the
server's queue stays busy. Needs Java (Debian's openjdk-17-jre-headless). Checks that every
input row comes back with one embedding.
"""

import os
import sys
import time

import pandas as pd
from pyspark.sql import SparkSession
from pyspark.sql.functions import col, pandas_udf, size

from scale_client import EmbedClient, client_arguments, read_texts


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

    # The workers run this interpreter (the one with pandas and requests).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    texts = read_texts(args.input, args.column, args.rows)
    spark = (SparkSession.builder.master("local[2]").appName("roformer-embed")
             .config("spark.ui.enabled", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    start = time.time()
    df = spark.createDataFrame(pd.DataFrame({"id": range(len(texts)), "text": texts}))
    out = df.repartition(args.partitions).withColumn("embedding", embed_udf(args.url, args.batch_size, args.api_key)(col("text")))
    rows = out.select("id", "text", size("embedding").alias("dim")).orderBy("id").collect()
    elapsed = time.time() - start
    version = spark.version
    spark.stop()

    dims = {r["dim"] for r in rows}
    ok = [r["id"] for r in rows] == list(range(len(texts))) and [r["text"] for r in rows] == texts and len(dims) == 1 and -1 not in dims
    print(f"spark {version} local[2]: {len(texts)} rows in, {len(rows)} embeddings out (dim {sorted(dims)}), "
          f"{args.partitions} partitions, batches of {args.batch_size}, {elapsed:.1f} s")
    print("one embedding per input row: " + ("ok" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
