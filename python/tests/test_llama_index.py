"""roformer_rs.llama_index.RoformerEmbedding against the real llama-index-core: the vectors SentenceEncoder.encode
gives with the same options, HuggingFaceEmbedding's keywords and instructions, batches, the async methods, a
VectorStoreIndex, the errors."""

import asyncio

import numpy as np
import pytest
from conftest import fixture, reference

pytest.importorskip("llama_index.core")

from llama_index.core import VectorStoreIndex  # noqa: E402
from llama_index.core.base.embeddings.base import BaseEmbedding  # noqa: E402
from llama_index.core.schema import TextNode  # noqa: E402
from roformer_rs import RoformerOSError, RoformerTypeError, RoformerValueError, SentenceEncoder  # noqa: E402
from roformer_rs.llama_index import RoformerEmbedding  # noqa: E402

ST6 = str(fixture("sentence_transformers", "st6_cls_dense"))
SIM = str(fixture("pipelines", "sim"))
OLD = str(fixture("sentence_transformers", "old_mean"))
TEXTS = reference("pipelines", "sim", "expected.json")["texts"]


def test_text_query_and_batch_embeddings_are_sentence_encoders_vectors():
    embedding = RoformerEmbedding(model_name=ST6)
    assert isinstance(embedding, BaseEmbedding) and embedding.class_name() == "RoformerEmbedding"
    assert embedding.model_name == ST6 and embedding.normalize and embedding.embed_batch_size == 10
    model = SentenceEncoder(ST6)
    assert embedding.max_length == model.max_seq_length
    # As HuggingFaceEmbedding: no instruction means the empty prompt, in place of the folder's `query: `.
    want = model.encode(TEXTS, prompt="", batch_size=10, normalize_embeddings=True)
    assert embedding.get_text_embedding(TEXTS[0]) == want[0].tolist()
    assert embedding.get_query_embedding(TEXTS[1]) == want[1].tolist()
    batch = embedding.get_text_embedding_batch(TEXTS)
    assert isinstance(batch, list) and len(batch) == 10 and all(isinstance(x, float) for x in batch[0])
    assert batch == want.tolist()
    assert embedding.get_text_embedding_batch([]) == []


def test_instructions_normalize_and_max_length():
    model = SentenceEncoder(ST6)
    embedding = RoformerEmbedding(model_name=ST6, query_instruction="query: ", text_instruction="passage: ")
    query = embedding.get_query_embedding(TEXTS[4])
    assert query == model.encode([TEXTS[4]], prompt_name="query", normalize_embeddings=True)[0].tolist()
    text = embedding.get_text_embedding(TEXTS[4])
    assert text == model.encode([TEXTS[4]], prompt_name="passage", normalize_embeddings=True)[0].tolist()
    # old_mean's modules end without Normalize: normalize=False leaves the vectors as the folder makes them.
    raw = RoformerEmbedding(model_name=OLD, normalize=False)
    want = SentenceEncoder(OLD).encode(TEXTS[:3], prompt="")
    assert raw.get_text_embedding_batch(TEXTS[:3]) == want.tolist()
    assert abs(np.linalg.norm(want[0]) - 1.0) > 1e-3
    cls = RoformerEmbedding(model_name=SIM, pooling="cls")
    want = SentenceEncoder(SIM, pooling="cls").encode(TEXTS[:3], prompt="", normalize_embeddings=True)
    assert cls.get_text_embedding_batch(TEXTS[:3]) == want.tolist()
    short = RoformerEmbedding(model_name=SIM, max_length=8)
    assert short.max_length == 8 == short.encoder.max_seq_length
    want = SentenceEncoder(SIM, max_seq_length=8).encode(TEXTS, prompt="", normalize_embeddings=True)
    assert short.get_text_embedding_batch(TEXTS) == want.tolist()


def test_embed_batch_size_splits_the_batches():
    model = SentenceEncoder(SIM)
    embedding = RoformerEmbedding(model_name=SIM, embed_batch_size=3)
    batch = embedding.get_text_embedding_batch(TEXTS)
    # LlamaIndex sends 3 texts at a time, each batch encoded in batches of 3: the same vectors.
    want = [
        row
        for start in range(0, len(TEXTS), 3)
        for row in model.encode(TEXTS[start:start + 3], prompt="", batch_size=3, normalize_embeddings=True).tolist()
    ]
    assert batch == want
    assert np.abs(np.asarray(batch) - model.encode(TEXTS, normalize_embeddings=True)).max() <= 1e-6


def test_the_async_methods_equal_the_sync_ones():
    embedding = RoformerEmbedding(model_name=ST6, query_instruction="query: ", embed_batch_size=4, num_workers=2)

    async def every():
        return await asyncio.gather(
            embedding.aget_query_embedding(TEXTS[0]),
            embedding.aget_text_embedding(TEXTS[1]),
            embedding.aget_text_embedding_batch(TEXTS),
        )

    query, text, batch = asyncio.run(every())
    assert query == embedding.get_query_embedding(TEXTS[0])
    assert text == embedding.get_text_embedding(TEXTS[1])
    assert batch == embedding.get_text_embedding_batch(TEXTS)


def test_a_vector_store_index_retrieves_the_text():
    embedding = RoformerEmbedding(model_name=ST6, text_instruction="passage: ", query_instruction="passage: ")
    index = VectorStoreIndex([TextNode(text=t, id_=str(i)) for i, t in enumerate(TEXTS)], embed_model=embedding)
    retriever = index.as_retriever(similarity_top_k=1)
    for i in (1, 5):
        assert retriever.retrieve(TEXTS[i])[0].node.node_id == str(i)


def test_to_dict_and_from_dict_round_trip():
    embedding = RoformerEmbedding(model_name=ST6, query_instruction="query: ", embed_batch_size=4)
    again = RoformerEmbedding.from_dict(embedding.to_dict())
    assert again.to_dict() == embedding.to_dict()
    assert again.get_query_embedding(TEXTS[0]) == embedding.get_query_embedding(TEXTS[0])


def test_bad_input_raises_the_packages_exceptions():
    embedding = RoformerEmbedding(model_name=ST6, embed_batch_size=2)
    with pytest.raises(RoformerTypeError, match=r"texts\[3\] is int, not str"):
        embedding.get_text_embedding_batch(["a", "b", "c", 3])
    with pytest.raises(RoformerTypeError, match=r"texts\[1\] is int, not str"):
        asyncio.run(embedding.aget_text_embedding_batch(["a", 3]))
    with pytest.raises(RoformerTypeError, match="query is int"):
        embedding.get_query_embedding(3)
    with pytest.raises(RoformerTypeError, match="text is NoneType"):
        embedding.get_text_embedding(None)
    with pytest.raises(RoformerValueError, match="tokenizer_name is deprecated"):
        RoformerEmbedding(model_name=ST6, tokenizer_name="bert")
    with pytest.raises(RoformerValueError, match="embed_batch_size"):
        RoformerEmbedding(model_name=ST6, embed_batch_size=0)
    with pytest.raises(RoformerValueError, match="max_length"):
        RoformerEmbedding(model_name=ST6, max_length=-1)
    with pytest.raises(RoformerTypeError, match="bogus"):
        RoformerEmbedding(model_name=ST6, bogus=1)
    with pytest.raises(RoformerTypeError, match="query_instruction"):
        RoformerEmbedding(model_name=ST6, prompts={"query": "q: "})
    with pytest.raises(RoformerValueError, match="pooling"):
        RoformerEmbedding(model_name=ST6, pooling="max")
    with pytest.raises(RoformerOSError):
        RoformerEmbedding(model_name=str(fixture("no such folder")), local_files_only=True)
