//! How the kernels' operands sit in memory: buffers whose first element is on a 64-byte line
//! (with a pool of spare ones between calls), and the two ways a tile's packed input holds its
//! rows. Below the kernels and their driver, which all read these: `gemm` packs into them, the
//! register tiles and the AMX tile program read them.

/// How a tile's packed input holds its rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Input {
    /// Lines of `a_stride` dwords, one per step, where the layout's `input_index` says: what the
    /// int8 register tiles below AVX-512 broadcast one row's 4 bytes at a time from.
    Lines,
    /// Row by row, each row's bytes together and padded to whole 64-byte tile rows: what a tile
    /// load reads, 16 rows at a time, and what the AVX-512 register tiles broadcast from. Their
    /// step is the same there for every row, so quantizing or rounding a row is a copy, where
    /// lines took a store per dword (5% of an int8 product on Zen 4).
    Rows,
}

impl Input {
    /// The dwords of one tile's packed input.
    pub fn tile_dwords(self, steps: usize, mr: usize, a_stride: usize) -> usize {
        match self {
            Input::Lines => steps * a_stride,
            Input::Rows => mr * row_dwords(steps),
        }
    }
}

/// Dwords of one row of [`Input::Rows`]: steps rounded up to whole 64-byte tile rows.
pub(crate) fn row_dwords(steps: usize) -> usize {
    steps.next_multiple_of(16)
}

/// A buffer whose first element sits on a 64-byte boundary, so that vector loads of whole lines
/// never straddle two (large `Vec`s start 16 bytes into a page), nor do the 64-byte rows of a tile
/// load: f32 for the f32 kernels, the packed weights and inputs of int8 and bf16 too.
#[derive(Debug, Default)]
pub(crate) struct Aligned<T = f32> {
    data: Vec<T>,
    offset: usize,
    len: usize,
}

impl<T: Copy + Default> Aligned<T> {
    /// Elements past `len` that the buffer holds, so that an aligned start always fits.
    const SPARE: usize = 64 / std::mem::size_of::<T>();

    pub fn zeros(len: usize) -> Self {
        Self::from_vec(vec![T::default(); len + Self::SPARE], len)
    }

    /// `len` elements in `data`, which must hold at least `len + SPARE`.
    fn from_vec(data: Vec<T>, len: usize) -> Self {
        let offset = data.as_ptr().align_offset(64).min(Self::SPARE - 1);
        Self { data, offset, len }
    }

    pub fn as_slice(&self) -> &[T] {
        &self.data[self.offset..self.offset + self.len]
    }

    pub fn as_mut_slice(&mut self) -> &mut [T] {
        &mut self.data[self.offset..self.offset + self.len]
    }
}

impl<T: Spare> Aligned<T> {
    /// A buffer of `len` elements from the pool of spare ones, contents unspecified (every use
    /// overwrites what it reads, or reads it only where it cannot matter); [`Aligned::recycle`]
    /// gives it back. Fresh multi-megabyte allocations cost page faults and zeroing on every call.
    pub fn scratch(len: usize) -> Self {
        // The smallest spare that fits: the first that fits could be a long input's key panels,
        // taken for a small table, and the panels then allocated again beside it.
        let spare = T::pool().lock().ok().and_then(|mut spare| {
            let fits = |v: &Vec<T>| v.len() >= len + Self::SPARE;
            let (i, _) = spare.iter().enumerate().filter(|(_, v)| fits(v)).min_by_key(|(_, v)| v.len())?;
            Some(spare.swap_remove(i))
        });
        Self::from_vec(spare.unwrap_or_else(|| vec![T::default(); len + Self::SPARE]), len)
    }

    /// Gives the buffer back to the pool. A full pool keeps its 8 largest: many threads' small
    /// task buffers must not push out a long input's panels, which every layer asks for again.
    pub fn recycle(self) {
        if let Ok(mut spare) = T::pool().lock() {
            if spare.len() < 8 {
                spare.push(self.data);
            } else if let Some((i, _)) = spare
                .iter()
                .enumerate()
                .min_by_key(|(_, v)| v.len())
                .filter(|(_, v)| v.len() < self.data.len())
            {
                spare[i] = self.data;
            }
        }
    }
}

/// Element types with a pool of spare buffers between calls: f32 for packing and panels, u32 for
/// int8's and bf16's packed inputs, u16 for attention's bf16 keys and values.
pub(crate) trait Spare: Copy + Default + 'static {
    fn pool() -> &'static std::sync::Mutex<Vec<Vec<Self>>>;
}

impl Spare for f32 {
    fn pool() -> &'static std::sync::Mutex<Vec<Vec<f32>>> {
        static SPARE: std::sync::Mutex<Vec<Vec<f32>>> = std::sync::Mutex::new(Vec::new());
        &SPARE
    }
}

impl Spare for u32 {
    fn pool() -> &'static std::sync::Mutex<Vec<Vec<u32>>> {
        static SPARE: std::sync::Mutex<Vec<Vec<u32>>> = std::sync::Mutex::new(Vec::new());
        &SPARE
    }
}

impl Spare for u16 {
    fn pool() -> &'static std::sync::Mutex<Vec<Vec<u16>>> {
        static SPARE: std::sync::Mutex<Vec<Vec<u16>>> = std::sync::Mutex::new(Vec::new());
        &SPARE
    }
}
