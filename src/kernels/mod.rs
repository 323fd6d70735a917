//! CPU kernels for inference in f32 (and int8 linears): the hot steps of a forward pass fused so
//! that each reads and writes its data once, without Candle's per-op dispatch.
//!
//! Every kernel reads contiguous f32 CPU tensors in place and returns a new tensor; the callers
//! use them only where [`fits`] holds (CPU, f32, nothing tracked for gradients) and fall back to
//! Candle's ops elsewhere (GPU, half precision, training). SIMD code paths are picked at run
//! time (AVX-512, AVX2 + FMA, or portable), so the crate needs no `target-cpu` flag.

pub(crate) mod attention;
pub(crate) mod int8;
pub(crate) mod linear;
pub(crate) mod math;
pub(crate) mod norm;
pub(crate) mod packed;

use std::ops::Range;

use candle_core::{CpuStorage, DType, Device, Result, Storage, Tensor};

/// Whether the fused kernels can take `xs`: f32 on the CPU, not tracked for gradients.
pub(crate) fn fits(xs: &Tensor) -> bool {
    xs.dtype() == DType::F32 && xs.device().is_cpu() && !xs.track_op()
}

/// The f32 elements of a contiguous CPU tensor, borrowed in place.
pub(crate) struct View<'a> {
    guard: candle_core::StorageRef<'a>,
    range: Range<usize>,
}

impl View<'_> {
    pub fn new(t: &Tensor) -> Result<View<'_>> {
        let (guard, layout) = t.storage_and_layout();
        let Some((start, end)) = layout.contiguous_offsets() else {
            candle_core::bail!("kernel input of shape {:?} is not contiguous", t.dims())
        };
        if !matches!(&*guard, Storage::Cpu(CpuStorage::F32(_))) {
            candle_core::bail!("kernel input is not f32 on the CPU")
        }
        Ok(View { guard, range: start..end })
    }

    pub fn slice(&self) -> &[f32] {
        match &*self.guard {
            Storage::Cpu(CpuStorage::F32(data)) => &data[self.range.clone()],
            _ => &[],
        }
    }
}

/// `len` floats written by `fill` through the pointer it gets, without zeroing them first.
///
/// # Safety
/// `fill` must write every one of the `len` elements before returning, and read none it has not
/// written.
pub(crate) unsafe fn written_by(len: usize, fill: impl FnOnce(*mut f32)) -> Vec<f32> {
    let mut data = Vec::with_capacity(len);
    fill(data.as_mut_ptr());
    // SAFETY: `fill` initialised all `len` elements, as the caller promises.
    unsafe { data.set_len(len) };
    data
}

/// A contiguous tensor of `dims` on the CPU.
pub(crate) fn tensor(data: Vec<f32>, dims: &[usize]) -> Result<Tensor> {
    Tensor::from_vec(data, dims, &Device::Cpu)
}

/// A raw pointer that crosses threads, for kernels whose tasks write disjoint parts of one buffer.
#[derive(Clone, Copy)]
pub(crate) struct SendPtr(pub *mut f32);

impl SendPtr {
    /// The pointer; a method, so that closures capture the whole `SendPtr`, not its field.
    pub fn get(self) -> *mut f32 {
        self.0
    }
}

// SAFETY: each kernel hands every task its own disjoint region of the buffer.
unsafe impl Send for SendPtr {}
unsafe impl Sync for SendPtr {}

/// The SIMD level of this CPU, detected once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Level {
    Portable,
    Avx2,
    Avx512,
}

pub(crate) fn level() -> Level {
    use std::sync::OnceLock;
    static LEVEL: OnceLock<Level> = OnceLock::new();
    *LEVEL.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx512f")
                && std::arch::is_x86_feature_detected!("avx512bw")
                && std::arch::is_x86_feature_detected!("avx512vl")
                && std::arch::is_x86_feature_detected!("avx512dq")
                && std::arch::is_x86_feature_detected!("fma")
            {
                return Level::Avx512;
            }
            if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
                return Level::Avx2;
            }
        }
        Level::Portable
    })
}

/// Defines `$name` three times, compiled for AVX-512, for AVX2 + FMA and portably, and calls the
/// one this CPU runs. The body is plain Rust that the compiler vectorises for each target.
macro_rules! multiversion {
    ($(#[$meta:meta])* $vis:vis fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)? $body:block) => {
        $(#[$meta])*
        $vis fn $name($($arg: $ty),*) $(-> $ret)? {
            #[inline(always)]
            fn body($($arg: $ty),*) $(-> $ret)? $body
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")]
                unsafe fn avx512($($arg: $ty),*) $(-> $ret)? { body($($arg),*) }
                #[target_feature(enable = "avx2,fma")]
                unsafe fn avx2($($arg: $ty),*) $(-> $ret)? { body($($arg),*) }
                match $crate::kernels::level() {
                    // SAFETY: the CPU has the features each variant is compiled for.
                    $crate::kernels::Level::Avx512 => return unsafe { avx512($($arg),*) },
                    $crate::kernels::Level::Avx2 => return unsafe { avx2($($arg),*) },
                    $crate::kernels::Level::Portable => {}
                }
            }
            body($($arg),*)
        }
    };
}
pub(crate) use multiversion;
