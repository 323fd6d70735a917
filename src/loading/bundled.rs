//! The SST-2 sentiment model built into the crate (feature `bundled-sst2`): a 3-layer RoFormer
//! classifier of 4.3 M parameters in f16, distilled from a fine-tuned all-MiniLM-L6-v2 (see
//! `models/roformer-sst2/README.md`), so that the first three lines a user writes need no file and
//! no network.

use std::borrow::Cow;

use crate::error::Result;
use crate::loading::model_files::ModelFiles;

macro_rules! sst2_file {
    ($name:literal) => {
        (
            $name,
            include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/models/roformer-sst2/", $name)).as_slice(),
        )
    };
}

const SST2: [(&str, &[u8]); 4] = [
    sst2_file!("config.json"),
    sst2_file!("model.safetensors"),
    sst2_file!("tokenizer_config.json"),
    sst2_file!("vocab.txt"),
];

impl ModelFiles {
    /// The built-in SST-2 classifier's folder (labels `negative`, `positive`; 88.07% on SST-2 dev),
    /// read in place from the binary. Errors name it `bundled:roformer-sst2`.
    ///
    /// ```
    /// # fn main() -> roformer::Result<()> {
    /// let files = roformer::ModelFiles::bundled_sst2()?;
    /// let encoder = roformer::SentenceEncoder::from_files(&files, Default::default())?;
    /// assert_eq!(encoder.encode(&["a delight"])?[0].len(), 384);
    /// # Ok(())
    /// # }
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "bundled-sst2")))]
    pub fn bundled_sst2() -> Result<Self> {
        Self::from_memory("bundled:roformer-sst2", SST2.map(|(name, bytes)| (name, Cow::Borrowed(bytes))))
    }
}
