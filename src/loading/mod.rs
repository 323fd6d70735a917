//! Everything read from or written to a checkpoint folder: `config` (config.json), `checkpoint`
//! (the weights), `safetensors_file` (one safetensors file, read tensor by tensor), `layout` (the weight-file names, the shard index and the names a folder may
//! hold), `file_plan` (which files a fetched folder is asked for, in order), `json` (optional JSON files), `hub` (a folder fetched by Hugging Face Hub id into the
//! shared cache), `tokenizer` (vocab.txt, tokenizer.json and tokenizer_config.json),
//! `model_files` (a folder on disk or in memory, which every reader above goes through),
//! `remote` (a folder fetched file by file through an async fetch, as a browser does) and `bundled` (the SST-2 model built into the crate).

#[cfg(feature = "bundled-sst2")]
mod bundled;
pub(crate) mod checkpoint;
pub(crate) mod config;
mod file_plan;
pub(crate) mod hub;
pub(crate) mod json;
pub(crate) mod layout;
pub(crate) mod model_files;
mod remote;
mod safetensors_file;
pub(crate) mod tokenizer;
