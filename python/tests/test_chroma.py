"""roformer_rs.chroma.RoformerEmbeddingFunction against the real chromadb: the vectors SentenceEncoder.encode
gives, SentenceTransformerEmbeddingFunction's constructor and config, and a persistent collection that reopens
with it (in this process and in a new one) and answers a query."""

import json
import subprocess
import sys

import numpy as np
import pytest
from conftest import fixture, reference

pytest.importorskip("chromadb")

import chromadb  # noqa: E402
from chromadb.api.types import EmbeddingFunction  # noqa: E402
from chromadb.config import Settings  # noqa: E402
from chromadb.utils.embedding_functions import known_embedding_functions  # noqa: E402
from roformer_rs import RoformerOSError, RoformerTypeError, RoformerValueError, SentenceEncoder  # noqa: E402
from roformer_rs.chroma import RoformerEmbeddingFunction  # noqa: E402

ST6 = str(fixture("sentence_transformers", "st6_cls_dense"))
SIM = str(fixture("pipelines", "sim"))
TEXTS = [t for t in reference("pipelines", "sim", "expected.json")["texts"] if t]


def client(path):
    return chromadb.PersistentClient(path=str(path), settings=Settings(anonymized_telemetry=False))


def test_the_vectors_are_sentence_encoders():
    function = RoformerEmbeddingFunction(model_name=ST6)
    assert isinstance(function, EmbeddingFunction)
    vectors = function(TEXTS)
    assert len(vectors) == len(TEXTS) and all(v.dtype == np.float32 and v.shape == (24,) for v in vectors)
    assert np.array_equal(np.stack(vectors), SentenceEncoder(ST6).encode(TEXTS))
    unit = RoformerEmbeddingFunction(model_name=SIM, normalize_embeddings=True, pooling="mean", normalize=False)
    want = SentenceEncoder(SIM, pooling="mean", normalize=False).encode(TEXTS, normalize_embeddings=True)
    assert np.array_equal(np.stack(unit(TEXTS)), want)
    # Chroma's queries go through embed_query, which is __call__ as in SentenceTransformerEmbeddingFunction.
    assert np.array_equal(unit.embed_query(TEXTS[:1])[0], want[0])


def test_name_config_and_build_from_config():
    assert RoformerEmbeddingFunction.name() == "roformer_rs"
    assert known_embedding_functions["roformer_rs"] is RoformerEmbeddingFunction
    function = RoformerEmbeddingFunction(model_name=SIM, normalize_embeddings=True, precision="float32", threads=1)
    config = function.get_config()
    assert config == {
        "model_name": SIM,
        "device": "cpu",
        "normalize_embeddings": True,
        "kwargs": {"precision": "float32", "threads": 1},
    }
    assert json.loads(json.dumps(config)) == config
    RoformerEmbeddingFunction.validate_config(config)
    again = RoformerEmbeddingFunction.build_from_config(config)
    assert isinstance(again, RoformerEmbeddingFunction) and again.get_config() == config
    assert again._model is function._model  # loaded once per config
    assert np.array_equal(np.stack(again(TEXTS)), np.stack(function(TEXTS)))
    assert not function.is_legacy() and function.default_space() == "cosine"


def test_a_persistent_collection_reopens_with_it(tmp_path):
    function = RoformerEmbeddingFunction(model_name=ST6, normalize_embeddings=True)
    ids = [f"t{i}" for i in range(len(TEXTS))]
    first = client(tmp_path / "db")
    docs = first.create_collection("docs", embedding_function=function)
    docs.add(ids=ids, documents=TEXTS)
    assert docs.query(query_texts=[TEXTS[2]], n_results=1)["ids"] == [["t2"]]
    first.clear_system_cache()
    del docs, first

    reopened = client(tmp_path / "db").get_collection("docs")
    # Chroma built the function again from the collection's config (its name, then build_from_config).
    rebuilt = reopened.configuration["embedding_function"]
    assert isinstance(rebuilt, RoformerEmbeddingFunction) and rebuilt.get_config() == function.get_config()
    answer = reopened.query(query_texts=[TEXTS[4], TEXTS[0]], n_results=3, include=["documents", "distances"])
    assert [ids[0] for ids in answer["ids"]] == ["t4", "t0"]
    assert answer["documents"][0][0] == TEXTS[4] and abs(answer["distances"][0][0]) < 1e-5
    stored = reopened.get(ids=["t3"], include=["embeddings"])["embeddings"][0]
    assert np.abs(np.asarray(stored) - function([TEXTS[3]])[0]).max() <= 1e-6


def test_a_new_process_reopens_the_collection(tmp_path):
    function = RoformerEmbeddingFunction(model_name=ST6)
    docs = client(tmp_path / "db").create_collection("docs", embedding_function=function)
    docs.add(ids=[f"t{i}" for i in range(len(TEXTS))], documents=TEXTS)
    code = (
        "import json, sys, chromadb\n"
        "from chromadb.config import Settings\n"
        "import roformer_rs.chroma\n"
        "c = chromadb.PersistentClient(path=sys.argv[1], settings=Settings(anonymized_telemetry=False))\n"
        "docs = c.get_collection('docs')\n"
        "ef = docs.configuration['embedding_function']\n"
        "top = docs.query(query_texts=[sys.argv[2]], n_results=1)['ids'][0][0]\n"
        "print(json.dumps({'class': type(ef).__name__, 'config': ef.get_config(), 'top': top}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "db"), TEXTS[5]], check=True, capture_output=True, text=True
    ).stdout
    got = json.loads(out.strip().splitlines()[-1])
    assert got == {"class": "RoformerEmbeddingFunction", "config": function.get_config(), "top": "t5"}


def test_bad_input_raises_the_packages_exceptions():
    function = RoformerEmbeddingFunction(model_name=ST6)
    with pytest.raises(RoformerTypeError, match=r"input\[1\] is int, not str"):
        function(["a", 3])
    with pytest.raises(RoformerTypeError, match="one str"):
        function("a great film")
    with pytest.raises(RoformerValueError, match="not a primitive type"):
        RoformerEmbeddingFunction(model_name=ST6, cache_folder=fixture("nowhere"))
    with pytest.raises(RoformerTypeError, match="bogus"):
        RoformerEmbeddingFunction(model_name=ST6, bogus=1)
    with pytest.raises(RoformerTypeError, match="model_name is PosixPath"):
        RoformerEmbeddingFunction(model_name=fixture("pipelines", "sim"))
    with pytest.raises(RoformerValueError, match="normalize_embeddings"):
        RoformerEmbeddingFunction.build_from_config({"model_name": ST6, "device": "cpu"})
    with pytest.raises(RoformerOSError):
        RoformerEmbeddingFunction(model_name=str(fixture("no such folder")), local_files_only=True)
