//! What every RoFormer model is, the bare encoder and each task head on it: built from a
//! checkpoint's weights, with an encoder to reach and to quantize. [`Checkpoint::load`],
//! [`load_dir`] and the pipelines are generic over it, so a new head is its own file and one
//! `task_model!` line.
//!
//! `Checkpoint::load` and `load_dir` live here rather than in `loading/checkpoint.rs`: loading
//! sits below the model and knows no model type, so it hands a `VarBuilder` to a closure
//! (`Checkpoint::build`) and this file, which knows `TaskModel`, gives the closure.

use std::path::Path;

use candle_core::{DType, Device};
use candle_nn::VarBuilder;

use crate::error::Result;
use crate::loading::checkpoint::Checkpoint;
use crate::loading::config::Config;
use crate::model::roformer::RoFormerModel;
use crate::runtime::quantization::Quantization;

/// A RoFormer model: [`RoFormerModel`] or a task head on it.
///
/// ```
/// # #[cfg(feature = "bundled-sst2")]
/// # fn main() -> roformer::Result<()> {
/// use candle_core::{DType, Device};
/// use roformer::{Checkpoint, Config, ModelFiles, Quantization, RoFormerForSequenceClassification, TaskModel};
///
/// let files = ModelFiles::bundled_sst2()?;
/// let config = Config::from_files(&files)?;
/// let mut model: RoFormerForSequenceClassification =
///     Checkpoint::from_files(&files)?.load(&config, DType::F32, &Device::Cpu)?;
/// model.quantize(Quantization::Int8)?; // the encoder's linear layers; the head stays in f32
/// assert_eq!(model.roformer().config().hidden_size, 384);
/// # Ok(())
/// # }
/// # #[cfg(not(feature = "bundled-sst2"))]
/// # fn main() {}
/// ```
pub trait TaskModel: Sized {
    /// Builds the model from the weights under `vb`, a checkpoint's root (the head's inherent
    /// `load`).
    fn load(vb: VarBuilder, config: &Config) -> Result<Self>;

    /// The encoder under the head (the model itself for [`RoFormerModel`]).
    fn roformer(&self) -> &RoFormerModel;

    /// The encoder, to change in place.
    fn roformer_mut(&mut self) -> &mut RoFormerModel;

    /// Switches the encoder's linear layers to `quantization` (see [`RoFormerModel::quantize`]);
    /// heads stay in f32.
    fn quantize(&mut self, quantization: Quantization) -> Result<()> {
        self.roformer_mut().quantize(quantization)
    }
}

/// `impl TaskModel` for task heads that keep their encoder in a field `roformer` and have an
/// inherent `load(vb, config)`: each head file states only its type names.
macro_rules! task_model {
    ($($head:ty),+ $(,)?) => {$(
        impl $crate::model::task::TaskModel for $head {
            fn load(
                vb: candle_nn::VarBuilder,
                config: &$crate::loading::config::Config,
            ) -> $crate::error::Result<Self> {
                <$head>::load(vb, config)
            }

            fn roformer(&self) -> &$crate::model::roformer::RoFormerModel {
                &self.roformer
            }

            fn roformer_mut(&mut self) -> &mut $crate::model::roformer::RoFormerModel {
                &mut self.roformer
            }
        }
    )+};
}
pub(crate) use task_model;

impl TaskModel for RoFormerModel {
    fn load(vb: VarBuilder, config: &Config) -> Result<Self> {
        RoFormerModel::load(vb, config)
    }

    fn roformer(&self) -> &RoFormerModel {
        self
    }

    fn roformer_mut(&mut self) -> &mut RoFormerModel {
        self
    }
}

impl Checkpoint {
    /// Builds a model from these weights, converting them to `dtype` on `device`.
    ///
    /// Tensors the model does not use are reported as transformers does: a warning through the
    /// `log` crate naming them, and an error when they are encoder layers, since then the config
    /// disagrees with the weights (a `num_hidden_layers` too small, say).
    pub fn load<M: TaskModel>(&self, config: &Config, dtype: DType, device: &Device) -> Result<M> {
        self.build(dtype, device, std::any::type_name::<M>(), |vb| M::load(vb, config))
    }
}

/// Loads `config.json` and the weights of a checkpoint folder into model `M`.
pub fn load_dir<M: TaskModel>(dir: impl AsRef<Path>, dtype: DType, device: &Device) -> Result<M> {
    let dir = dir.as_ref();
    let config = Config::from_file(dir.join("config.json"))?;
    Checkpoint::open(dir)?.load(&config, dtype, device)
}
