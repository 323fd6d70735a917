//! What people do with the crate: classify texts and tokens, answer questions, encode sentences,
//! rerank, fill masks, paraphrase, and sparse (SPLADE) embeddings. Each wraps the one generic [`Pipeline`] of `core`, which loads
//! model, tokenizer and config together from a folder or a Hub id, batches the inputs, and holds
//! the accessors every pipeline shares; a new pipeline is one file here plus its line below.
//! Beside them, `sentence_transformers` reads a sentence-transformers folder's modules and
//! `splade_pooling` is its SpladePooling module, which the sparse encoder pools with.

mod core;
mod fill_mask;
mod options;
mod paraphraser;
mod question_answerer;
mod reranker;
mod sentence_encoder;
mod sentence_transformers;
mod sparse_encoder;
mod splade_pooling;
mod text_classifier;
mod token_classifier;

pub use self::core::Pipeline;
pub use fill_mask::{FillMask, MaskCandidate};
pub use options::{PipelineOptions, Pooling};
pub use paraphraser::{Paraphrase, Paraphraser};
pub use question_answerer::{Answer, QuestionAnswerer, QuestionAnswererOptions};
pub use reranker::{Ranked, Reranker};
pub use sentence_encoder::{cosine_similarity, l2_normalize, Prompt, SentenceEncoder};
pub use sparse_encoder::{SparseEmbedding, SparseEncoder};
pub use text_classifier::{Classification, TextClassifier};
pub use token_classifier::{AggregationStrategy, Entity, TokenClassifier, TokenClassifierOptions};
