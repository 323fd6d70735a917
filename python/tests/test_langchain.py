"""roformer_rs.langchain.RoformerEmbeddings against the real langchain-core: the vectors SentenceEncoder.encode
gives with the same options, HuggingFaceEmbeddings' fields, the async methods, a vector store, the errors."""

import asyncio
import subprocess
import sys
import threading

import numpy as np
import pytest
from conftest import fixture, reference

pytest.importorskip("langchain_core")

from langchain_core.embeddings import Embeddings  # noqa: E402
from langchain_core.vectorstores import InMemoryVectorStore  # noqa: E402
from roformer_rs import RoformerOSError, RoformerTypeError, RoformerValueError, SentenceEncoder  # noqa: E402
from roformer_rs.langchain import RoformerEmbeddings  # noqa: E402

ST6 = str(fixture("sentence_transformers", "st6_cls_dense"))
TEXTS = reference("sentence_transformers", "st6_cls_dense", "expected.json")["texts"]


def test_importing_the_package_imports_no_framework():
    code = (
        "import sys, roformer_rs\n"
        "loaded = [m for m in ('langchain_core', 'llama_index', 'chromadb', 'pydantic') if m in sys.modules]\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_documents_and_query_are_sentence_encoders_vectors():
    embeddings = RoformerEmbeddings(model_name=ST6)
    assert isinstance(embeddings, Embeddings)
    model = SentenceEncoder(ST6)
    docs = embeddings.embed_documents(TEXTS)
    assert isinstance(docs, list) and all(isinstance(row, list) for row in docs)
    assert all(isinstance(x, float) for x in docs[0]) and len(docs) == len(TEXTS) and len(docs[0]) == 24
    assert docs == model.encode(TEXTS).tolist()
    query = embeddings.embed_query(TEXTS[3])
    assert isinstance(query, list) and query == model.encode(TEXTS[3]).tolist()
    assert embeddings.embed_documents([]) == []
    # HuggingFaceEmbeddings' alias, and its newlines made spaces.
    assert RoformerEmbeddings(model=ST6).model_name == ST6
    assert embeddings.embed_documents(["a\ngreat\nfilm"]) == model.encode(["a great film"]).tolist()


def test_encode_kwargs_prompts_and_batch_sizes():
    model = SentenceEncoder(ST6)
    embeddings = RoformerEmbeddings(
        model_name=ST6,
        encode_kwargs={"prompt_name": "passage", "batch_size": 2, "normalize_embeddings": True},
        query_encode_kwargs={"prompt_name": "query", "batch_size": 1},
    )
    want_docs = model.encode(TEXTS, prompt_name="passage", batch_size=2, normalize_embeddings=True)
    assert embeddings.embed_documents(TEXTS) == want_docs.tolist()
    assert embeddings.embed_query(TEXTS[1]) == model.encode([TEXTS[1]], prompt_name="query").tolist()[0]
    # The documents' keywords serve the query when it has none of its own, as HuggingFaceEmbeddings does.
    prompt = RoformerEmbeddings(model_name=ST6, encode_kwargs={"prompt": "search: "})
    assert prompt.embed_query("a great film") == model.encode(["a great film"], prompt="search: ").tolist()[0]
    # Every batch size gives the same vectors, within float32 rounding.
    for batch_size in (1, 3, 64):
        rows = RoformerEmbeddings(model_name=ST6, encode_kwargs={"batch_size": batch_size}).embed_documents(TEXTS)
        assert np.abs(np.asarray(rows) - model.encode(TEXTS)).max() <= 1e-6


def test_model_kwargs_are_sentence_encoders():
    kwargs = {"pooling": "mean", "normalize": False, "truncate_dim": 16, "threads": 1, "trust_remote_code": False}
    embeddings = RoformerEmbeddings(model_name=ST6, model_kwargs=kwargs, show_progress=False, multi_process=True)
    want = SentenceEncoder(ST6, pooling="mean", normalize=False, truncate_dim=16, threads=1).encode(TEXTS)
    docs = embeddings.embed_documents(TEXTS)
    assert len(docs[0]) == 16 and docs == want.tolist()
    assert embeddings.client.get_embedding_dimension() == 16


def test_the_async_methods_run_in_another_thread():
    class Recording(RoformerEmbeddings):
        def embed_query(self, text):
            threads.append(threading.get_ident())
            return super().embed_query(text)

    threads = []
    embeddings = Recording(model_name=ST6)

    async def both():
        return await asyncio.gather(embeddings.aembed_documents(TEXTS), embeddings.aembed_query(TEXTS[0]))

    docs, query = asyncio.run(both())
    assert docs == embeddings.embed_documents(TEXTS)
    assert query == embeddings.embed_query(TEXTS[0])
    assert threads[0] != threading.get_ident()


def test_an_in_memory_vector_store_finds_the_text():
    store = InMemoryVectorStore.from_texts(TEXTS, embedding=RoformerEmbeddings(model_name=ST6))
    for text in (TEXTS[1], TEXTS[3]):
        assert store.similarity_search(text, k=1)[0].page_content == text


def test_bad_input_raises_the_packages_exceptions():
    embeddings = RoformerEmbeddings(model_name=ST6)
    with pytest.raises(RoformerTypeError, match=r"texts\[1\] is int, not str"):
        embeddings.embed_documents(["a", 3])
    with pytest.raises(RoformerTypeError, match="one str"):
        embeddings.embed_documents("a great film")
    with pytest.raises(RoformerTypeError, match="text is NoneType"):
        embeddings.embed_query(None)
    with pytest.raises(RoformerTypeError, match="bogus"):
        RoformerEmbeddings(model_name=ST6, model_kwargs={"bogus": 1})
    with pytest.raises(RoformerTypeError, match="bogus"):
        RoformerEmbeddings(model_name=ST6, encode_kwargs={"bogus": 1})
    with pytest.raises(RoformerTypeError, match="show_progress"):
        RoformerEmbeddings(model_name=ST6, query_encode_kwargs={"show_progress_bar": True})
    with pytest.raises(RoformerValueError, match="search"):
        RoformerEmbeddings(model_name=ST6, encode_kwargs={"prompt_name": "search"}).embed_documents(["a"])
    with pytest.raises(RoformerValueError, match="batch_size"):
        RoformerEmbeddings(model_name=ST6, encode_kwargs={"batch_size": 0}).embed_documents(["a"])
    with pytest.raises(RoformerOSError):
        RoformerEmbeddings(model_name=str(fixture("no such folder")), model_kwargs={"local_files_only": True})
