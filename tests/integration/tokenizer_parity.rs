//! Ids, type ids, masks and offsets identical to transformers on our whole corpus, for both vocabs.

use roformer::{Encoded, Padding, Tokenizer, TokenizerKind, Truncation};
use serde_json::Value;

fn reference(name: &str) -> Value {
    let text = std::fs::read_to_string(crate::support::fixture(&format!("tokenizer/{name}.json"))).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn tokenizer(name: &str) -> Tokenizer {
    Tokenizer::from_dir(crate::support::fixture(&format!("vocab/{name}"))).unwrap()
}

fn u32s(v: &Value) -> Vec<u32> {
    v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect()
}

fn expected(v: &Value) -> Encoded {
    Encoded {
        input_ids: u32s(&v["input_ids"]),
        token_type_ids: u32s(&v["token_type_ids"]),
        attention_mask: u32s(&v["attention_mask"]),
        offsets: v["offsets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| (o[0].as_u64().unwrap() as usize, o[1].as_u64().unwrap() as usize))
            .collect(),
        truncated: false,
    }
}

/// Collects mismatches so one run shows all of them.
#[derive(Default)]
struct Report {
    checked: usize,
    failures: Vec<String>,
}

impl Report {
    fn check(&mut self, what: impl Fn() -> String, ours: &Encoded, want: &Encoded) {
        self.checked += 1;
        let strip = |e: &Encoded| Encoded { truncated: false, ..e.clone() };
        if strip(ours) != *want {
            let field = if ours.input_ids != want.input_ids {
                format!("ids {:?}\n   want {:?}", ours.input_ids, want.input_ids)
            } else if ours.offsets != want.offsets {
                format!("offsets {:?}\n   want {:?}", ours.offsets, want.offsets)
            } else {
                format!("types/mask {:?} {:?}", ours.token_type_ids, ours.attention_mask)
            };
            self.failures.push(format!("{}: {field}", what()));
        }
    }

    fn finish(self, name: &str, minimum: usize) {
        assert!(self.checked >= minimum, "{name}: only {} cases checked", self.checked);
        assert!(
            self.failures.is_empty(),
            "{name}: {} of {} differ from transformers:\n{}",
            self.failures.len(),
            self.checked,
            self.failures.iter().take(15).cloned().collect::<Vec<_>>().join("\n")
        );
    }
}

fn strategy(name: &str) -> Truncation {
    match name {
        "longest_first" => Truncation::LongestFirst,
        "only_first" => Truncation::OnlyFirst,
        "only_second" => Truncation::OnlySecond,
        other => panic!("unknown strategy {other}"),
    }
}

fn check_vocab(name: &str, kind: TokenizerKind) {
    let reference = reference(name);
    let corpus: Value = serde_json::from_str(
        &std::fs::read_to_string(crate::support::fixture("tokenizer/corpus.json")).unwrap(),
    )
    .unwrap();
    let singles: Vec<&str> =
        corpus["singles"].as_array().unwrap().iter().map(|s| s.as_str().unwrap()).collect();
    let pairs: Vec<(&str, &str)> = corpus["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p[0].as_str().unwrap(), p[1].as_str().unwrap()))
        .collect();
    let mut tok = tokenizer(name);
    assert_eq!(tok.kind(), kind);
    let mut report = Report::default();

    for (text, want) in singles.iter().zip(reference["single"].as_array().unwrap()) {
        report.check(|| format!("single {text:?}"), &tok.encode(text).unwrap(), &expected(want));
    }
    // The batch path must agree with the one-by-one path.
    let batch = tok.encode_batch(&singles).unwrap();
    for ((text, want), ours) in singles.iter().zip(reference["single"].as_array().unwrap()).zip(&batch) {
        report.check(|| format!("batch {text:?}"), ours, &expected(want));
    }
    for (&(a, b), want) in pairs.iter().zip(reference["pair"].as_array().unwrap()) {
        report.check(|| format!("pair {a:?} / {b:?}"), &tok.encode_pair(a, b).unwrap(), &expected(want));
    }

    let mut errors = 0;
    for case in reference["truncation"].as_array().unwrap() {
        let max_length = case["max_length"].as_u64().unwrap() as usize;
        tok.set_truncation(Some(strategy(case["strategy"].as_str().unwrap())), Some(max_length)).unwrap();
        let (what, ours) = match case.get("text") {
            Some(text) => (format!("truncated {text}"), tok.encode(text.as_str().unwrap())),
            None => {
                let (a, b) = (case["pair"][0].as_str().unwrap(), case["pair"][1].as_str().unwrap());
                (format!("truncated {case:?}"), tok.encode_pair(a, b))
            }
        };
        if case.get("error").is_some() {
            // transformers raises when the strategy cannot reach max_length; so must we.
            errors += 1;
            assert!(ours.is_err(), "{what}: transformers raised {}, we did not", case["error"]);
            continue;
        }
        let ours = ours.unwrap();
        assert!(ours.len() <= max_length);
        report.check(|| format!("{what} at {max_length}"), &ours, &expected(case));
    }
    assert!(errors > 0, "the corpus should exercise strategies that cannot truncate enough");

    for case in reference["padding"].as_array().unwrap() {
        let texts: Vec<&str> =
            case["texts"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
        match case["max_length"].as_u64() {
            Some(n) => {
                tok.set_truncation(Some(Truncation::LongestFirst), Some(n as usize)).unwrap();
                tok.set_padding(Some(Padding::Fixed(n as usize)));
            }
            None => {
                tok.set_truncation(None, None).unwrap();
                tok.set_padding(Some(Padding::Longest));
            }
        }
        let ours = tok.encode_batch(&texts).unwrap();
        for (i, text) in texts.iter().enumerate() {
            let want = Encoded {
                input_ids: u32s(&case["input_ids"][i]),
                token_type_ids: u32s(&case["token_type_ids"][i]),
                attention_mask: u32s(&case["attention_mask"][i]),
                offsets: expected(&serde_json::json!({
                    "input_ids": [], "token_type_ids": [], "attention_mask": [], "offsets": case["offsets"][i]
                }))
                .offsets,
                truncated: false,
            };
            report.check(|| format!("padded ({}) {text:?}", case["padding"]), &ours[i], &want);
        }
    }
    report.finish(name, 320 * 2 + 160 + 400 + 96);
}

#[test]
fn roformer_chinese_base_matches_transformers() {
    check_vocab("roformer_chinese_base", TokenizerKind::Jieba);
}

#[test]
fn bert_base_uncased_matches_transformers() {
    check_vocab("bert-base-uncased", TokenizerKind::WordPiece);
}

#[test]
fn decode_matches_transformers() {
    for name in ["roformer_chinese_base", "bert-base-uncased"] {
        let reference = reference(name);
        let tok = tokenizer(name);
        let mut failures = Vec::new();
        for case in reference["decode"].as_array().unwrap() {
            let ours = tok.decode(&u32s(&case["ids"]), false).unwrap();
            if ours != case["text"].as_str().unwrap() {
                failures.push(format!("{ours:?} want {:?}", case["text"]));
            }
        }
        assert!(
            failures.is_empty(),
            "{name}: {} decodes differ:\n{}",
            failures.len(),
            failures[..failures.len().min(10)].join("\n")
        );
    }
}

#[test]
fn decode_can_skip_special_tokens_but_keeps_unknowns() {
    let tok = tokenizer("bert-base-uncased");
    let e = tok.encode_pair("hello [MASK] world", "naïve ☃").unwrap();
    assert_eq!(tok.decode(&e.input_ids, false).unwrap(), "[CLS] hello [MASK] world [SEP] naive [UNK] [SEP]");
    assert_eq!(tok.decode(&e.input_ids, true).unwrap(), "hello world naive [UNK]");
}
