//! `roformer_rs._native`: the roformer crate's pipelines for Python. The package around it
//! (`python/roformer_rs/`) gives them sentence-transformers' and transformers' interfaces; this
//! module does the work, without the GIL.
//!
//! - `errors`: the exception classes and how the crate's errors map onto them;
//! - `inputs`: texts and pairs read from Python objects, each wrong item named by its index;
//! - `load`: the loading options every class takes (`load::Load`);
//! - `batches`: a call's inputs run batch by batch, the GIL released for each and taken between
//!   them for Ctrl-C and the progress bar;
//! - `encoders`: `SentenceEncoder`, `CrossEncoder`, `SparseEncoder` (sentence-transformers);
//! - `tasks`: the transformers pipelines' models (text and token classification, question
//!   answering, fill-mask) and the `Paraphraser`.

mod batches;
mod encoders;
mod errors;
mod inputs;
mod load;
mod tasks;

use pyo3::prelude::*;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::register(m)?;
    m.add_class::<load::Load>()?;
    m.add_class::<encoders::SentenceEncoder>()?;
    m.add_class::<encoders::CrossEncoder>()?;
    m.add_class::<encoders::SparseEncoder>()?;
    m.add_class::<tasks::TextClassifier>()?;
    m.add_class::<tasks::TokenClassifier>()?;
    m.add_class::<tasks::QuestionAnswerer>()?;
    m.add_class::<tasks::FillMask>()?;
    m.add_class::<tasks::Paraphraser>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
