"""Writes tokenization references from transformers into tests/fixtures/tokenizer.

Usage: .venv/bin/python scripts/make_tokenizer_fixtures.py   (after: pip install -r scripts/requirements.txt)

corpus.json holds our own corpus: single texts and pairs. For each vocabulary, <name>.json holds what transformers
gives for it: input ids, token type ids, attention masks and character offsets, for single texts and pairs, with
truncation (every strategy) and padding (to the longest and to a fixed length), and decodes.
- roformer_chinese_base: RoFormerTokenizer (jieba, HMM off, then WordPiece) built from a vocab dict, as
  transformers 4.x did from vocab.txt (5.x `from_pretrained` on a vocab.txt-only folder passes the path instead);
- bert-base-uncased: BertTokenizer (the tokenizers-backed one).
"""

import json
import random
from pathlib import Path

from transformers import BertTokenizer, RoFormerTokenizer

ROOT = Path(__file__).resolve().parent.parent
VOCABS = ROOT / "tests" / "fixtures" / "vocab"
OUT = ROOT / "tests" / "fixtures" / "tokenizer"

BASE = [
    # Simplified Chinese
    "今天天气非常好。", "我爱北京天安门。", "中华人民共和国成立于一九四九年。", "这家餐厅的菜味道很一般，服务也很慢。",
    "人工智能正在改变我们的生活方式。", "他说：“明天见！”", "你吃饭了吗？", "机器学习和深度学习有什么区别？",
    "这部电影真是太好看了，强烈推荐！", "北京大学和清华大学都在海淀区。", "我们需要更多的时间来完成这个项目。",
    "股市今天大幅上涨，投资者信心增强。", "请把窗户关上，外面太冷了。", "春眠不觉晓，处处闻啼鸟。",
    "苹果公司发布了新款手机。", "这个问题的答案是否定的。", "小明的妈妈有三个儿子：大毛、二毛和小明。",
    "长江是中国最长的河流。", "自然语言处理是人工智能的一个重要分支。", "我不喜欢这个产品，质量太差了。",
    "会议将于下午三点在三楼会议室召开。", "欢迎来到上海！", "研究生命的起源", "结婚的和尚未结婚的",
    "南京市长江大桥", "乒乓球拍卖完了", "工信处女干事每月经过下属科室都要亲口交代24口交换机等技术性器件的安装工作",
    "一", "的", "了", "〇", "丨丨丨", "龘靐齉齾爩鱻麤龖", "𠀀𠀁𪚥", "卍卐",
    # Traditional Chinese
    "今天天氣非常好。", "我愛台灣的美食。", "這個軟體的使用者介面很直觀。", "資訊科技發展迅速。",
    "請問圖書館幾點開門？", "憂鬱的臺灣烏龜", "學而時習之，不亦說乎？",
    # English
    "Hello, world!", "The quick brown fox jumps over the lazy dog.", "I can't believe it's not butter!",
    "RoFormer uses rotary position embeddings.", "This movie was absolutely terrible; I want my money back.",
    "A truly wonderful, heart-warming film.", "it 's a charming and often affecting journey .",
    "unbelievably", "antidisestablishmentarianism", "Supercalifragilisticexpialidocious", "e.g. i.e. etc.",
    "Dr. Smith's office (room 4B) opens at 9:30 a.m.", "HELLO WORLD", "MiXeD CaSe TeXt", "don't won't shouldn't",
    # Mixed
    "我在用iPhone 15 Pro Max拍照。", "GPT-4和BERT都是Transformer模型。", "今天学习了Python和Rust编程。",
    "下载地址：https://example.com/download?id=123&lang=zh", "联系邮箱：someone@example.org", "价格是￥1,299.00元",
    "COVID-19疫情期间", "5G网络覆盖率达到95%", "我的QQ号是123456789", "Windows 11系统更新了",
    "AI（人工智能）是未来", "用c++写一个hello world程序", "温度：-5.5°C", "2023年12月31日", "第3章 第2节",
    # Fullwidth forms
    "ＡＢＣ１２３", "ｈｅｌｌｏ　ｗｏｒｌｄ", "（全角括号）", "！？，。；：", "１２：３０", "Ｃ＋＋和Ｊａｖａ",
    # Digits and numbers
    "3.14159265358979", "1234567890", "１２３４５", "0.001%", "-42", "1e10", "100,000,000", "第一百零八",
    "电话：010-12345678", "2024-01-01T12:00:00Z",
    # Emoji and symbols
    "我今天很开心😀", "👍👍👍", "🇨🇳🇺🇸", "❤️ love ❤️", "天气☀️晴朗", "★☆♥♦♣♠", "→←↑↓", "∑∏∫√∞", "©®™",
    "👨‍👩‍👧‍👦 family", "😂😂😂太好笑了",
    # Accents and other scripts
    "café", "naïve résumé", "Crème brûlée", "Ångström", "Straße", "São Paulo", "Zürich", "Ελληνικά", "Русский язык",
    "日本語のテキスト", "한국어 텍스트", "ภาษาไทย", "العربية", "עברית", "Tiếng Việt",
    # URLs, code, paths
    "https://github.com/huggingface/candle", "www.baidu.com", "ftp://files.example.com/a/b.txt",
    "c++", "C#", "fn main() { println!(\"hi\"); }", "x = y + 1; // comment", "<div class=\"a\">内容</div>",
    "SELECT * FROM users WHERE id = 1;", "/usr/local/bin/python3", "C:\\Windows\\System32", "a_b_c", "#hashtag @mention",
    "[MASK]", "今天[MASK]气很好", "[CLS] already [SEP]", "hello [UNK] world",
    # Whitespace and control characters
    "", " ", "   ", "\t\n", "\u3000", "a\tb\nc", "中\u00a0文", "zero\u200bwidth", "ctrl\x07char", "null\x00byte",
    "line\r\nbreak", "  leading and trailing  ", "多个   空格", "\ufeffBOM开头", "soft\u00adhyphen", "\u2028分隔",
]

LONG = [
    "".join(BASE[i] for i in range(0, 30)),
    " ".join(BASE[i] for i in range(42, 60)),
    "自然语言处理" * 40,
    "word " * 120,
    "。".join(BASE[60:80]),
    "a" * 150,
    "中" * 300,
]


def corpus():
    rng = random.Random(1234)
    singles = list(BASE) + LONG
    # Recombinations for volume: two random texts joined, with and without a space.
    while len(singles) < 320:
        a, b = rng.choice(BASE), rng.choice(BASE)
        singles.append(a + rng.choice(["", " ", "，", "\n"]) + b)
    pairs = []
    for _ in range(160):
        pairs.append([rng.choice(singles[:len(BASE) + len(LONG)]), rng.choice(singles)])
    return singles, pairs


def encode(tok, first, second=None, **kw):
    enc = tok(first, second, return_offsets_mapping=True, return_token_type_ids=True, return_attention_mask=True, **kw)
    return {
        "input_ids": enc["input_ids"],
        "token_type_ids": enc["token_type_ids"],
        "attention_mask": enc["attention_mask"],
        "offsets": [list(o) for o in enc["offset_mapping"]],
    }


def reference(tok, singles, pairs):
    out = {"single": [], "pair": [], "truncation": [], "padding": [], "decode": []}
    for text in singles:
        out["single"].append(encode(tok, text))
        ids = tok(text, add_special_tokens=False)["input_ids"]
        # skip_special_tokens=False: transformers 5's RoFormerTokenizer keeps [CLS]/[SEP]/[MASK] even when asked
        # to skip them (its BERT tokenizer does skip), so only the plain decode is comparable.
        out["decode"].append({"ids": ids, "text": tok.decode(ids, skip_special_tokens=False)})
    for a, b in pairs:
        out["pair"].append(encode(tok, a, b))
    for max_length in (12, 24):
        for strategy in ("longest_first", "only_first", "only_second"):
            for a, b in pairs[:60]:
                try:
                    enc = encode(tok, a, b, truncation=strategy, max_length=max_length)
                except Exception as e:  # the strategy cannot reach max_length
                    enc = {"error": str(e)}
                out["truncation"].append({"max_length": max_length, "strategy": strategy, "pair": [a, b], **enc})
        for text in singles[:80]:
            enc = encode(tok, text, truncation=True, max_length=max_length)
            out["truncation"].append({"max_length": max_length, "strategy": "longest_first", "text": text, **enc})
    for start in range(0, 96, 8):
        batch = singles[start:start + 8]
        for padding, max_length in (("longest", None), ("max_length", 40)):
            kw = {"padding": padding}
            if max_length:
                kw.update(max_length=max_length, truncation=True)
            out["padding"].append({"texts": batch, "padding": padding, "max_length": max_length, **encode(tok, batch, **kw)})
    return out


def load_vocab(path):
    # Split on '\n' only: the real roformer_chinese_base vocab may hold U+2028 inside a line.
    lines = path.read_text(encoding="utf-8").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    vocab = {}
    for i, line in enumerate(lines):
        vocab[line.rstrip("\r")] = i
    return vocab


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    singles, pairs = corpus()
    (OUT / "corpus.json").write_text(json.dumps({"singles": singles, "pairs": pairs}, ensure_ascii=False, indent=0))
    roformer = RoFormerTokenizer(vocab=load_vocab(VOCABS / "roformer_chinese_base" / "vocab.txt"))
    bert = BertTokenizer(vocab=load_vocab(VOCABS / "bert-base-uncased" / "vocab.txt"))
    for name, tok in (("roformer_chinese_base", roformer), ("bert-base-uncased", bert)):
        ref = reference(tok, singles, pairs)
        (OUT / f"{name}.json").write_text(json.dumps(ref, ensure_ascii=False, separators=(",", ":")))
        print(name, {k: len(v) for k, v in ref.items()})
    print("example:", roformer.tokenize("今天天气非常好。我在用iPhone 15拍照"))


if __name__ == "__main__":
    main()
