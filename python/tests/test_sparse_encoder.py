"""SparseEncoder against the SPLADE references (sentence-transformers 6.2 and TEI's formula)."""

import numpy as np
import pytest
from conftest import assert_close, fixture, reference, write_json
from roformer_rs import SparseEncoder

import scipy.sparse  # noqa: E402  (CI installs scipy: SparseEncoder returns its arrays)


def check(what, matrix, want, dim):
    assert matrix.shape == (len(want), dim)
    assert matrix.dtype == np.float32
    for i, row in enumerate(want):
        start, end = matrix.indptr[i], matrix.indptr[i + 1]
        assert list(matrix.indices[start:end]) == [p[0] for p in row], f"{what} row {i}: the non-zero entries"
        assert_close(f"{what} row {i}", matrix.data[start:end], [p[1] for p in row], relative_above_one=True)


def test_a_masked_lm_checkpoint():
    want = reference("pipelines", "mlm", "splade.json")
    model = SparseEncoder(fixture("pipelines", "mlm"))
    matrix = model.encode(want["texts"], batch_size=2)
    assert isinstance(matrix, scipy.sparse.csr_array)
    check("splade", matrix, want["sparse"], model.get_embedding_dimension())


def test_sentence_transformers_sparse_folders(fresh):
    want = reference("pipelines", "mlm", "splade_st.json")
    for i, variant in enumerate(want["variants"]):
        folder = fresh(fixture("pipelines", "mlm"), f"variant{i}")
        for name, value in variant["files"].items():
            write_json(folder, name, value)
        model = SparseEncoder(folder)
        check(f"splade_st {variant['variant']}", model.encode(want["texts"]), variant["sparse"], model.get_embedding_dimension())


def test_decode_gives_tokens_by_weight():
    model = SparseEncoder(fixture("pipelines", "mlm"))
    matrix = model.encode(["a great film", "the cat sat"])
    decoded = model.decode(matrix, top_k=3)
    assert len(decoded) == 2 and all(len(d) == 3 for d in decoded)
    row = matrix.toarray()[0]
    top = np.argsort(-row, kind="stable")[:3]
    assert [w for _, w in decoded[0]] == [float(row[i]) for i in top]
    assert all(isinstance(t, str) for t, _ in decoded[0])
    one = model.decode(row)
    assert len(one) == int((row != 0).sum())
    capped = model.encode(["a great film"], max_active_dims=5)
    assert capped.nnz == 5
    assert set(capped.indices) == set(int(i) for i in np.argsort(-row, kind="stable")[:5])
