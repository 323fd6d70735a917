//! The integration tests, in one binary: one link instead of one per file.

mod support;

mod api;
mod bad_input;
mod bundled_model;

mod examples;
mod families;
mod fuzz;
mod generation;
mod hub;
mod levels;
mod model_behaviour;
mod model_files;
mod model_parity;
mod ner_qa;
mod pipelines;
mod quantization;
mod sentence_transformers;
mod tokenized;
mod tokenizer_behaviour;
mod tokenizer_parity;
mod training;

/// The examples' own GLUE code (tasks, TSV reading, metrics), tested here as the examples use it.
#[path = "../../examples/common/mod.rs"]
mod app;
