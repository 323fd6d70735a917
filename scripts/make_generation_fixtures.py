"""Reference fixtures for generation (tests/fixtures/models/sim_generation, causal_lm/generation.json).

Runs in junnyu's own environment: his `roformer` 0.4.3 package under the transformers 4.18 it needs
(see ../shared/notes/reference-envs.md):

    PYTHONPATH=/tmp/jr:/tmp/tf418 .venv/bin/python scripts/make_generation_fixtures.py

- sim_generation: a small random-init sim checkpoint made by his `RoFormerForCausalLM` (pooler included), saved
  as the sim checkpoints are published: the decoder weight tied to the word embeddings and absent from the file,
  `is_decoder: true`, no eos_token_id. Each source's greedy continuation comes from his `generate(do_sample=False)`
  and must equal a plain torch decoder that recomputes the whole sequence at every step with the UniLM mask
  (source bidirectional, token type 1 on generated tokens). Only sources whose top-two logits differ by at least
  MARGIN at every step are kept, so float rounding cannot flip a token. Similarities are the authors' gen_synonyms
  ranking: texts re-tokenized, pooler outputs of a bidirectional pass with token type 0, L2-normalised, dotted.
- causal_lm/generation.json: greedy causal decoding (token type 0, causal mask) of the transformers-made causal_lm
  fixture, by the plain torch decoder, for sources that keep the same margin.
"""

import json
import sys
import types
from pathlib import Path

# transformers 4.18 refuses the tokenizers of the main venv at import; its version check is all that fails.
stub = types.ModuleType("transformers.dependency_versions_check")
stub.dep_version_check = lambda *args, **kwargs: None
sys.modules["transformers.dependency_versions_check"] = stub

import torch  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402
from transformers import BertTokenizer  # noqa: E402

from roformer import RoFormerConfig, RoFormerForCausalLM  # noqa: E402

torch.set_num_threads(2)
ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "tests/fixtures/models"
OUT = MODELS / "sim_generation"
MARGIN = 0.02
MAX_NEW = 12
STD = 0.3
EOS_BOOST = 5.0

SOURCES = [
    "今天天气不错", "我们一起去公园散步吧", "这部电影非常好看", "他在学校学习中文", "明天会下雨吗",
    "我喜欢吃苹果和香蕉", "北京是中国的首都", "请问火车站怎么走", "这个问题很难回答", "她每天早上跑步",
    "老师说的话很有道理", "天上有很多星星", "你好", "我想买一本新书", "人生就是一场旅行",
]


def vocab():
    chars = sorted({c for s in SOURCES for c in s})
    # Characters of the real roformer_chinese_base vocab beyond those of the sources, so generations range wider.
    real = (ROOT.parent / "shared/data/vocab/roformer_chinese_base/vocab.txt").read_text(encoding="utf-8").split("\n")
    extra = [t for t in real if len(t) == 1 and "\u4e00" <= t <= "\u9fff" and t not in chars][:200]
    return ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "，", "。", "？"] + chars + extra


def randomise(model, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "embed_positions" in name:
                continue  # the sinusoid table, not a learned weight
            if "LayerNorm.weight" in name:
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(STD * torch.randn(p.shape, generator=g))
    model.eval()
    return model


def plain_decode(model, source, unilm, max_new, eos):
    """Greedy decoding that recomputes the whole sequence each step with an explicit 3-D mask."""
    ids, margins = list(source), []
    for _ in range(max_new):
        n, s = len(ids), len(source)
        q = torch.arange(n)[:, None]
        k = torch.arange(n)[None, :]
        mask = (k <= q) | ((k < s) & unilm)
        types = [0] * s + [1 if unilm else 0] * (n - s)
        out = model(input_ids=torch.tensor([ids]), token_type_ids=torch.tensor([types]),
                    attention_mask=mask[None].long(), use_cache=False)
        logits = out.logits[0, -1]
        top = logits.topk(2).values
        margins.append(float(top[0] - top[1]))
        nxt = int(logits.argmax())
        ids.append(nxt)
        if nxt == eos:
            break
    generated = ids[len(source):]
    return (generated[:-1] if generated and generated[-1] == eos else generated), min(margins)


def sim():
    OUT.mkdir(parents=True, exist_ok=True)
    tokens = vocab()
    (OUT / "vocab.txt").write_text("\n".join(tokens) + "\n", encoding="utf-8")
    (OUT / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "BertTokenizer", "do_lower_case": True}))
    tok = BertTokenizer(str(OUT / "vocab.txt"))
    config = RoFormerConfig(vocab_size=len(tokens), embedding_size=64, hidden_size=64, num_hidden_layers=2,
                            num_attention_heads=4, intermediate_size=96, max_position_embeddings=64,
                            is_decoder=True, hidden_act="gelu", pad_token_id=0, type_vocab_size=2,
                            pooler_activation="linear")  # as gen_synonyms sets it; the saved config omits it
    model = randomise(RoFormerForCausalLM(config), 51)
    model.tie_weights()
    eos = tok.sep_token_id
    with torch.no_grad():
        # Raised so that some greedy samples end with [SEP] before the length limit, as trained ones do.
        model.cls.predictions.bias[eos] += EOS_BOOST

    cases, dropped = [], []
    for text in SOURCES:
        source = tok(text)["input_ids"]
        with torch.no_grad():
            out = model.generate(torch.tensor([source]), do_sample=False, max_length=len(source) + MAX_NEW,
                                 eos_token_id=eos, pad_token_id=0)[0].tolist()
            plain, margin = plain_decode(model, source, True, MAX_NEW, eos)
        generated = out[len(source):]
        generated = generated[:-1] if generated and generated[-1] == eos else generated
        assert generated == plain, f"{text}: generate {generated} != plain decoder {plain}"
        if margin < MARGIN:
            dropped.append(text)
            continue
        candidate = tok.decode(generated, skip_special_tokens=True).replace(" ", "")
        cases.append({"text": text, "source_ids": source, "ids": generated, "decoded": candidate,
                      "min_top2_margin": margin})

    # gen_synonyms' ranking, on the greedy candidates and a few fixed sentences.
    texts = [c["text"] for c in cases]
    pairs = []
    for i, c in enumerate(cases):
        others = [c["decoded"]] + [texts[(i + j) % len(texts)] for j in (1, 2)]
        pairs.append((c["text"], [o for o in others if o]))
    with torch.no_grad():
        for case, (text, others) in zip(cases, pairs):
            enc = tok([text] + others, padding=True, return_tensors="pt")
            pooled = model.roformer(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"],
                                    token_type_ids=torch.zeros_like(enc["input_ids"])).pooler_output
            z = torch.nn.functional.normalize(pooled, dim=-1)
            case["similar"] = [{"text": o, "similarity": float(z[0] @ z[j + 1])} for j, o in enumerate(others)]

    # Tied copies are not saved: the decoder weight is the word embeddings, its bias `cls.predictions.bias`.
    skip = {"cls.predictions.decoder.weight", "cls.predictions.decoder.bias"}
    state = {k: v.clone().contiguous() for k, v in model.state_dict().items() if k not in skip}
    save_file(state, str(OUT / "model.safetensors"), metadata={"format": "pt"})
    cfg = json.loads(config.to_json_string())
    cfg["architectures"] = ["RoFormerForCausalLM"]
    cfg.pop("pooler_activation", None)
    (OUT / "config.json").write_text(json.dumps(cfg, indent=1, sort_keys=True))
    (OUT / "generation.json").write_text(json.dumps(
        {"max_new_tokens": MAX_NEW, "eos_token_id": eos, "cases": cases}, ensure_ascii=False, indent=1))
    print(f"sim_generation: {len(cases)} sources kept, {len(dropped)} dropped for a margin under {MARGIN}: {dropped}")


def causal():
    folder = MODELS / "causal_lm"
    cfg = json.loads((folder / "config.json").read_text())
    config = RoFormerConfig(**{k: v for k, v in cfg.items() if k in RoFormerConfig().to_dict()})
    model = RoFormerForCausalLM(config)
    state = load_file(str(folder / "model.safetensors"))
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert set(missing) <= {"cls.predictions.decoder.weight", "cls.predictions.decoder.bias", "roformer.pooler.dense.weight",
                            "roformer.pooler.dense.bias", "roformer.encoder.embed_positions.weight"}, missing
    assert not unexpected, unexpected
    model.tie_weights()
    model.eval()
    g = torch.Generator().manual_seed(7)
    cases = []
    for length in (3, 5, 8, 13):
        for _ in range(3):
            source = [2] + torch.randint(5, config.vocab_size, (length - 1,), generator=g).tolist()
            with torch.no_grad():
                ids, margin = plain_decode(model, source, False, 10, None)
            if margin >= MARGIN:
                cases.append({"source_ids": source, "ids": ids, "min_top2_margin": margin})
    (folder / "generation.json").write_text(json.dumps({"max_new_tokens": 10, "cases": cases}, indent=1))
    print(f"causal_lm: {len(cases)} sources kept")


if __name__ == "__main__":
    sim()
    causal()
