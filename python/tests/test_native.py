"""What the binding itself adds: the library's answers bit for bit, the GIL released while a batch
computes, one model shared by threads, Ctrl-C, the progress bar, and errors as exceptions."""

import _thread
import json
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import roformer_rs
from conftest import REPO, fixture
from roformer_rs import CrossEncoder, SentenceEncoder, pipeline

TEXTS = [
    "a gorgeous , witty movie .",
    "the cat sat on the mat , and the dog did not",
    "it 's a charming and often affecting journey .",
    "not good at all",
    "a",
    "this is not what i expected , but it works , and the acting is good but the story is weak",
    "",
]


def embed_example() -> str:
    """The Rust `embed` example, which `cargo test --release --workspace` builds (as .ci/run does
    before these tests)."""
    path = os.environ.get("ROFORMER_EMBED_EXAMPLE", str(REPO / "target" / "release" / "examples" / "embed"))
    assert os.path.isfile(path), f"{path} is missing: run `cargo build --release --example embed` first"
    return path


@pytest.mark.parametrize("precision,flags", [("float32", []), ("int8", ["--quantize", "int8"]), ("bfloat16", ["--dtype", "bf16"])])
@pytest.mark.parametrize("model", ["pipelines/sim", "sentence_transformers/st6_cls_dense"])
def test_the_answers_are_the_rust_crates_bit_for_bit(tmp_path, model, precision, flags):
    sentences = tmp_path / "sentences.txt"
    sentences.write_text("\n".join(t for t in TEXTS if t) + "\n", encoding="utf-8")
    out = tmp_path / "rust.npy"
    subprocess.run(
        [embed_example(), "--model", str(fixture(*model.split("/"))), "--input", str(sentences),
         "--output", str(out), "--batch-size", "3", *flags],
        check=True, capture_output=True,
    )
    rust = np.load(out)
    ours = SentenceEncoder(fixture(*model.split("/")), precision=precision).encode(
        [t for t in TEXTS if t], batch_size=3
    )
    assert ours.dtype == rust.dtype == np.float32 and ours.shape == rust.shape
    if precision != "float32":
        f32 = SentenceEncoder(fixture(*model.split("/"))).encode([t for t in TEXTS if t], batch_size=3)
        assert not np.array_equal(ours, f32), f"{precision} gave the float32 answers: it did not run"
    assert np.array_equal(ours, rust), f"{model} {precision}: max diff {np.abs(ours - rust).max():.3e}"


def test_other_threads_run_while_a_batch_computes():
    model = SentenceEncoder(fixture("pipelines", "sim"), threads=1)
    texts = [TEXTS[5]] * 4000
    counter = [0]
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            counter[0] += 1

    spinner = threading.Thread(target=spin)
    spinner.start()
    try:
        time.sleep(0.05)
        # The native call alone: no Python code of the main thread runs between these two reads,
        # so the spinner counts only if the call lets the GIL go.
        before = counter[0]
        start = time.perf_counter()
        model._model.encode(texts, None, len(texts), None)
        elapsed = time.perf_counter() - start
        during = counter[0] - before
    finally:
        stop.set()
        spinner.join()
    assert elapsed > 0.05, f"the batch took {elapsed:.3f} s: too short to tell"
    assert during > 1000, f"another thread counted {during} while encode computed for {elapsed:.3f} s"


def test_one_model_serves_several_threads_at_once():
    model = SentenceEncoder(fixture("sentence_transformers", "st6_cls_dense"), threads=2)
    inputs = [[f"{t} {i}" for t in TEXTS] for i in range(8)]
    serial = [model.encode(texts, batch_size=2) for texts in inputs]
    results = [None] * len(inputs)
    errors = []

    def run(i):
        try:
            results[i] = model.encode(inputs[i], batch_size=2)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(inputs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for i, (a, b) in enumerate(zip(serial, results)):
        assert np.array_equal(a, b), f"thread {i} got other embeddings than the serial call"


def test_ctrl_c_stops_encode_at_the_next_batch():
    model = SentenceEncoder(fixture("pipelines", "sim"), threads=1)
    texts = [TEXTS[5]] * 20000
    done = [0]

    def progress(n):
        done[0] += n
        if done[0] == 3:
            _thread.interrupt_main()  # as Ctrl-C: the signal is seen at the next check

    with pytest.raises(KeyboardInterrupt):
        model._model.encode(texts, None, 1, progress)
    assert done[0] == 3, f"{done[0]} batches ran after Ctrl-C"


def test_the_progress_bar_is_tqdms(capsys):
    model = SentenceEncoder(fixture("pipelines", "sim"))
    model.encode(TEXTS, batch_size=2, show_progress_bar=True)
    err = capsys.readouterr().err
    assert "Batches" in err and "4/4" in err, err


def test_a_missing_folder_is_an_oserror_naming_it(tmp_path):
    missing = tmp_path / "no-such-model"
    with pytest.raises(OSError) as e:
        SentenceEncoder(missing)
    assert isinstance(e.value, roformer_rs.RoformerError)
    assert str(missing) in str(e.value)


def test_a_broken_config_is_an_oserror_naming_file_and_field(fresh):
    folder = fresh(fixture("pipelines", "cls"))
    config = json.loads((folder / "config.json").read_text())
    config["hidden_size"] = "large"
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(roformer_rs.RoformerOSError, match="hidden_size") as e:
        pipeline("text-classification", model=folder)
    assert "config.json" in str(e.value)


def test_an_uncached_hub_id_offline_is_named(tmp_path):
    with pytest.raises(OSError, match="junnyu/roformer_chinese_base"):
        SentenceEncoder("junnyu/roformer_chinese_base", local_files_only=True, cache_folder=tmp_path)


def test_bad_options_are_value_errors():
    with pytest.raises(ValueError, match="unknown precision `fp16` \\(float32, int8 or bfloat16\\)"):
        SentenceEncoder(fixture("pipelines", "sim"), precision="fp16")
    with pytest.raises(ValueError, match="threads must be at least 1"):
        SentenceEncoder(fixture("pipelines", "sim"), threads=0)
    model = SentenceEncoder(fixture("pipelines", "sim"))
    with pytest.raises(ValueError, match="batch_size"):
        model.encode(["a"], batch_size=0)
    with pytest.raises(ValueError, match="unknown pooling"):
        SentenceEncoder(fixture("pipelines", "sim"), pooling="max")
    with pytest.raises(roformer_rs.RoformerValueError, match="no prompts|query"):
        model.encode(["a"], prompt_name="query")


def test_max_seq_length_is_set_at_load():
    model = SentenceEncoder(fixture("sentence_transformers", "old_mean"), max_seq_length=8)
    assert model.max_seq_length == 8
    long = " ".join(["word"] * 40)
    assert np.array_equal(model.encode([long]), model.encode([" ".join(["word"] * 6)]))
    with pytest.raises(AttributeError, match=r"max_seq_length=16"):
        model.max_seq_length = 16


def test_an_input_of_the_wrong_type_names_its_index():
    model = SentenceEncoder(fixture("pipelines", "sim"))
    with pytest.raises(TypeError, match=r"sentences\[2\] is int, not str") as e:
        model.encode(["a", "b", 3])
    assert isinstance(e.value, roformer_rs.RoformerError)
    with pytest.raises(TypeError, match=r"sentences\[1\] is NoneType"):
        model.encode(["a", None])
    with pytest.raises(TypeError, match=r"inputs\[0\] is bytes"):
        pipeline("text-classification", model=fixture("pipelines", "cls"))([b"x"])
    with pytest.raises(TypeError, match="model is int"):
        SentenceEncoder(3)


def test_every_row_comes_back_in_order_with_empty_texts():
    model = SentenceEncoder(fixture("pipelines", "sim"))
    texts = TEXTS * 3
    together = model.encode(texts, batch_size=4)
    one_by_one = np.stack([model.encode(t) for t in texts])
    assert together.shape == (len(texts), 32)
    np.testing.assert_allclose(together, one_by_one, atol=1e-6)


def test_a_reranker_of_several_labels_is_refused():
    with pytest.raises(OSError, match="num_labels"):
        CrossEncoder(fixture("pipelines", "cls"))


def test_the_interpreter_survives_a_rust_panic_free_run_in_a_subprocess():
    # A fresh interpreter imports the wheel and encodes: nothing is left to import time.
    code = "import roformer_rs; print(roformer_rs.__version__)"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert out.stdout.strip() == roformer_rs.__version__
