"""Writes small random-init RoFormer checkpoints and transformers' outputs for them into tests/fixtures/models.

Usage: python3 -m venv .venv && .venv/bin/pip install -r scripts/requirements.txt && .venv/bin/python scripts/make_model_fixtures.py

Each fixture folder holds config.json, the weights as transformers saves them, and reference.safetensors:
the inputs of each case (`<case>.input_ids`, `.attention_mask`, `.token_type_ids`) and the outputs of the model
for them (`<case>.<output>`), all computed in float32 on the CPU.
"""

import json
import shutil
from pathlib import Path

import torch
from safetensors.torch import save_file
from transformers import (
    RoFormerConfig,
    RoFormerForCausalLM,
    RoFormerForMaskedLM,
    RoFormerForMultipleChoice,
    RoFormerForQuestionAnswering,
    RoFormerForSequenceClassification,
    RoFormerForTokenClassification,
    RoFormerModel,
)

OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "models"
VOCAB = 211
MAX_POS = 48
STD = 0.3


def config(**overrides):
    base = dict(
        vocab_size=VOCAB,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=96,
        max_position_embeddings=MAX_POS,
        type_vocab_size=2,
        hidden_act="gelu",
        pad_token_id=0,
    )
    base.update(overrides)
    return RoFormerConfig(**base)


def randomise(model, seed):
    """Weights far from the default init, so a wrong layout cannot hide in small numbers."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "embed_positions" in name:
                continue
            if "LayerNorm.weight" in name:
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(STD * torch.randn(p.shape, generator=g))
    model.eval()
    return model


def batch(seed, lengths, seq_len=None, segments=True):
    """Token ids with padding; token types of both segments; an attention mask."""
    g = torch.Generator().manual_seed(seed)
    seq_len = seq_len or max(lengths)
    ids = torch.zeros(len(lengths), seq_len, dtype=torch.long)
    mask = torch.zeros_like(ids)
    types = torch.zeros_like(ids)
    for row, n in enumerate(lengths):
        ids[row, :n] = torch.randint(1, VOCAB, (n,), generator=g)
        mask[row, :n] = 1
        if segments and n > 2:
            types[row, n // 2 : n] = 1
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}


CASES = {
    "batch": lambda: batch(1, [13, 7, 2]),
    "single_token": lambda: batch(2, [1]),
    "no_mask": lambda: {k: v for k, v in batch(3, [9, 9]).items() if k == "input_ids"},
    "longest": lambda: batch(4, [MAX_POS, MAX_POS - 5]),
}


def run_cases(model, fn, cases):
    ref = {}
    for case, make in cases.items():
        inputs = make()
        with torch.no_grad():
            outputs = fn(model, inputs)
        for k, v in inputs.items():
            ref[f"{case}.{k}"] = v.contiguous()
        for k, v in outputs.items():
            ref[f"{case}.{k}"] = v.detach().float().clone().contiguous()
    return ref


def save(name, model, ref, extra_config=None, weights="safetensors", state_dict=None):
    folder = OUT / name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    if weights == "safetensors":
        model.save_pretrained(folder, state_dict=state_dict)
    elif weights == "sharded":
        model.save_pretrained(folder, max_shard_size="40KB", state_dict=state_dict)
    elif weights == "bin":
        model.config.save_pretrained(folder)
        torch.save(state_dict or model.state_dict(), folder / "pytorch_model.bin")
    if extra_config:
        cfg = json.loads((folder / "config.json").read_text())
        cfg.update(extra_config)
        (folder / "config.json").write_text(json.dumps(cfg, indent=2))
    if ref is not None:
        save_file(ref, folder / "reference.safetensors")
    print(name, sorted(p.name for p in folder.iterdir()))


def base_outputs(model, inputs):
    out = model(**inputs, output_hidden_states=True)
    res = {"last_hidden_state": out.last_hidden_state}
    for i, h in enumerate(out.hidden_states):
        res[f"hidden_states.{i}"] = h
    return res


def logits(model, inputs):
    return {"logits": model(**inputs).logits}


def main():
    torch.manual_seed(0)

    # The bare encoder, in the three weight layouts.
    base = randomise(RoFormerModel(config()), 10)
    ref = run_cases(base, base_outputs, CASES)
    # Past max_position_embeddings transformers raises; the weights do not depend on it, so a
    # copy under a longer config gives the reference for extrapolation.
    long_model = randomise(RoFormerModel(config(max_position_embeddings=4 * MAX_POS)), 10)
    assert all(torch.equal(a, b) for (n, a), (_, b) in zip(base.named_parameters(), long_model.named_parameters())
               if "embed_positions" not in n)
    ref.update(run_cases(long_model, base_outputs, {"beyond_max": lambda: batch(5, [2 * MAX_POS + 3, 40])}))
    save("base", base, ref)
    save("base_sharded", base, None, weights="sharded")
    save("base_bin", base, None, weights="bin")

    # Sequence classification: single-label with names, multi-label, regression.
    id2label = {0: "negative", 1: "neutral", 2: "positive"}
    m = randomise(RoFormerForSequenceClassification(config(hidden_act="gelu_new", num_labels=3, id2label=id2label,
                                                           label2id={v: k for k, v in id2label.items()})), 11)
    save("seqcls", m, run_cases(m, logits, CASES))
    m = randomise(RoFormerForSequenceClassification(config(hidden_act="relu", num_labels=4,
                                                           problem_type="multi_label_classification")), 12)
    save("seqcls_multilabel", m, run_cases(m, logits, {"batch": CASES["batch"]}))
    m = randomise(RoFormerForSequenceClassification(config(hidden_act="silu", num_labels=1)), 13)
    save("seqcls_regression", m, run_cases(m, logits, {"batch": CASES["batch"]}))

    # Token classification with relu.
    m = randomise(RoFormerForTokenClassification(config(hidden_act="relu", num_labels=5)), 14)
    save("tokcls", m, run_cases(m, logits, CASES))

    # Masked LM with embedding_size != hidden_size (embeddings_project) and swish; transformers 5
    # omits the tied decoder weight from the file.
    m = randomise(RoFormerForMaskedLM(config(embedding_size=32, hidden_act="swish")), 15)
    m.tie_weights()
    save("mlm", m, run_cases(m, logits, CASES))

    # Causal LM: the same head under a causal mask.
    m = randomise(RoFormerForCausalLM(config(is_decoder=True, hidden_act="gelu")), 16)
    m.tie_weights()
    save("causal_lm", m, run_cases(m, logits, {"batch": CASES["batch"]}))

    # Question answering with rotary_value and the PyTorch-named tanh GELU.
    m = randomise(RoFormerForQuestionAnswering(config(rotary_value=True, hidden_act="gelu_pytorch_tanh")), 17)

    def qa(model, inputs):
        out = model(**inputs)
        return {"start_logits": out.start_logits, "end_logits": out.end_logits}

    save("qa", m, run_cases(m, qa, CASES))

    # Multiple choice: (batch, choices, seq), summarised by the last token.
    m = randomise(RoFormerForMultipleChoice(config()), 18)

    def choices():
        flat = batch(6, [11, 8, 5, 11, 3, 9])
        return {k: v.reshape(2, 3, -1) for k, v in flat.items()}

    save("multiple_choice", m, run_cases(m, logits, {"batch": choices}))

    # junnyu's sim checkpoints: RoFormerModel plus `pooler.dense` with a linear activation. transformers
    # has no pooler, so the reference applies junnyu's definition (dense on [CLS], then the activation) to
    # transformers' last hidden state.
    base = randomise(RoFormerModel(config()), 19)
    pooler = torch.nn.Linear(64, 64)
    with torch.no_grad():
        pooler.weight.copy_(STD * torch.randn(64, 64))
        pooler.bias.copy_(STD * torch.randn(64))

    def pooled(model, inputs):
        last = model(**inputs).last_hidden_state
        return {"last_hidden_state": last, "pooler_output": pooler(last[:, 0])}

    ref = run_cases(base, pooled, {"batch": CASES["batch"]})
    state = dict(base.state_dict())
    state = {f"roformer.{k}": v for k, v in state.items()}
    state["roformer.pooler.dense.weight"] = pooler.weight.detach().clone()
    state["roformer.pooler.dense.bias"] = pooler.bias.detach().clone()
    save("sim_pooler", base, ref, state_dict=state,
         extra_config={"pooler_activation": "linear", "norm_type": "layer_norm", "use_bias": True})
    gradients()


def gradients():
    """Loss and gradients of the seqcls fixture (eval mode: no dropout) for the Rust gradient check."""
    folder = OUT / "seqcls"
    model = RoFormerForSequenceClassification.from_pretrained(folder).eval()
    inputs = batch(1, [13, 7, 2])
    labels = torch.tensor([0, 2, 1])
    loss = model(**inputs, labels=labels).loss
    loss.backward()
    names = [
        "roformer.embeddings.word_embeddings.weight",
        "roformer.embeddings.token_type_embeddings.weight",
        "roformer.embeddings.LayerNorm.weight",
        "roformer.encoder.layer.0.attention.self.query.weight",
        "roformer.encoder.layer.1.attention.self.key.weight",
        "roformer.encoder.layer.1.attention.self.value.bias",
        "roformer.encoder.layer.0.intermediate.dense.weight",
        "roformer.encoder.layer.1.output.LayerNorm.weight",
        "classifier.dense.bias",
        "classifier.out_proj.weight",
    ]
    params = dict(model.named_parameters())
    ref = {f"grad.{n}": params[n].grad.detach().clone().contiguous() for n in names}
    ref["loss"] = loss.detach().reshape(1).clone()
    ref["labels"] = labels
    ref.update({f"inputs.{k}": v for k, v in inputs.items()})
    save_file(ref, folder / "gradients.safetensors")
    print("gradients", loss.item())


if __name__ == "__main__":
    main()
