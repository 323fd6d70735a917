# The TSV reader that ray_embed.py and spark_embed.py import; not run on its own.
"""The first rows of one column of a GLUE-style TSV, for the scale-out scripts (ray_embed.py, spark_embed.py)."""

import csv


def read_texts(path, column, rows):
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        return [row[column] for _, row in zip(range(rows), reader)]
