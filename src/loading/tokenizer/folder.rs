//! A tokenizer from a checkpoint folder and back: vocab.txt or tokenizer.json, with the settings of
//! tokenizer_config.json and config.json, and `save`, which writes what loads it again.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use serde_json::Value;
use tokenizers::decoders::wordpiece::WordPiece as WordPieceDecoder;
use tokenizers::models::wordpiece::WordPiece;
use tokenizers::normalizers::BertNormalizer;
use tokenizers::pre_tokenizers::bert::BertPreTokenizer;
use tokenizers::{AddedToken, DecoderWrapper, ModelWrapper, NormalizerWrapper, PreTokenizerWrapper};

use super::jieba::{is_cjk, JiebaPreTokenizer, PreTok};
use super::{Inner, Tokenizer, TokenizerKind, TokenizerOptions};
use crate::error::{Error, Result};
use crate::loading::json::optional_bool;
use crate::loading::model_files::ModelFiles;

impl Tokenizer {
    /// Loads the tokenizer of a checkpoint folder: vocab.txt with tokenizer_config.json (and
    /// config.json for the class and max length), or tokenizer.json where it can be trusted.
    pub fn from_dir(dir: impl AsRef<Path>) -> Result<Self> {
        Self::from_files(&ModelFiles::from_dir(dir.as_ref()))
    }

    /// Loads the tokenizer of a model folder on disk or in memory, as [`Tokenizer::from_dir`].
    pub fn from_files(files: &ModelFiles) -> Result<Self> {
        let tokenizer_config = files.read_json_object_if_exists("tokenizer_config.json")?;
        let model_config = files.read_json_if_exists("config.json")?;
        let vocab_path = files.path("vocab.txt");
        let vocab = if files.contains("vocab.txt") {
            Some(parse_vocab(&files.read("vocab.txt")?, &vocab_path)?)
        } else {
            None
        };

        let class = [&tokenizer_config, &model_config]
            .into_iter()
            .flatten()
            .find_map(|c| c.get("tokenizer_class").and_then(Value::as_str))
            .map(str::to_string);
        let kind = match class.as_deref() {
            Some("RoFormerTokenizer" | "RoFormerTokenizerFast") => TokenizerKind::Jieba,
            Some(_) => TokenizerKind::WordPiece,
            // transformers' AutoTokenizer gives every `roformer` model RoFormerTokenizer; we
            // do so only for the word-level vocab, where jieba makes a difference that is meant.
            None => match &vocab {
                Some(v) if looks_word_level(v) => TokenizerKind::Jieba,
                _ => TokenizerKind::WordPiece,
            },
        };

        let mut options = TokenizerOptions { kind, ..Default::default() };
        if let Some(c) = &tokenizer_config {
            apply_tokenizer_config(&mut options, c, &files.path("tokenizer_config.json"))?;
        }
        if options.model_max_length.is_none() {
            options.model_max_length = model_config
                .as_ref()
                .and_then(|c| c.get("max_position_embeddings"))
                .and_then(Value::as_u64)
                .map(|n| n as usize);
        }

        match (kind, vocab) {
            (TokenizerKind::WordPiece, _) if files.contains("tokenizer.json") => Self::from_tokenizer_json(
                &files.read("tokenizer.json")?,
                &files.path("tokenizer.json"),
                options,
            ),
            (_, Some(vocab)) => Self::from_vocab(vocab, &vocab_path, options),
            (_, None) => Err(Error::Vocab {
                path: vocab_path,
                line: None,
                message: "no vocab.txt (or trusted tokenizer.json) in the checkpoint folder".into(),
            }),
        }
    }

    /// Builds a tokenizer from a `vocab.txt` file.
    #[allow(dead_code)]
    pub(crate) fn from_vocab_file(path: impl AsRef<Path>, options: TokenizerOptions) -> Result<Self> {
        let path = path.as_ref();
        Self::from_vocab(read_vocab(path)?, path, options)
    }

    fn from_vocab(vocab: Vocab, path: &Path, options: TokenizerOptions) -> Result<Self> {
        let source = Some(path.to_path_buf());
        let special = options.special.clone();
        for (role, token) in
            [("unk", &special.unk), ("cls", &special.cls), ("sep", &special.sep), ("pad", &special.pad)]
        {
            if !vocab.ids.contains_key(token) {
                return Err(Error::Vocab {
                    path: path.to_path_buf(),
                    line: None,
                    message: format!("the vocabulary has no {token} ({role}_token)"),
                });
            }
        }
        let ids = Arc::new(vocab.ids);
        let model = WordPiece::builder()
            .vocab(ids.iter().map(|(k, &v)| (k.clone(), v)).collect::<ahash::AHashMap<String, u32>>())
            .unk_token(special.unk.clone())
            .continuing_subword_prefix("##".into())
            .max_input_chars_per_word(100)
            .build()
            .map_err(|e| Error::Vocab { path: path.to_path_buf(), line: None, message: e.to_string() })?;
        let jieba = options.kind == TokenizerKind::Jieba;
        let normalizer = BertNormalizer::new(
            true,
            // The jieba path spaces CJK characters itself, after jieba has seen the words.
            !jieba && options.tokenize_chinese_chars,
            options.strip_accents,
            options.do_lower_case,
        );
        let pre_tokenizer = if jieba {
            PreTok::Jieba(JiebaPreTokenizer { vocab: ids.clone() })
        } else {
            PreTok::Standard(PreTokenizerWrapper::BertPreTokenizer(BertPreTokenizer))
        };
        let mut inner = Inner::new(ModelWrapper::WordPiece(model));
        let tk = |e: tokenizers::Error| Error::from_tokenizers(e);
        inner.with_normalizer(Some(NormalizerWrapper::BertNormalizer(normalizer))).map_err(tk)?;
        inner
            .with_pre_tokenizer(Some(pre_tokenizer))
            .with_decoder(Some(DecoderWrapper::WordPiece(WordPieceDecoder::new("##".into(), true))));
        let specials: Vec<AddedToken> =
            [&special.pad, &special.unk, &special.cls, &special.sep, &special.mask]
                .into_iter()
                .filter(|t| ids.contains_key(t.as_str()))
                .map(|t| AddedToken::from(t.clone(), true))
                .collect();
        inner.add_special_tokens(specials).map_err(tk)?;
        Self::assemble(inner, options, source)
    }

    fn from_tokenizer_json(bytes: &[u8], path: &Path, options: TokenizerOptions) -> Result<Self> {
        let source = Some(path.to_path_buf());
        let bad = |message: String| Error::Vocab { path: path.to_path_buf(), line: None, message };
        let loaded = tokenizers::Tokenizer::from_bytes(bytes)
            .map_err(|e| bad(format!("unreadable tokenizer.json: {e}")))?;
        let mut inner = Inner::new(loaded.get_model().clone());
        inner.with_normalizer(loaded.get_normalizer().cloned()).map_err(|e| bad(e.to_string()))?;
        inner
            .with_pre_tokenizer(loaded.get_pre_tokenizer().cloned().map(PreTok::Standard))
            .with_decoder(loaded.get_decoder().cloned());
        let mut added: Vec<(u32, AddedToken)> = loaded.get_added_tokens_decoder().into_iter().collect();
        added.sort_by_key(|(id, _)| *id);
        let (special_added, plain): (Vec<_>, Vec<_>) =
            added.into_iter().map(|(_, t)| t).partition(|t| t.special);
        inner.add_special_tokens(special_added).map_err(|e| bad(e.to_string()))?;
        inner.add_tokens(plain).map_err(|e| bad(e.to_string()))?;
        let special = &options.special;
        for token in [&special.unk, &special.cls, &special.sep, &special.pad] {
            if inner.token_to_id(token).is_none() {
                return Err(bad(format!("the vocabulary has no {token}")));
            }
        }
        Self::assemble(inner, options, source)
    }

    /// Writes what transformers and this crate need to load this tokenizer again: the vocabulary
    /// (vocab.txt, or tokenizer.json when it came from one) and a tokenizer_config.json.
    pub fn save(&self, dir: impl AsRef<Path>) -> Result<()> {
        let dir = dir.as_ref();
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        if let Some(source) = &self.source {
            let name = source.file_name().unwrap_or_default();
            let target = dir.join(name);
            if *source != target {
                std::fs::copy(source, &target).map_err(|e| Error::io(&target, e))?;
            }
        }
        let s = &self.special;
        let class = match self.kind {
            TokenizerKind::Jieba => "RoFormerTokenizer",
            TokenizerKind::WordPiece => "BertTokenizer",
        };
        let mut config = serde_json::json!({
            "tokenizer_class": class,
            "do_lower_case": self.options.do_lower_case,
            "strip_accents": self.options.strip_accents,
            "tokenize_chinese_chars": self.options.tokenize_chinese_chars,
            "unk_token": s.unk, "cls_token": s.cls, "sep_token": s.sep, "pad_token": s.pad, "mask_token": s.mask,
        });
        if let Some(n) = self.model_max_length {
            config["model_max_length"] = n.into();
        }
        let path = dir.join("tokenizer_config.json");
        let text = serde_json::to_string_pretty(&config).expect("json values serialise");
        std::fs::write(&path, text).map_err(|e| Error::io(&path, e))
    }
}

struct Vocab {
    ids: HashMap<String, u32>,
}

/// Reads vocab.txt: one token per line, ids by line number. Lines end at '\n' only (the real
/// roformer_chinese_base vocab has a U+2028 inside a line), with a trailing '\r' dropped, as
/// Python's universal newlines would. A token listed twice keeps its last id, as transformers does.
fn read_vocab(path: &Path) -> Result<Vocab> {
    parse_vocab(&std::fs::read(path).map_err(|e| Error::io(path, e))?, path)
}

/// The tokens of a vocab.txt's bytes; `path` names the file in errors.
fn parse_vocab(bytes: &[u8], path: &Path) -> Result<Vocab> {
    let mut lines: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
    if lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop();
    }
    if lines.is_empty() {
        return Err(Error::Vocab {
            path: path.to_path_buf(),
            line: None,
            message: "the vocabulary is empty".into(),
        });
    }
    let mut ids = HashMap::with_capacity(lines.len());
    for (i, line) in lines.into_iter().enumerate() {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let token = std::str::from_utf8(line).map_err(|e| Error::Vocab {
            path: path.to_path_buf(),
            line: Some(i + 1),
            message: format!("not UTF-8: {e}"),
        })?;
        ids.insert(token.to_string(), i as u32);
    }
    Ok(Vocab { ids })
}

/// roformer_chinese_base's vocab holds tens of thousands of multi-character Chinese words; a
/// char-level or English vocab holds few.
fn looks_word_level(vocab: &Vocab) -> bool {
    let words = vocab.ids.keys().filter(|t| t.chars().filter(|&c| is_cjk(c)).count() >= 2).count();
    words >= 1000
}

/// Special tokens are strings or `{"content": ...}` objects in tokenizer_config.json.
fn token_field(config: &Value, key: &str) -> Option<String> {
    match config.get(key)? {
        Value::String(s) => Some(s.clone()),
        Value::Object(o) => o.get("content").and_then(Value::as_str).map(str::to_string),
        _ => None,
    }
}

fn apply_tokenizer_config(options: &mut TokenizerOptions, c: &Value, path: &Path) -> Result<()> {
    // transformers takes any value by its truth, which `0` or `"false"` would turn upside down.
    if let Some(b) = optional_bool(c, "do_lower_case", path)? {
        options.do_lower_case = b;
    }
    if let Some(b) = optional_bool(c, "strip_accents", path)? {
        options.strip_accents = Some(b);
    }
    if let Some(b) = optional_bool(c, "tokenize_chinese_chars", path)? {
        options.tokenize_chinese_chars = b;
    }
    let s = &mut options.special;
    for (key, slot) in [
        ("unk_token", &mut s.unk),
        ("cls_token", &mut s.cls),
        ("sep_token", &mut s.sep),
        ("pad_token", &mut s.pad),
        ("mask_token", &mut s.mask),
    ] {
        if let Some(t) = token_field(c, key) {
            *slot = t;
        }
    }
    // transformers writes a huge sentinel (1e30) when there is no limit.
    if let Some(n) = c.get("model_max_length").and_then(Value::as_f64) {
        if n > 0.0 && n < 1e9 {
            options.model_max_length = Some(n as usize);
        }
    }
    Ok(())
}
