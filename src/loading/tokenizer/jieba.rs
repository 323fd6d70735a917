//! The jieba pre-tokenizer of RoFormer's word-level Chinese vocab (transformers'
//! `JiebaPreTokenizer`), and the pre-tokenizer slot that holds it or a standard one.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use tokenizers::{NormalizedString, PreTokenizedString, PreTokenizer, PreTokenizerWrapper};

/// The pre-tokenizer of one tokenizer: jieba for RoFormer's word-level vocab, else a standard one.
#[derive(Clone)]
pub(super) enum PreTok {
    Jieba(JiebaPreTokenizer),
    Standard(PreTokenizerWrapper),
}

impl PreTokenizer for PreTok {
    fn pre_tokenize(&self, pretokenized: &mut PreTokenizedString) -> tokenizers::Result<()> {
        match self {
            PreTok::Jieba(j) => j.pre_tokenize(pretokenized),
            PreTok::Standard(s) => s.pre_tokenize(pretokenized),
        }
    }
}

/// transformers' `JiebaPreTokenizer`, step for step.
#[derive(Clone)]
pub(super) struct JiebaPreTokenizer {
    pub(super) vocab: Arc<HashMap<String, u32>>,
}

/// jieba's own dictionary: jieba-rs 0.11.0's `src/data/dict.txt` (MIT, from jieba), as zlib.
/// jieba-rs embeds it through zstd's C library, which a cross build (Apple's targets, WebAssembly)
/// can only compile with a C compiler and SDK for the target; miniz_oxide reads this copy in Rust.
static DICTIONARY: &[u8] = include_bytes!("jieba_dict.zlib");

/// jieba's dictionary takes a moment to load; one copy serves every tokenizer of the process.
fn jieba() -> Result<&'static jieba_rs::Jieba, String> {
    static JIEBA: OnceLock<Result<jieba_rs::Jieba, String>> = OnceLock::new();
    let load = || {
        let text = miniz_oxide::inflate::decompress_to_vec_zlib(DICTIONARY)
            .map_err(|e| format!("jieba's built-in dictionary does not inflate: {e}"))?;
        jieba_rs::Jieba::with_dict(&mut text.as_slice())
            .map_err(|e| format!("jieba's built-in dictionary does not load: {e}"))
    };
    JIEBA.get_or_init(load).as_ref().map_err(Clone::clone)
}

impl JiebaPreTokenizer {
    fn split(&self, normalized: NormalizedString) -> tokenizers::Result<Vec<NormalizedString>> {
        let text = normalized.get();
        let mut splits = Vec::new();
        let mut slice = |start: usize, end: usize| -> tokenizers::Result<()> {
            let piece =
                normalized.slice(tokenizers::normalizer::Range::Normalized(start..end)).ok_or_else(|| {
                    format!("jieba split {start}..{end} is not on a character boundary of {text:?}")
                })?;
            splits.push(piece);
            Ok(())
        };
        for token in jieba()?.cut(text, false) {
            if self.vocab.contains_key(token.word) {
                slice(token.byte_start, token.byte_end)?;
                continue;
            }
            // Not a vocab word: split it BERT-style (at whitespace and around CJK characters).
            // Like transformers, each piece starts where the previous one ended.
            let mut start = token.byte_start;
            for piece in split_cjk_and_whitespace(token.word) {
                let end = start + piece.len();
                slice(start, end)?;
                start = end;
            }
        }
        Ok(splits)
    }
}

impl PreTokenizer for JiebaPreTokenizer {
    fn pre_tokenize(&self, pretokenized: &mut PreTokenizedString) -> tokenizers::Result<()> {
        pretokenized.split(|_, normalized| self.split(normalized))
    }
}

/// The pieces of `normalize_str(word).split()` under BERT's normalizer that only spaces CJK
/// characters: runs of other characters, and each CJK character alone.
fn split_cjk_and_whitespace(word: &str) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut run_start = None;
    for (i, c) in word.char_indices() {
        if c.is_whitespace() || is_cjk(c) {
            if let Some(s) = run_start.take() {
                pieces.push(&word[s..i]);
            }
            if is_cjk(c) {
                pieces.push(&word[i..i + c.len_utf8()]);
            }
        } else if run_start.is_none() {
            run_start = Some(i);
        }
    }
    if let Some(s) = run_start {
        pieces.push(&word[s..]);
    }
    pieces
}

/// The CJK Unified Ideograph blocks BERT spaces out (its `_is_chinese_char`).
pub(crate) fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x4E00..=0x9FFF | 0x3400..=0x4DBF | 0x20000..=0x2A6DF | 0x2A700..=0x2B73F
        | 0x2B740..=0x2B81F | 0x2B820..=0x2CEAF | 0xF900..=0xFAFF | 0x2F800..=0x2FA1F)
}
