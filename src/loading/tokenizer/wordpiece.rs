//! Training a WordPiece vocabulary for a new checkpoint (`roformer::training::train_wordpiece`).

use std::path::{Path, PathBuf};

use tokenizers::models::wordpiece::WordPiece;
use tokenizers::normalizers::BertNormalizer;
use tokenizers::pre_tokenizers::bert::BertPreTokenizer;
use tokenizers::{
    AddedToken, DecoderWrapper, ModelWrapper, NormalizerWrapper, PostProcessorWrapper, PreTokenizerWrapper,
    TokenizerImpl,
};

use super::SpecialTokens;
use crate::error::{Error, Result};

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
