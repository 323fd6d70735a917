//! A safetensors file read tensor by tensor: the header once, then each tensor's bytes straight
//! into the buffer its tensor keeps. Nothing is mapped and nothing else is held, so loading a
//! model costs what the model keeps plus the one tensor being converted (not the whole file, as
//! a memory map's touched pages would be).

use std::collections::HashMap;

use candle_core::{Device, Tensor};
use safetensors::tensor::{Dtype, Metadata, TensorInfo};

use crate::loading::model_files::RangedBytes;

/// The most header bytes read before anything is allocated for them: safetensors' own limit.
const MAX_HEADER: u64 = 100_000_000;

/// One safetensors file: its tensors' places, and the bytes they are read from.
pub(crate) struct SafetensorsFile {
    bytes: Box<dyn RangedBytes>,
    tensors: HashMap<String, TensorInfo>,
    /// Where the data section starts: after the length prefix and the header.
    data_start: u64,
}

impl SafetensorsFile {
    /// Reads and checks the header of `bytes`: every tensor's offsets inside the file, one after
    /// the other, the sizes their shapes and dtypes give, and the file exactly as long as that.
    pub fn open(bytes: Box<dyn RangedBytes>) -> Result<Self, String> {
        let file_len = bytes.len();
        let mut prefix = [0u8; 8];
        if file_len < 8 {
            return Err(format!("{file_len} bytes: shorter than the 8-byte header length"));
        }
        bytes.read_at(0, &mut prefix).map_err(|e| e.to_string())?;
        let header_len = u64::from_le_bytes(prefix);
        if header_len > MAX_HEADER || header_len > file_len - 8 {
            return Err(format!("invalid header length {header_len} in a file of {file_len} bytes"));
        }
        let mut header = vec![0u8; header_len as usize];
        bytes.read_at(8, &mut header).map_err(|e| e.to_string())?;
        let text = std::str::from_utf8(&header).map_err(|e| format!("header is not UTF-8: {e}"))?;
        // `Metadata` checks the offsets against the shapes and dtypes as it parses.
        let metadata: Metadata = serde_json::from_str(text).map_err(|e| format!("invalid header: {e}"))?;
        let data_start = 8 + header_len;
        let data_len = metadata.data_len() as u64;
        if data_start + data_len != file_len {
            return Err(format!(
                "the header describes {data_len} bytes of tensors, and the file holds {}",
                file_len - data_start
            ));
        }
        let tensors = metadata.tensors().into_iter().map(|(name, info)| (name, info.clone())).collect();
        Ok(Self { bytes, tensors, data_start })
    }

    /// Every tensor name.
    pub fn names(&self) -> impl Iterator<Item = &String> {
        self.tensors.keys()
    }

    /// Tensor `name` on the CPU, in its stored dtype, read from the file into its own buffer.
    pub fn load(&self, name: &str) -> candle_core::Result<Tensor> {
        let info = self
            .tensors
            .get(name)
            .ok_or_else(|| candle_core::Error::Msg(format!("no tensor `{name}` in the file")))?;
        let offset = self.data_start + info.data_offsets.0 as u64;
        let shape = info.shape.clone();
        let elements: usize = shape.iter().product();
        match info.dtype {
            Dtype::F32 => Tensor::from_vec(self.read::<f32>(offset, elements)?, shape, &Device::Cpu),
            Dtype::F16 => Tensor::from_vec(self.read::<half::f16>(offset, elements)?, shape, &Device::Cpu),
            Dtype::BF16 => Tensor::from_vec(self.read::<half::bf16>(offset, elements)?, shape, &Device::Cpu),
            Dtype::F64 => Tensor::from_vec(self.read::<f64>(offset, elements)?, shape, &Device::Cpu),
            // Every weight of a RoFormer is a float: integer bytes would be converted silently.
            other => {
                Err(candle_core::Error::Msg(format!("is stored as {other:?}, but it is a float weight")))
            }
        }
    }

    /// `elements` values of `T`, stored little-endian from `offset`.
    fn read<T: Plain>(&self, offset: u64, elements: usize) -> candle_core::Result<Vec<T>> {
        let mut values = vec![T::default(); elements];
        // SAFETY: `T` is a plain number type (`Plain`): every byte pattern is a valid value, and
        // it has no padding, so its `elements * size_of::<T>()` bytes may be written as bytes.
        // The slice covers exactly the vector's initialised elements and is dropped before
        // `values` is used again.
        let bytes = unsafe {
            std::slice::from_raw_parts_mut(
                values.as_mut_ptr().cast::<u8>(),
                std::mem::size_of_val(&values[..]),
            )
        };
        self.bytes.read_at(offset, bytes).map_err(|e| candle_core::Error::Msg(e.to_string()))?;
        if cfg!(target_endian = "big") {
            values.iter_mut().for_each(T::le_to_native);
        }
        Ok(values)
    }
}

/// The number types a tensor is read into: no padding, and every bit pattern a value.
trait Plain: Copy + Default + candle_core::WithDType {
    /// Turns a value read in little-endian order into the machine's.
    fn le_to_native(&mut self);
}

macro_rules! plain {
    ($($t:ty => $bits:ty),+) => {$(
        impl Plain for $t {
            fn le_to_native(&mut self) {
                *self = <$t>::from_bits(<$bits>::from_le(self.to_bits()));
            }
        }
    )+};
}
plain!(f32 => u32, f64 => u64, half::f16 => u16, half::bf16 => u16);
