//! Tokenization with the same ids as transformers, for every RoFormer checkpoint family.
//!
//! - `RoFormerTokenizer` (the 50k word-level vocab of roformer_chinese_base and _small): BERT's
//!   normalizer (cleaning, lowercasing), then jieba with HMM off; a jieba word found in the vocab
//!   stays whole, anything else is split at whitespace and around CJK characters; then WordPiece.
//!   A `tokenizer.json` saved for such a checkpoint holds BertPreTokenizer and is ignored.
//! - `BertTokenizer` / `ElectraTokenizer` (char-level and English checkpoints): standard BERT
//!   WordPiece, from `tokenizer.json` when the folder has one, else from `vocab.txt`.
//!
//! This file holds the encode API ([`Tokenizer`], [`Encoded`], truncation and padding);
//! `folder` loads a tokenizer from a checkpoint folder and saves it, `jieba` is the word-level
//! pre-tokenizer, and `wordpiece` trains a new vocabulary.

mod folder;
pub(crate) mod jieba;
pub(crate) mod wordpiece;

use std::path::PathBuf;

use tokenizers::normalizers::{Lowercase, Sequence};
use tokenizers::processors::template::TemplateProcessing;
use tokenizers::utils::padding::pad_encodings;
use tokenizers::utils::truncation::truncate_encodings;
use tokenizers::{
    DecoderWrapper, Encoding, ModelWrapper, NormalizerWrapper, PaddingDirection, PaddingParams,
    PaddingStrategy, PostProcessor, PostProcessorWrapper, TokenizerImpl, TruncationDirection,
    TruncationParams, TruncationStrategy,
};

use crate::error::{Error, Result};
use crate::loading::tokenizer::jieba::PreTok;

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

/// What transformers' tokenizer makes of a pair whose second text is empty: the first text alone
/// when it is given one pair (`tokenizer(first, "")`: to Python an empty string is no pair), and
/// the pair `[CLS] first [SEP] [SEP]` when it is given lists (`tokenizer([first], [""])`), as the
/// tokenizers library underneath encodes it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum EmptySecond {
    NoPair,
    Pair,
}

type Inner = TokenizerImpl<ModelWrapper, NormalizerWrapper, PreTok, PostProcessorWrapper, DecoderWrapper>;

/// A tokenizer for RoFormer checkpoints: the ids transformers' tokenizer gives (BERT WordPiece,
/// and jieba before it for the word-level Chinese vocabularies).
///
/// ```
/// # #[cfg(feature = "bundled-sst2")]
/// # fn main() -> roformer::Result<()> {
/// let tokenizer = roformer::Tokenizer::from_files(&roformer::ModelFiles::bundled_sst2()?)?;
/// // Tokenizer::from_dir("path/to/checkpoint") on disk
/// let encoded = tokenizer.encode_pair("a gorgeous movie", "a chore")?;
/// assert_eq!(tokenizer.tokenize("a gorgeous movie")?, ["a", "gorgeous", "movie"]);
/// assert_eq!(encoded.input_ids.len(), encoded.token_type_ids.len());
/// # Ok(())
/// # }
/// # #[cfg(not(feature = "bundled-sst2"))]
/// # fn main() {}
/// ```
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

    /// Lowercases texts before the normalizer, as sentence-transformers 6 does for a Transformer
    /// module whose sentence_bert_config.json sets `do_lower_case`: a `Lowercase` step first,
    /// unless the normalizer already has one (a BERT normalizer that lowercases still gets it, as
    /// there).
    pub(crate) fn lowercase_first(&mut self) -> Result<()> {
        let steps = match self.inner.get_normalizer().cloned() {
            Some(NormalizerWrapper::Lowercase(_)) => return Ok(()),
            Some(NormalizerWrapper::Sequence(steps)) => {
                if steps.as_ref().iter().any(|n| matches!(n, NormalizerWrapper::Lowercase(_))) {
                    return Ok(());
                }
                steps.into_iter().collect()
            }
            Some(other) => vec![other],
            None => Vec::new(),
        };
        let steps = std::iter::once(NormalizerWrapper::Lowercase(Lowercase)).chain(steps).collect();
        self.inner
            .with_normalizer(Some(NormalizerWrapper::Sequence(Sequence::new(steps))))
            .map_err(Error::from_tokenizers)?;
        Ok(())
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

    /// Encodes a pair as `[CLS] first [SEP] second [SEP]`; an empty `second` as the text `first`
    /// alone, as transformers' `tokenizer(first, "")` does.
    pub fn encode_pair(&self, first: &str, second: &str) -> Result<Encoded> {
        Ok(self.encode_all(&[first], Some((&[second], EmptySecond::NoPair)))?.remove(0))
    }

    /// Encodes a batch in parallel, padded as [`Tokenizer::set_padding`] says.
    pub fn encode_batch<S: AsRef<str>>(&self, texts: &[S]) -> Result<Vec<Encoded>> {
        let texts: Vec<&str> = texts.iter().map(AsRef::as_ref).collect();
        self.encode_all(&texts, None)
    }

    /// Encodes a batch of pairs, padded as [`Tokenizer::set_padding`] says. A pair with an empty
    /// second text stays a pair, `[CLS] first [SEP] [SEP]`, as transformers' tokenizer encodes
    /// lists (`tokenizer(firsts, seconds)`) and sentence-transformers' CrossEncoder its pairs.
    pub fn encode_pair_batch<A: AsRef<str>, B: AsRef<str>>(&self, pairs: &[(A, B)]) -> Result<Vec<Encoded>> {
        self.encode_pairs(pairs, EmptySecond::Pair)
    }

    /// Each pair as [`Tokenizer::encode_pair`] encodes it, in parallel and padded as
    /// [`Tokenizer::set_padding`] says: what transformers' pipelines get, which tokenize each input
    /// alone.
    pub(crate) fn encode_each_pair<A: AsRef<str>, B: AsRef<str>>(
        &self,
        pairs: &[(A, B)],
    ) -> Result<Vec<Encoded>> {
        self.encode_pairs(pairs, EmptySecond::NoPair)
    }

    fn encode_pairs<A: AsRef<str>, B: AsRef<str>>(
        &self,
        pairs: &[(A, B)],
        empty: EmptySecond,
    ) -> Result<Vec<Encoded>> {
        let (firsts, seconds): (Vec<&str>, Vec<&str>) =
            pairs.iter().map(|(a, b)| (a.as_ref(), b.as_ref())).unzip();
        self.encode_all(&firsts, Some((&seconds, empty)))
    }

    fn encode_all(&self, firsts: &[&str], seconds: Option<(&[&str], EmptySecond)>) -> Result<Vec<Encoded>> {
        Ok(self.encodings(firsts, seconds)?.iter().map(Encoded::from_encoding).collect())
    }

    /// Tokenizes every text, then truncates, adds special tokens and pads, in transformers' order.
    /// The tokenizers library's encodings keep what [`Encoded`] leaves out (special tokens, words).
    pub(crate) fn encodings(
        &self,
        firsts: &[&str],
        seconds: Option<(&[&str], EmptySecond)>,
    ) -> Result<Vec<Encoding>> {
        let tk = |e: tokenizers::Error| Error::from_tokenizers(e);
        let plain = |texts: Vec<&str>| {
            let inputs: Vec<tokenizers::EncodeInput> = texts.into_iter().map(Into::into).collect();
            self.inner.encode_batch_char_offsets(inputs, false).map_err(tk)
        };
        let a = plain(firsts.to_vec())?;
        let b: Vec<Option<Encoding>> = match seconds {
            None => vec![None; a.len()],
            Some((seconds, EmptySecond::Pair)) => plain(seconds.to_vec())?.into_iter().map(Some).collect(),
            Some((seconds, EmptySecond::NoPair)) => {
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

    /// `[CLS] window [SEP]` for each window of `text` that fits in `max_length` tokens,
    /// consecutive windows sharing `stride` tokens: transformers' `truncation=True` with
    /// `return_overflowing_tokens` and `stride`, as its token-classification pipeline encodes.
    pub(crate) fn encode_text_windows(
        &self,
        text: &str,
        max_length: usize,
        stride: usize,
    ) -> Result<Vec<Encoding>> {
        let tk = |e: tokenizers::Error| Error::from_tokenizers(e);
        let specials = self.inner.get_post_processor().map_or(0, |pp| pp.added_tokens(false));
        let room = max_length.saturating_sub(specials);
        // The tokenizers library panics on a stride that does not leave each window new tokens.
        if room <= stride {
            return Err(Error::option(
                "stride",
                format!(
                    "a window of {max_length} tokens holds {room} tokens beside the {specials} special tokens: \
                     the stride ({stride}) must be smaller"
                ),
            ));
        }
        let a = self.inner.encode_char_offsets(text, false).map_err(tk)?;
        let params = TruncationParams {
            max_length: room,
            strategy: TruncationStrategy::LongestFirst,
            stride,
            direction: TruncationDirection::Right,
        };
        let (a, _) = truncate_encodings(a, None, &params).map_err(tk)?;
        let mut encoding = self.inner.post_process(a, None, true).map_err(tk)?;
        let overflowing = encoding.take_overflowing();
        Ok(std::iter::once(encoding).chain(overflowing).collect())
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
