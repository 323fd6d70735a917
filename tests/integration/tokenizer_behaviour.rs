//! Loading rules, bad vocabularies and awkward inputs.

use std::path::{Path, PathBuf};

use roformer::{Error, Padding, Tokenizer, TokenizerKind, Truncation};

/// A scratch folder, removed on drop.
struct Dir(PathBuf);

impl Dir {
    fn new(tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("roformer-tok-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Dir(dir)
    }

    fn write(&self, name: &str, contents: impl AsRef<[u8]>) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, contents).unwrap();
        path
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const SMALL_VOCAB: &str = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\nworld\n##s\n,\n!\n中\n文\n";

fn roformer_vocab() -> PathBuf {
    crate::support::fixture("vocab/roformer_chinese_base/vocab.txt")
}

#[test]
fn missing_special_tokens_are_named() {
    for missing in ["[UNK]", "[CLS]", "[SEP]", "[PAD]"] {
        let dir = Dir::new(&format!("missing{}", missing.len() + missing.as_bytes()[1] as usize));
        let vocab: String = SMALL_VOCAB.lines().filter(|l| *l != missing).map(|l| format!("{l}\n")).collect();
        let path = dir.write("vocab.txt", vocab);
        match Tokenizer::from_dir(dir.path()) {
            Err(Error::Vocab { path: p, message, .. }) => {
                assert_eq!(p, path);
                assert!(message.contains(missing), "{message}");
            }
            other => panic!("expected a vocab error for a vocab without {missing}, got {other:?}"),
        }
    }
}

#[test]
fn tokenizer_config_settings_of_the_wrong_type_are_named() {
    // Read as absent before: `"do_lower_case": 0` lowercased, where transformers takes 0 as false.
    let cases = [
        (r#"{"do_lower_case": 0}"#, "invalid config field `do_lower_case`: 0 is not a boolean"),
        (r#"{"strip_accents": "false"}"#, "invalid config field `strip_accents`: \"false\" is not a boolean"),
        (r#"{"tokenize_chinese_chars": [true]}"#, "`tokenize_chinese_chars`: [true] is not a boolean"),
        ("[]", "expected a JSON object, found []"),
    ];
    for (i, (config, wanted)) in cases.into_iter().enumerate() {
        let dir = Dir::new(&format!("config-type-{i}"));
        dir.write("vocab.txt", SMALL_VOCAB);
        let path = dir.write("tokenizer_config.json", config);
        match Tokenizer::from_dir(dir.path()) {
            Err(e @ Error::Config { .. }) => {
                let m = e.to_string();
                assert!(m.starts_with(&path.display().to_string()) && m.contains(wanted), "{config}: {m}");
            }
            other => panic!("{config}: expected a config error, got {other:?}"),
        }
    }
    // null is absent, as transformers' defaults.
    let dir = Dir::new("config-null");
    dir.write("vocab.txt", SMALL_VOCAB);
    dir.write("tokenizer_config.json", r#"{"do_lower_case": null, "strip_accents": null}"#);
    assert_eq!(Tokenizer::from_dir(dir.path()).unwrap().tokenize("Hello").unwrap(), ["hello"]);
}

#[test]
fn vocab_lines_end_at_newline_only() {
    let dir = Dir::new("u2028");
    // U+2028 inside a line is part of the token; a trailing \r is not.
    dir.write("vocab.txt", format!("{SMALL_VOCAB}a\u{2028}b\r\nlast\n"));
    let tok = Tokenizer::from_dir(dir.path()).unwrap();
    assert_eq!(tok.token_id("a\u{2028}b").unwrap(), 12);
    assert_eq!(tok.token_id("last").unwrap(), 13);
    assert_eq!(tok.vocab_size(), 14);
}

#[test]
fn duplicate_tokens_keep_their_last_id() {
    let dir = Dir::new("dup");
    dir.write("vocab.txt", format!("{SMALL_VOCAB}hello\n"));
    let tok = Tokenizer::from_dir(dir.path()).unwrap();
    assert_eq!(tok.token_id("hello").unwrap(), 12);
    assert_eq!(tok.encode("hello").unwrap().input_ids, [2, 12, 3]);
}

#[test]
fn non_utf8_and_empty_vocabs_are_errors_with_lines() {
    let dir = Dir::new("utf8");
    let mut bytes = SMALL_VOCAB.as_bytes().to_vec();
    bytes.extend_from_slice(b"bad\xff\n");
    dir.write("vocab.txt", bytes);
    match Tokenizer::from_dir(dir.path()) {
        Err(Error::Vocab { line, .. }) => assert_eq!(line, Some(13)),
        other => panic!("expected a vocab error, got {other:?}"),
    }
    let dir = Dir::new("empty");
    dir.write("vocab.txt", "");
    assert!(matches!(Tokenizer::from_dir(dir.path()), Err(Error::Vocab { .. })));
    let dir = Dir::new("none");
    assert!(matches!(Tokenizer::from_dir(dir.path()), Err(Error::Vocab { .. })));
}

/// A tokenizer.json as transformers saves it for a RoFormerTokenizer: BERT's pre-tokenizer.
fn bert_style_tokenizer_json(vocab: &Path, lowercase: bool) -> String {
    use tokenizers::models::wordpiece::WordPiece;
    use tokenizers::normalizers::BertNormalizer;
    use tokenizers::pre_tokenizers::bert::BertPreTokenizer;
    let model = WordPiece::from_file(vocab.to_str().unwrap()).unk_token("[UNK]".into()).build().unwrap();
    let mut tok = tokenizers::Tokenizer::new(model);
    tok.with_normalizer(Some(BertNormalizer::new(true, true, None, lowercase))).unwrap();
    tok.with_pre_tokenizer(Some(BertPreTokenizer));
    tok.add_special_tokens(
        ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"].map(|t| tokenizers::AddedToken::from(t, true)),
    )
    .unwrap();
    tok.to_string(false).unwrap()
}

#[test]
fn a_bert_pre_tokenizer_json_does_not_override_jieba() {
    let dir = Dir::new("jieba-json");
    std::fs::copy(roformer_vocab(), dir.path().join("vocab.txt")).unwrap();
    dir.write(
        "tokenizer_config.json",
        r#"{"tokenizer_class": "RoFormerTokenizer", "model_max_length": 1536}"#,
    );
    dir.write("tokenizer.json", bert_style_tokenizer_json(&roformer_vocab(), true));
    let tok = Tokenizer::from_dir(dir.path()).unwrap();
    assert_eq!(tok.kind(), TokenizerKind::Jieba);
    assert_eq!(tok.model_max_length(), Some(1536));
    // jieba keeps 非常 whole; BERT's pre-tokenizer would split it into characters.
    assert_eq!(tok.tokenize("今天天气非常好。").unwrap(), ["今", "天", "天", "气", "非常", "好", "。"]);
}

#[test]
fn a_tokenizer_json_is_used_for_bert_checkpoints() {
    let dir = Dir::new("bert-json");
    let vocab = dir.write("vocab.txt", format!("{SMALL_VOCAB}Hello\n"));
    dir.write("tokenizer_config.json", r#"{"tokenizer_class": "BertTokenizer", "do_lower_case": true}"#);
    // The json says: do not lowercase. It wins over vocab.txt + tokenizer_config.json.
    dir.write("tokenizer.json", bert_style_tokenizer_json(&vocab, false));
    let tok = Tokenizer::from_dir(dir.path()).unwrap();
    assert_eq!(tok.kind(), TokenizerKind::WordPiece);
    assert_eq!(tok.tokenize("Hello").unwrap(), ["Hello"]);
    std::fs::remove_file(dir.path().join("tokenizer.json")).unwrap();
    let tok = Tokenizer::from_dir(dir.path()).unwrap();
    assert_eq!(tok.tokenize("Hello").unwrap(), ["hello"]);
}

#[test]
fn class_detection_without_a_tokenizer_config() {
    let word_level = Tokenizer::from_dir(crate::support::fixture("vocab/roformer_chinese_base")).unwrap();
    assert_eq!(word_level.kind(), TokenizerKind::Jieba);
    assert_eq!(word_level.model_max_length(), Some(512), "from config.json's max_position_embeddings");
    let english = Tokenizer::from_dir(crate::support::fixture("vocab/bert-base-uncased")).unwrap();
    assert_eq!(english.kind(), TokenizerKind::WordPiece);
    assert_eq!(english.model_max_length(), None);
}

#[test]
fn awkward_inputs_have_defined_results() {
    let mut tok = Tokenizer::from_dir(crate::support::fixture("vocab/roformer_chinese_base")).unwrap();
    let (cls, sep) = (tok.token_id("[CLS]").unwrap(), tok.token_id("[SEP]").unwrap());
    for empty in ["", " ", "\t\n  ", "\u{3000}", "\u{0007}\u{0000}"] {
        let e = tok.encode(empty).unwrap();
        assert_eq!(e.input_ids, [cls, sep], "{empty:?}");
        assert!(!e.truncated);
    }
    // Control characters are dropped; the text around them is kept.
    assert_eq!(tok.tokenize("a\u{0007}b").unwrap(), tok.tokenize("ab").unwrap());

    let long = "今天天气非常好。".repeat(100);
    let untruncated = tok.encode(&long).unwrap();
    assert!(untruncated.len() > 512 && !untruncated.truncated);
    tok.set_truncation(Some(Truncation::LongestFirst), None).unwrap();
    let truncated = tok.encode(&long).unwrap();
    assert_eq!(truncated.len(), 512, "model_max_length is the default max_length");
    assert!(truncated.truncated);
    assert_eq!(*truncated.input_ids.last().unwrap(), sep);
    assert!(
        tok.set_truncation(Some(Truncation::LongestFirst), Some(3)).is_err(),
        "no room beside the specials"
    );

    let mut tok = Tokenizer::from_dir(crate::support::fixture("vocab/bert-base-uncased")).unwrap();
    assert!(tok.set_truncation(Some(Truncation::LongestFirst), None).is_err(), "no max length known");
    tok.set_padding(Some(Padding::Fixed(8)));
    let e = tok.encode("hi").unwrap();
    assert_eq!(e.attention_mask, [1, 1, 1, 0, 0, 0, 0, 0]);
}

#[test]
fn pairs_can_use_all_zero_segment_ids() {
    let mut tok = Tokenizer::from_dir(crate::support::fixture("vocab/bert-base-uncased")).unwrap();
    let e = tok.encode_pair("a b", "c").unwrap();
    assert_eq!(e.token_type_ids, [0, 0, 0, 0, 1, 1]);
    tok.set_zero_segment_ids(true).unwrap();
    let e = tok.encode_pair("a b", "c").unwrap();
    assert_eq!(e.token_type_ids, [0; 6]);
    assert_eq!(e.offsets, [(0, 0), (0, 1), (2, 3), (0, 0), (0, 1), (0, 0)]);
}
