//! Tokenization with the same ids as transformers, for every RoFormer checkpoint family.
//!
//! - `RoFormerTokenizer` (the 50k word-level vocab of roformer_chinese_base and _small): BERT's
//!   normalizer (cleaning, lowercasing), then jieba with HMM off; a jieba word found in the vocab
//!   stays whole, anything else is split at whitespace and around CJK characters; then WordPiece.
//!   A `tokenizer.json` saved for such a checkpoint holds BertPreTokenizer and is ignored.
//! - `BertTokenizer` / `ElectraTokenizer` (char-level and English checkpoints): standard BERT
//!   WordPiece, from `tokenizer.json` when the folder has one, else from `vocab.txt`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use serde_json::Value;
use tokenizers::decoders::wordpiece::WordPiece as WordPieceDecoder;
use tokenizers::models::wordpiece::WordPiece;
use tokenizers::normalizers::BertNormalizer;
use tokenizers::pre_tokenizers::bert::BertPreTokenizer;
use tokenizers::processors::template::TemplateProcessing;
use tokenizers::utils::padding::pad_encodings;
use tokenizers::utils::truncation::truncate_encodings;
use tokenizers::{
    AddedToken, DecoderWrapper, Encoding, ModelWrapper, NormalizedString, NormalizerWrapper,
    PaddingDirection, PaddingParams, PaddingStrategy, PostProcessor, PostProcessorWrapper,
    PreTokenizedString, PreTokenizer, PreTokenizerWrapper, TokenizerImpl, TruncationDirection,
    TruncationParams, TruncationStrategy,
};

use crate::error::{Error, Result};
use crate::loading::json::read_json_if_exists;

/// Which tokenizer a checkpoint uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenizerKind {
    /// jieba (HMM off) before WordPiece: `RoFormerTokenizer`.
    Jieba,
    /// BERT WordPiece: `BertTokenizer`, `ElectraTokenizer`, or a trusted `tokenizer.json`.
    WordPiece,
}

/// How a pair is truncated to `max_length`, as transformers' `truncation=` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Truncation {
    /// Drop tokens from the longer text first.
    LongestFirst,
    /// Drop tokens from the first text only.
    OnlyFirst,
    /// Drop tokens from the second text only.
    OnlySecond,
}

/// Padding of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Padding {
    /// To the longest sequence of the batch.
    Longest,
    /// To a fixed length (longer sequences are not cut: combine with truncation).
    Fixed(usize),
}

/// One encoded text or pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Encoded {
    /// Token ids.
    pub input_ids: Vec<u32>,
    /// Segment ids: 0 for the first text, 1 for the second.
    pub token_type_ids: Vec<u32>,
    /// 1 for tokens, 0 for padding.
    pub attention_mask: Vec<u32>,
    /// Character (not byte) offsets into the original text of each token; (0, 0) for special and
    /// padding tokens. For a pair, offsets of the second text's tokens point into the second text.
    pub offsets: Vec<(usize, usize)>,
    /// Whether truncation dropped tokens.
    pub truncated: bool,
}

impl Encoded {
    pub(crate) fn from_encoding(e: &Encoding) -> Self {
        Self {
            input_ids: e.get_ids().to_vec(),
            token_type_ids: e.get_type_ids().to_vec(),
            attention_mask: e.get_attention_mask().to_vec(),
            offsets: e.get_offsets().to_vec(),
            truncated: !e.get_overflowing().is_empty(),
        }
    }

    /// Tokens, special and padding tokens included.
    pub fn len(&self) -> usize {
        self.input_ids.len()
    }

    /// Whether there are no tokens at all.
    pub fn is_empty(&self) -> bool {
        self.input_ids.is_empty()
    }
}

/// Names of the special tokens, from tokenizer_config.json or BERT's defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SpecialTokens {
    pub unk: String,
    pub cls: String,
    pub sep: String,
    pub pad: String,
    pub mask: String,
}

impl Default for SpecialTokens {
    fn default() -> Self {
        Self {
            unk: "[UNK]".into(),
            cls: "[CLS]".into(),
            sep: "[SEP]".into(),
            pad: "[PAD]".into(),
            mask: "[MASK]".into(),
        }
    }
}

/// The settings of tokenizer_config.json that change ids.
#[derive(Debug, Clone)]
pub(crate) struct TokenizerOptions {
    pub kind: TokenizerKind,
    pub do_lower_case: bool,
    /// `None` follows `do_lower_case`, as in BERT.
    pub strip_accents: Option<bool>,
    pub tokenize_chinese_chars: bool,
    pub special: SpecialTokens,
    pub model_max_length: Option<usize>,
}

impl Default for TokenizerOptions {
    fn default() -> Self {
        Self {
            kind: TokenizerKind::WordPiece,
            do_lower_case: true,
            strip_accents: None,
            tokenize_chinese_chars: true,
            special: SpecialTokens::default(),
            model_max_length: None,
        }
    }
}

type Inner = TokenizerImpl<ModelWrapper, NormalizerWrapper, PreTok, PostProcessorWrapper, DecoderWrapper>;

/// A tokenizer for RoFormer checkpoints.
#[derive(Clone)]
pub struct Tokenizer {
    inner: Inner,
    kind: TokenizerKind,
    special: SpecialTokens,
    model_max_length: Option<usize>,
    zero_segment_ids: bool,
    // Kept out of `inner`: tokenizers 0.23.2 cuts each text to max_length before choosing how to
    // split a pair's budget, which gives other splits than transformers for long pairs.
    truncation: Option<TruncationParams>,
    padding: Option<PaddingParams>,
    options: TokenizerOptions,
    /// The vocabulary or tokenizer.json it was built from, copied by [`Tokenizer::save`].
    source: Option<PathBuf>,
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer")
            .field("kind", &self.kind)
            .field("vocab_size", &self.vocab_size())
            .field("model_max_length", &self.model_max_length)
            .finish()
    }
}

impl Tokenizer {
    /// Loads the tokenizer of a checkpoint folder: vocab.txt with tokenizer_config.json (and
    /// config.json for the class and max length), or tokenizer.json where it can be trusted.
    pub fn from_dir(dir: impl AsRef<Path>) -> Result<Self> {
        let dir = dir.as_ref();
        let tokenizer_config = read_json_if_exists(&dir.join("tokenizer_config.json"))?;
        let model_config = read_json_if_exists(&dir.join("config.json"))?;
        let vocab_path = dir.join("vocab.txt");
        let vocab = if vocab_path.is_file() { Some(read_vocab(&vocab_path)?) } else { None };

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
            apply_tokenizer_config(&mut options, c);
        }
        if options.model_max_length.is_none() {
            options.model_max_length = model_config
                .as_ref()
                .and_then(|c| c.get("max_position_embeddings"))
                .and_then(Value::as_u64)
                .map(|n| n as usize);
        }

        let tokenizer_json = dir.join("tokenizer.json");
        match (kind, vocab) {
            (TokenizerKind::WordPiece, _) if tokenizer_json.is_file() => {
                Self::from_tokenizer_json(&tokenizer_json, options)
            }
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

    fn from_tokenizer_json(path: &Path, options: TokenizerOptions) -> Result<Self> {
        let source = Some(path.to_path_buf());
        let bad = |message: String| Error::Vocab { path: path.to_path_buf(), line: None, message };
        let loaded = tokenizers::Tokenizer::from_file(path)
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

    /// The tokenizer around a configured `inner`, with its special-token template.
    fn assemble(inner: Inner, options: TokenizerOptions, source: Option<PathBuf>) -> Result<Self> {
        let mut tokenizer = Self {
            inner,
            kind: options.kind,
            special: options.special.clone(),
            model_max_length: options.model_max_length,
            zero_segment_ids: false,
            truncation: None,
            padding: None,
            options,
            source,
        };
        tokenizer.set_template()?;
        Ok(tokenizer)
    }

    /// `[CLS] A `[SEP]`` and `[CLS] A `[SEP]` B `[SEP]``, the second segment typed 1 unless
    /// [`Tokenizer::set_zero_segment_ids`] asked for all zeros.
    fn set_template(&mut self) -> Result<()> {
        let (cls, sep) = (&self.special.cls, &self.special.sep);
        let b = if self.zero_segment_ids { 0 } else { 1 };
        let template = TemplateProcessing::builder()
            .try_single(format!("{cls}:0 $A:0 {sep}:0"))
            .and_then(|t| t.try_pair(format!("{cls}:0 $A:0 {sep}:0 $B:{b} {sep}:{b}")))
            .map_err(|e| Error::from_tokenizers(e.into()))?
            .special_tokens(vec![(cls.clone(), self.token_id(cls)?), (sep.clone(), self.token_id(sep)?)])
            .build()
            .map_err(|e| Error::from_tokenizers(Box::new(e)))?;
        self.inner.with_post_processor(Some(PostProcessorWrapper::Template(template)));
        Ok(())
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

    /// jieba or plain WordPiece.
    pub fn kind(&self) -> TokenizerKind {
        self.kind
    }

    pub(crate) fn special_tokens(&self) -> &SpecialTokens {
        &self.special
    }

    /// The mask token (`[MASK]`) that fill-mask inputs hold.
    pub fn mask_token(&self) -> &str {
        &self.special.mask
    }

    /// Tokens in the vocabulary, added tokens included.
    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }

    /// The longest input the checkpoint was made for: tokenizer_config's model_max_length, else
    /// the config's max_position_embeddings.
    pub fn model_max_length(&self) -> Option<usize> {
        self.model_max_length
    }

    /// The id of a token, or an error naming it.
    pub fn token_id(&self, token: &str) -> Result<u32> {
        self.inner
            .token_to_id(token)
            .ok_or_else(|| Error::tokenizer(format!("`{token}` is not in the vocabulary")))
    }

    /// The token of an id, if the vocabulary has one.
    pub fn id_to_token(&self, id: u32) -> Option<String> {
        self.inner.id_to_token(id)
    }

    /// The id of `[PAD]`.
    pub fn pad_id(&self) -> u32 {
        self.inner.token_to_id(&self.special.pad).unwrap_or(0)
    }

    /// Truncates to `max_length` tokens (special tokens included; `None` means
    /// [`Tokenizer::model_max_length`]); `None` as the strategy turns truncation off.
    pub fn set_truncation(&mut self, strategy: Option<Truncation>, max_length: Option<usize>) -> Result<()> {
        let params = match strategy {
            None => None,
            Some(strategy) => {
                let max_length = max_length.or(self.model_max_length).ok_or_else(|| {
                    Error::tokenizer("truncation needs a max_length: the checkpoint gives none")
                })?;
                Some(TruncationParams {
                    max_length,
                    strategy: match strategy {
                        Truncation::LongestFirst => TruncationStrategy::LongestFirst,
                        Truncation::OnlyFirst => TruncationStrategy::OnlyFirst,
                        Truncation::OnlySecond => TruncationStrategy::OnlySecond,
                    },
                    stride: 0,
                    direction: TruncationDirection::Right,
                })
            }
        };
        if let Some(p) = &params {
            let specials = self.inner.get_post_processor().map_or(0, |pp| pp.added_tokens(true));
            if p.max_length <= specials {
                return Err(Error::tokenizer(format!(
                    "max_length {} leaves no room beside the {specials} special tokens of a pair",
                    p.max_length
                )));
            }
        }
        self.truncation = params;
        Ok(())
    }

    /// Pads batches as `padding` says; `None` turns padding off.
    pub fn set_padding(&mut self, padding: Option<Padding>) {
        let params = padding.map(|p| PaddingParams {
            strategy: match p {
                Padding::Longest => PaddingStrategy::BatchLongest,
                Padding::Fixed(n) => PaddingStrategy::Fixed(n),
            },
            direction: PaddingDirection::Right,
            pad_to_multiple_of: None,
            pad_id: self.pad_id(),
            pad_type_id: 0,
            pad_token: self.special.pad.clone(),
        });
        self.padding = params;
    }

    /// With `true`, both segments of a pair get token type 0, as RoFormer's authors fine-tuned.
    pub fn set_zero_segment_ids(&mut self, zero: bool) -> Result<()> {
        self.zero_segment_ids = zero;
        self.set_template()
    }

    /// Encodes one text with its special tokens, truncated as [`Tokenizer::set_truncation`] says.
    pub fn encode(&self, text: &str) -> Result<Encoded> {
        Ok(self.encode_all(&[text], None)?.remove(0))
    }

    /// Encodes a pair as `[CLS] first [SEP] second [SEP]`.
    pub fn encode_pair(&self, first: &str, second: &str) -> Result<Encoded> {
        Ok(self.encode_all(&[first], Some(&[second]))?.remove(0))
    }

    /// Encodes a batch in parallel, padded as [`Tokenizer::set_padding`] says.
    pub fn encode_batch<S: AsRef<str>>(&self, texts: &[S]) -> Result<Vec<Encoded>> {
        let texts: Vec<&str> = texts.iter().map(AsRef::as_ref).collect();
        self.encode_all(&texts, None)
    }

    /// Encodes a batch of pairs, padded as [`Tokenizer::set_padding`] says.
    pub fn encode_pair_batch<A: AsRef<str>, B: AsRef<str>>(&self, pairs: &[(A, B)]) -> Result<Vec<Encoded>> {
        let (firsts, seconds): (Vec<&str>, Vec<&str>) =
            pairs.iter().map(|(a, b)| (a.as_ref(), b.as_ref())).unzip();
        self.encode_all(&firsts, Some(&seconds))
    }

    fn encode_all(&self, firsts: &[&str], seconds: Option<&[&str]>) -> Result<Vec<Encoded>> {
        Ok(self.encodings(firsts, seconds)?.iter().map(Encoded::from_encoding).collect())
    }

    /// Tokenizes every text, then truncates, adds special tokens and pads, in transformers' order.
    /// A pair whose second text is empty is encoded as a single text, as transformers does. The
    /// tokenizers library's encodings keep what [`Encoded`] leaves out (special tokens, words).
    pub(crate) fn encodings(&self, firsts: &[&str], seconds: Option<&[&str]>) -> Result<Vec<Encoding>> {
        let tk = |e: tokenizers::Error| Error::from_tokenizers(e);
        let plain = |texts: Vec<&str>| {
            let inputs: Vec<tokenizers::EncodeInput> = texts.into_iter().map(Into::into).collect();
            self.inner.encode_batch_char_offsets(inputs, false).map_err(tk)
        };
        let a = plain(firsts.to_vec())?;
        let b: Vec<Option<Encoding>> = match seconds {
            None => vec![None; a.len()],
            Some(seconds) => {
                let nonempty: Vec<&str> = seconds.iter().copied().filter(|s| !s.is_empty()).collect();
                let mut encoded = plain(nonempty)?.into_iter();
                seconds.iter().map(|s| if s.is_empty() { None } else { encoded.next() }).collect()
            }
        };
        let mut encodings = Vec::with_capacity(a.len());
        for (a, b) in a.into_iter().zip(b) {
            let (a, b) = match &self.truncation {
                None => (a, b),
                Some(params) => {
                    let specials =
                        self.inner.get_post_processor().map_or(0, |pp| pp.added_tokens(b.is_some()));
                    let params =
                        TruncationParams { max_length: params.max_length - specials, ..params.clone() };
                    truncate_encodings(a, b, &params).map_err(tk)?
                }
            };
            encodings.push(self.inner.post_process(a, b, true).map_err(tk)?);
        }
        if let Some(params) = &self.padding {
            pad_encodings(&mut encodings, params).map_err(tk)?;
        }
        Ok(encodings)
    }

    /// `[CLS] first [SEP] window [SEP]` for each window of `second` that fits in `max_length`
    /// tokens, consecutive windows sharing `stride` tokens: transformers' `truncation="only_second"`
    /// with `return_overflowing_tokens`, as its question-answering pipeline encodes.
    pub(crate) fn encode_windows(
        &self,
        first: &str,
        second: &str,
        max_length: usize,
        stride: usize,
    ) -> Result<Vec<Encoding>> {
        let tk = |e: tokenizers::Error| Error::from_tokenizers(e);
        let a = self.inner.encode_char_offsets(first, false).map_err(tk)?;
        let b = self.inner.encode_char_offsets(second, false).map_err(tk)?;
        let specials = self.inner.get_post_processor().map_or(0, |pp| pp.added_tokens(true));
        let room = max_length.saturating_sub(specials + a.len());
        // The tokenizers library panics on a stride that does not leave each window new tokens.
        if room <= stride && specials + a.len() + b.len() > max_length {
            return Err(Error::Input(format!(
                "a window of {max_length} tokens holds {room} tokens of the second text beside the {} of the \
                 first and {specials} special tokens: the stride ({stride}) must be smaller",
                a.len()
            )));
        }
        let params = TruncationParams {
            max_length: max_length.saturating_sub(specials),
            strategy: TruncationStrategy::OnlySecond,
            stride,
            direction: TruncationDirection::Right,
        };
        let (a, b) = truncate_encodings(a, Some(b), &params).map_err(tk)?;
        let mut encoding = self.inner.post_process(a, b, true).map_err(tk)?;
        let overflowing = encoding.take_overflowing();
        let mut windows: Vec<Encoding> = std::iter::once(encoding).chain(overflowing).collect();
        // tokenizers 0.23.2's template gives the second text's type only to the first window (the
        // Python binding, 0.23.3, gives it to every window): from the second text on, all is
        // segment B, its closing [SEP] included.
        let b_type = u32::from(!self.zero_segment_ids);
        for window in &mut windows {
            if let Some(first_b) = window.get_sequence_ids().iter().position(|&s| s == Some(1)) {
                let n = window.len();
                let types: Vec<u32> = (0..n).map(|t| if t < first_b { 0 } else { b_type }).collect();
                window.set_type_ids(types);
            }
        }
        Ok(windows)
    }

    /// Joins tokens into text with the decoder (WordPiece: `##` pieces glued on, spaces cleaned
    /// up), as transformers' `convert_tokens_to_string`.
    pub(crate) fn tokens_to_string(&self, tokens: Vec<String>) -> Result<String> {
        use tokenizers::Decoder;
        match self.inner.get_decoder() {
            Some(decoder) => decoder.decode(tokens).map_err(Error::from_tokenizers),
            None => Ok(tokens.join(" ")),
        }
    }

    /// The id of the unknown token.
    pub(crate) fn unk_id(&self) -> Option<u32> {
        self.inner.token_to_id(&self.special.unk)
    }

    /// The tokens of a text, without special tokens.
    pub fn tokenize(&self, text: &str) -> Result<Vec<String>> {
        let e = self.inner.encode(text, false).map_err(Error::from_tokenizers)?;
        Ok(e.get_tokens().to_vec())
    }

    /// Turns ids back into text, joining WordPiece continuations. Skipping special tokens drops
    /// `[CLS]`, `[SEP]`, `[PAD]` and `[MASK]` and keeps `[UNK]`, as transformers does.
    pub fn decode(&self, ids: &[u32], skip_special_tokens: bool) -> Result<String> {
        let skipped: Vec<u32> = if skip_special_tokens {
            let s = &self.special;
            [&s.cls, &s.sep, &s.pad, &s.mask].into_iter().filter_map(|t| self.inner.token_to_id(t)).collect()
        } else {
            Vec::new()
        };
        let kept: Vec<u32> = ids.iter().copied().filter(|id| !skipped.contains(id)).collect();
        self.inner.decode(&kept, false).map_err(Error::from_tokenizers)
    }
}

/// The pre-tokenizer of one tokenizer: jieba for RoFormer's word-level vocab, else a standard one.
#[derive(Clone)]
enum PreTok {
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
struct JiebaPreTokenizer {
    vocab: Arc<HashMap<String, u32>>,
}

/// jieba's dictionary takes a moment to load; one copy serves every tokenizer of the process.
fn jieba() -> &'static jieba_rs::Jieba {
    static JIEBA: OnceLock<jieba_rs::Jieba> = OnceLock::new();
    JIEBA.get_or_init(jieba_rs::Jieba::new)
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
        for token in jieba().cut(text, false) {
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

struct Vocab {
    ids: HashMap<String, u32>,
}

/// Reads vocab.txt: one token per line, ids by line number. Lines end at '\n' only (the real
/// roformer_chinese_base vocab has a U+2028 inside a line), with a trailing '\r' dropped, as
/// Python's universal newlines would. A token listed twice keeps its last id, as transformers does.
fn read_vocab(path: &Path) -> Result<Vocab> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
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

fn apply_tokenizer_config(options: &mut TokenizerOptions, c: &Value) {
    if let Some(b) = c.get("do_lower_case").and_then(Value::as_bool) {
        options.do_lower_case = b;
    }
    if let Some(b) = c.get("strip_accents").and_then(Value::as_bool) {
        options.strip_accents = Some(b);
    }
    if let Some(b) = c.get("tokenize_chinese_chars").and_then(Value::as_bool) {
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
}

/// Trains a WordPiece vocabulary on `texts` with BERT's normalizer (lowercasing) and
/// pre-tokenizer, and writes it as `vocab.txt` (special tokens first) to `dir`.
pub fn train_wordpiece<'a>(
    texts: impl Iterator<Item = &'a str> + Send,
    vocab_size: usize,
    min_frequency: u64,
    dir: impl AsRef<Path>,
) -> Result<PathBuf> {
    use tokenizers::models::wordpiece::WordPieceTrainer;
    use tokenizers::models::TrainerWrapper;
    let dir = dir.as_ref();
    let tk = |e: tokenizers::Error| Error::from_tokenizers(e);
    let special = SpecialTokens::default();
    let specials: Vec<AddedToken> = [&special.pad, &special.unk, &special.cls, &special.sep, &special.mask]
        .into_iter()
        .map(|t| AddedToken::from(t.clone(), true))
        .collect();
    let mut trainer = TrainerWrapper::WordPieceTrainer(
        WordPieceTrainer::builder()
            .vocab_size(vocab_size)
            .min_frequency(min_frequency)
            .special_tokens(specials)
            .show_progress(false)
            .build(),
    );
    let mut tok: TokenizerImpl<
        ModelWrapper,
        NormalizerWrapper,
        PreTokenizerWrapper,
        PostProcessorWrapper,
        DecoderWrapper,
    > = TokenizerImpl::new(ModelWrapper::WordPiece(WordPiece::default()));
    tok.with_normalizer(Some(NormalizerWrapper::BertNormalizer(BertNormalizer::new(true, true, None, true))))
        .map_err(tk)?;
    tok.with_pre_tokenizer(Some(PreTokenizerWrapper::BertPreTokenizer(BertPreTokenizer)));
    tok.train(&mut trainer, texts).map_err(tk)?;
    let mut vocab: Vec<(String, u32)> = tok.get_vocab(true).into_iter().collect();
    vocab.sort_by_key(|(_, id)| *id);
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let path = dir.join("vocab.txt");
    let text: String = vocab.into_iter().map(|(t, _)| t + "\n").collect();
    std::fs::write(&path, text).map_err(|e| Error::io(&path, e))?;
    Ok(path)
}
