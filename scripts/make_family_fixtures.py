"""Reference fixtures for the checkpoint families that transformers' RoFormer does not cover as is:
RoFormer v2, junnyu's sim encoders, and RoPE scaling for inputs longer than max_position_embeddings.

Usage: .venv/bin/python scripts/make_family_fixtures.py   (after scripts/make_model_fixtures.py)

- v2 (tests/fixtures/models/v2_*): transformers' RoFormer modules patched to junnyu's v2 code path (PyPI `roformer`
  0.4.3, modeling_roformer.py, which does not import with transformers 5): every LayerNorm becomes the weightless
  norm x / sqrt(mean(x^2) + eps); query, key, value, attention output, intermediate and output linears lose their
  bias (use_bias=False); the masked-LM head is one bias-free decoder tied to the word embeddings. The classification
  and token-classification heads are transformers' (biases kept; hidden_act relu, as the v2 checkpoints use).
- sim (tests/fixtures/models/sim_decoder): a RoFormerModel with junnyu's pooler, saved with `is_decoder: true` and no
  `pooler_activation`, as the sim checkpoints' configs are. The reference is the authors' recipe: a bidirectional pass
  (junnyu's mask is causal only once a cache exists), the pooler dense on [CLS] with a linear activation, then L2
  normalisation.
- RoPE scaling (tests/fixtures/models/base/rope_scaling.safetensors and rope_scaling.json): the base fixture's weights
  run on inputs longer than its max_position_embeddings (48), with RoFormer's sinusoid table rebuilt from
  transformers' own rope functions (modeling_rope_utils.ROPE_INIT_FUNCTIONS: linear, dynamic, yarn) and from a
  fixed base (rope_theta, NTK-aware with the default type): angles = position x inv_freq in float64, [sin | cos] times
  the attention factor. Dynamic takes the case's padded length, as transformers' dynamic_rope_update does on a fresh
  model.
"""

import json
import math
import shutil
from pathlib import Path

import torch
from safetensors.torch import save_file
from transformers import (
    LlamaConfig,
    RoFormerConfig,
    RoFormerForMaskedLM,
    RoFormerForSequenceClassification,
    RoFormerForTokenClassification,
    RoFormerModel,
)
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

from make_model_fixtures import CASES, MAX_POS, OUT, STD, VOCAB, base_outputs, batch, config, logits, randomise, run_cases

torch.set_num_threads(2)


class WeightlessNorm(torch.nn.Module):
    """junnyu's v2 norm: no gamma, no beta, no mean subtraction."""

    def __init__(self, eps):
        super().__init__()
        self.eps = eps

    def forward(self, x):
        return x / torch.sqrt((x * x).mean(-1, keepdim=True) + self.eps)


def to_v2(model):
    """Patches a transformers RoFormer model in place to the v2 code path."""
    base = model.roformer if hasattr(model, "roformer") else model
    eps = model.config.layer_norm_eps
    base.embeddings.LayerNorm = WeightlessNorm(eps)
    for layer in base.encoder.layer:
        layer.attention.output.LayerNorm = WeightlessNorm(eps)
        layer.output.LayerNorm = WeightlessNorm(eps)
        for linear in (
            layer.attention.self.query,
            layer.attention.self.key,
            layer.attention.self.value,
            layer.attention.output.dense,
            layer.intermediate.dense,
            layer.output.dense,
        ):
            linear.bias = None
    return model


class V2MaskedLM(torch.nn.Module):
    """junnyu's v2 masked LM: the encoder, then one bias-free decoder tied to the word embeddings."""

    def __init__(self, roformer):
        super().__init__()
        self.roformer = roformer

    def forward(self, **inputs):
        hidden = self.roformer(**inputs).last_hidden_state
        return hidden @ self.roformer.embeddings.word_embeddings.weight.T


V2_EXTRA = {"norm_type": "rms_norm", "use_bias": False}

# A word-level vocabulary of the fixtures' size: the special tokens, then w5 ... w210.
VOCAB_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(5, VOCAB)]


def write_vocab(folder):
    (folder / "vocab.txt").write_text("".join(t + "\n" for t in VOCAB_TOKENS), encoding="utf-8")
    (folder / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "BertTokenizer", "do_lower_case": True}))


def v2_config(**overrides):
    return config(hidden_act="relu", **overrides)


def save_folder(name, state, cfg, ref):
    folder = OUT / name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    state = {k: v.detach().clone().contiguous() for k, v in state.items() if "embed_positions" not in k}
    save_file(state, folder / "model.safetensors", metadata={"format": "pt"})
    (folder / "config.json").write_text(json.dumps(cfg, indent=2))
    if ref is not None:
        save_file(ref, folder / "reference.safetensors")
    print(name, sorted(state)[:3], "...", len(state), "tensors")


def config_dict(model_config, architecture, extra):
    cfg = model_config.to_dict()
    cfg["architectures"] = [architecture]
    cfg.update(extra)
    return cfg


def v2_fixtures():
    # Bare v2 encoder.
    m = to_v2(randomise(RoFormerModel(v2_config()), 30))
    ref = run_cases(m, base_outputs, CASES)
    save_folder("v2_base", m.state_dict(), config_dict(m.config, "RoFormerModel", V2_EXTRA), ref)

    # Masked LM: the decoder is the word embeddings; transformers 5 would not save the tie, junnyu's files do not
    # need it either.
    enc = to_v2(randomise(RoFormerModel(v2_config()), 31))
    mlm = V2MaskedLM(enc).eval()
    ref = run_cases(mlm, lambda model, inputs: {"logits": model(**inputs)}, CASES)
    state = {f"roformer.{k}": v for k, v in enc.state_dict().items()}
    save_folder("v2_mlm", state, config_dict(enc.config, "RoFormerForMaskedLM", V2_EXTRA), ref)
    # fill-mask: "w10 [MASK] w20 [MASK]" is [CLS] w10 [MASK] w20 [MASK] [SEP] with this vocabulary.
    folder = OUT / "v2_mlm"
    write_vocab(folder)
    ids = torch.tensor([[2, 10, 4, 20, 4, 3]])
    with torch.no_grad():
        probs = torch.softmax(mlm(input_ids=ids, attention_mask=torch.ones_like(ids),
                                  token_type_ids=torch.zeros_like(ids))[0], dim=-1)
    top = [[[VOCAB_TOKENS[i], int(i), float(probs[pos, i])] for i in probs[pos].topk(5).indices] for pos in (2, 4)]
    (folder / "fill_mask.json").write_text(json.dumps({"text": "w10 [MASK] w20 [MASK]", "top5": top}, indent=1))

    # Sequence and token classification: transformers' heads (with biases) on the v2 encoder.
    m = to_v2(randomise(RoFormerForSequenceClassification(v2_config(num_labels=3)), 32))
    ref = run_cases(m, logits, CASES)
    save_folder("v2_seqcls", m.state_dict(), config_dict(m.config, "RoFormerForSequenceClassification", V2_EXTRA), ref)
    m = to_v2(randomise(RoFormerForTokenClassification(v2_config(num_labels=5)), 33))
    ref = run_cases(m, logits, CASES)
    save_folder("v2_tokcls", m.state_dict(), config_dict(m.config, "RoFormerForTokenClassification", V2_EXTRA), ref)


def sim_fixture():
    """A sim checkpoint as published: is_decoder true, pooler present, pooler_activation absent."""
    base = randomise(RoFormerModel(config()), 34)
    pooler = torch.nn.Linear(64, 64)
    g = torch.Generator().manual_seed(35)
    with torch.no_grad():
        pooler.weight.copy_(STD * torch.randn(64, 64, generator=g))
        pooler.bias.copy_(STD * torch.randn(64, generator=g))

    def recipe(model, inputs):
        last = model(**inputs).last_hidden_state  # is_decoder is False here: bidirectional
        pooled = pooler(last[:, 0])
        return {"last_hidden_state": last, "pooler_output": pooled,
                "embedding": torch.nn.functional.normalize(pooled, dim=-1)}

    ref = run_cases(base, recipe, {"batch": CASES["batch"]})
    state = {f"roformer.{k}": v for k, v in base.state_dict().items()}
    state["roformer.pooler.dense.weight"] = pooler.weight
    state["roformer.pooler.dense.bias"] = pooler.bias
    cfg = config_dict(base.config, "RoFormerForCausalLM", {"is_decoder": True})
    cfg.pop("pooler_activation", None)
    save_folder("sim_decoder", state, cfg, ref)
    write_vocab(OUT / "sim_decoder")


SCALINGS = {
    "linear": {"rope_type": "linear", "factor": 4.0},
    "dynamic": {"rope_type": "dynamic", "factor": 2.0},
    "yarn": {"rope_type": "yarn", "factor": 4.0},
    "yarn_params": {"rope_type": "yarn", "factor": 2.0, "beta_fast": 16, "beta_slow": 2, "mscale": 0.8},
    "legacy_type_key": {"type": "linear", "factor": 2.0},
}


def inv_freq_and_factor(scaling, seq_len, head_dim, base=10000.0):
    """transformers' own rope function for `scaling`, on a config of this model's shape."""
    cfg = LlamaConfig(hidden_size=head_dim * 4, num_attention_heads=4, max_position_embeddings=MAX_POS,
                      rope_theta=base, rope_scaling=dict(scaling))
    kind = cfg.rope_parameters["rope_type"]
    # dynamic_rope_update passes max(position_ids) + 1 as a tensor, so the base is computed in f32.
    return ROPE_INIT_FUNCTIONS[kind](cfg, "cpu", seq_len=torch.tensor(seq_len))


def table(inv_freq, factor, length):
    positions = torch.arange(length, dtype=torch.float64)[:, None]
    angles = positions * inv_freq.to(torch.float64)[None, :]
    return (torch.cat([angles.sin(), angles.cos()], dim=-1) * factor).float()


def rope_scaling_fixtures():
    """The base fixture's weights on long inputs, under each scaling."""
    folder = OUT / "base"
    long_model = RoFormerModel(config(max_position_embeddings=8 * MAX_POS))
    state = RoFormerModel.from_pretrained(folder).state_dict()
    long_model.load_state_dict({k: v for k, v in state.items() if "embed_positions" not in k}, strict=False)
    long_model.eval()
    head_dim = 16
    ref, cases = {}, {}
    lengths = {"linear": [3 * MAX_POS + 5, 60], "dynamic": [2 * MAX_POS + 7, 30], "yarn": [4 * MAX_POS, 70],
               "yarn_params": [2 * MAX_POS + 1, 50], "legacy_type_key": [MAX_POS + 20, 10]}
    for name, scaling in SCALINGS.items():
        inputs = batch(40 + len(name), lengths[name])
        padded = inputs["input_ids"].shape[1]
        inv_freq, factor = inv_freq_and_factor(scaling, padded, head_dim)
        with torch.no_grad():
            long_model.encoder.embed_positions.weight.copy_(table(inv_freq, factor, 8 * MAX_POS))
            out = long_model(**inputs).last_hidden_state
        for k, v in inputs.items():
            ref[f"{name}.{k}"] = v.contiguous()
        ref[f"{name}.last_hidden_state"] = out.contiguous()
        ref[f"{name}.inv_freq"] = inv_freq.float().contiguous()
        cases[name] = {"rope_scaling": scaling, "attention_factor": float(factor)}
    # NTK-aware with a fixed base: rope_theta and the default type, RoFormer's own formula with another base.
    theta = 40000.0
    inputs = batch(60, [3 * MAX_POS, 20])
    dim = head_dim
    position_enc = torch.tensor([[pos / math.pow(theta, 2 * (j // 2) / dim) for j in range(dim)]
                                 for pos in range(8 * MAX_POS)], dtype=torch.float64)
    with torch.no_grad():
        long_model.encoder.embed_positions.weight.copy_(
            torch.cat([position_enc[:, 0::2].sin(), position_enc[:, 1::2].cos()], dim=-1).float())
        out = long_model(**inputs).last_hidden_state
    for k, v in inputs.items():
        ref[f"rope_theta.{k}"] = v.contiguous()
    ref["rope_theta.last_hidden_state"] = out.contiguous()
    cases["rope_theta"] = {"rope_theta": theta}
    save_file(ref, folder / "rope_scaling.safetensors")
    (folder / "rope_scaling.json").write_text(json.dumps(cases, indent=2))
    print("rope scaling", sorted(cases))


def main():
    torch.manual_seed(0)
    v2_fixtures()
    sim_fixture()
    rope_scaling_fixtures()


if __name__ == "__main__":
    main()
