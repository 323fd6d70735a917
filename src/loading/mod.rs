//! Everything read from or written to a checkpoint folder: `config` (config.json), `checkpoint`
//! (the weights), `layout` (the weight-file names, the shard index and the names a folder may
//! hold), `json` (optional JSON files), `hub` (a folder fetched by Hugging Face Hub id into the
//! shared cache) and `tokenizer` (vocab.txt, tokenizer.json and tokenizer_config.json).

pub(crate) mod checkpoint;
pub(crate) mod config;
pub(crate) mod hub;
pub(crate) mod json;
pub(crate) mod layout;
pub(crate) mod tokenizer;
