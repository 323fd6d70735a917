//! Intel AMX, the tile unit of Xeons since Sapphire Rapids: whether this process may use it, and
//! the int8 tile program of the `amx` level.
//!
//! The unit is a file of its own, not a module of `tile_int8`: its kernel is a program over eight
//! 1 KiB tile registers that it configures, loads, multiplies and stores, unlike the register
//! tiles of the other levels, and its detection and permission are the unit's, not a precision's.
//!
//! The program is written once, over [`TileUnit`]: [`Tmm`] runs it on the unit through `asm!`
//! (the AMX intrinsics are nightly-only in Rust 1.95), and [`Model`] runs it in plain Rust, with
//! the instructions' arithmetic on arrays, so that its packing, blocking and edge handling are
//! tested on every CPU, and on an AMX CPU the two are held equal bit for bit.
//!
//! The int8 program computes 32 × 32 of `c` per call: two A tiles (16 rows of 64 u8 inputs each),
//! two B tiles (16 steps of 4 k for 16 columns each, read in place from the AVX-512 VNNI kernel's
//! packed panels, whose steps are 128 bytes: so one packed weight serves both kernels), and four
//! accumulators, as ONNX Runtime's MLAS and oneDNN block it. The sums are the exact i32 ones
//! `vpdpbusd` gives, and the epilogue is the VNNI kernel's, so the outputs are bit-identical.

// Elsewhere only the tests run the program (on the model unit).
#![cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]

/// Rows of a tile register.
const ROWS: usize = 16;
/// Bytes of a tile register's row.
const ROW_BYTES: usize = 64;
/// Bytes of one step (4 k) of a 32-column packed weight panel.
const PANEL_STEP: usize = 32 * 4;

/// Whether this process may run AMX-INT8 and AMX-BF16: the CPU says so (CPUID leaf 7), the OS saves the tile
/// state (XCR0), the unit has the palette this program configures (leaf 0x1D: some hypervisors
/// advertise AMX with none, and every tile instruction then faults), and Linux granted the
/// permission. Decided once per process.
#[cfg(target_arch = "x86_64")]
pub(crate) fn usable() -> bool {
    use std::sync::OnceLock;
    static USABLE: OnceLock<bool> = OnceLock::new();
    *USABLE.get_or_init(|| advertised() && permitted())
}

/// What CPUID and XCR0 say, before asking the OS.
#[cfg(target_arch = "x86_64")]
fn advertised() -> bool {
    use std::arch::x86_64::{__cpuid, __cpuid_count, _xgetbv};
    let max_leaf = __cpuid(0).eax;
    // OSXSAVE (leaf 1, ECX bit 27): XGETBV exists and the OS manages extended state.
    if max_leaf < 0x1D || __cpuid(1).ecx & (1 << 27) == 0 {
        return false;
    }
    let leaf7 = __cpuid_count(7, 0).edx;
    // AMX-BF16 (bit 22), AMX-TILE (24), AMX-INT8 (25): every AMX CPU so far has all three, and
    // the level uses both products.
    if leaf7 & (0b1101 << 22) != 0b1101 << 22 {
        return false;
    }
    // SAFETY: OSXSAVE is set (checked above), so XGETBV exists; XCR0 is register 0.
    let xcr0 = unsafe { _xgetbv(0) };
    // XTILECFG (bit 17) and XTILEDATA (bit 18).
    if xcr0 & (0b11 << 17) != 0b11 << 17 {
        return false;
    }
    // Leaf 0x1D: the highest palette, then palette 1's geometry (bytes per row in EBX's low
    // half, tile names in its high half, rows in ECX's low half).
    if __cpuid_count(0x1D, 0).eax < 1 {
        return false;
    }
    let palette = __cpuid_count(0x1D, 1);
    let bytes_per_row = (palette.ebx & 0xFFFF) as usize;
    let names = (palette.ebx >> 16) as usize;
    let rows = (palette.ecx & 0xFFFF) as usize;
    bytes_per_row >= ROW_BYTES && names >= 8 && rows >= ROWS
}

/// Linux hands the tile data state (8 KiB per thread) only to a process that asks for it:
/// `arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)`, then `ARCH_GET_XCOMP_PERM` to read
/// back that it was granted, as oneDNN and ONNX Runtime do. Without it the first tile
/// instruction raises SIGILL. Asked once, from [`usable`].
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
fn permitted() -> bool {
    const ARCH_GET_XCOMP_PERM: u64 = 0x1022;
    const ARCH_REQ_XCOMP_PERM: u64 = 0x1023;
    const XFEATURE_XTILEDATA: u64 = 18;
    /// The arch_prctl system call, its result as the kernel returns it.
    ///
    /// # Safety
    /// `argument` is an integer the call reads as one, or a pointer to memory it may write as
    /// `code` says.
    unsafe fn arch_prctl(code: u64, argument: u64) -> i64 {
        const ARCH_PRCTL: i64 = 158;
        let result: i64;
        // SAFETY: what the call touches the caller vouches for; `syscall` clobbers rcx and r11,
        // named here, and the kernel returns in rax.
        unsafe {
            std::arch::asm!(
                "syscall",
                inlateout("rax") ARCH_PRCTL => result,
                in("rdi") code,
                in("rsi") argument,
                lateout("rcx") _,
                lateout("r11") _,
                options(nostack)
            )
        };
        result
    }
    // SAFETY: the request takes an integer and touches no memory of ours.
    if unsafe { arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) } != 0 {
        return false;
    }
    let mut granted: u64 = 0;
    // SAFETY: the kernel writes the permitted feature mask, one u64, through the pointer, which
    // points at `granted`, alive for the call.
    let read = unsafe { arch_prctl(ARCH_GET_XCOMP_PERM, &mut granted as *mut u64 as u64) };
    read == 0 && granted & (1 << XFEATURE_XTILEDATA) != 0
}

/// Other systems: not used (macOS has no AMX CPUs; Windows is untested here).
#[cfg(all(target_arch = "x86_64", not(target_os = "linux")))]
fn permitted() -> bool {
    false
}

/// The tile instructions the program uses. Tiles are named by number: 0 and 1 hold A, 2 and 3
/// hold B, 4 to 7 the accumulators (`C[i][j]` in tile 4 + 2i + j). Every tile is 16 rows of 64
/// bytes. Loads and stores take slices and check them, so that the program cannot reach outside
/// its operands on either unit.
pub(crate) trait TileUnit {
    /// Tile `T` = 0.
    fn zero<const T: usize>(&mut self);
    /// Tile `T` = the 16 rows of 64 bytes at `src[offset + r · stride..]`.
    fn load<const T: usize>(&mut self, src: &[u8], offset: usize, stride: usize);
    /// Tile `C` += tile `A` · tile `B` as `dot` says: 16 × 16 i32 sums of 16 rows of 64 u8 by 16
    /// steps of 4 k by 16 columns of s8 (`tdpbusd`), or 16 × 16 f32 sums of 16 rows of 32 bf16
    /// by 16 steps of 2 k by 16 columns of bf16 (`tdpbf16ps`).
    fn dot<const C: usize, const A: usize, const B: usize>(&mut self, dot: Dot);
    /// The 16 × 16 i32 of tile `T` to `dst[offset + r · stride..]` (in i32).
    fn store<const T: usize>(&mut self, dst: &mut [i32], offset: usize, stride: usize);
}

/// The product a tile program runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dot {
    /// u8 × s8 into i32, 4 k per lane.
    U8S8,
    /// bf16 × bf16 into f32, 2 k per lane.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    Bf16,
}

/// Panics unless 16 rows of `row` elements, `stride` apart from `offset`, lie inside `len`.
fn check_rows(len: usize, offset: usize, stride: usize, row: usize) {
    assert!(stride >= row && offset + (ROWS - 1) * stride + row <= len, "tile rows outside the operand");
}

/// The tile unit itself, configured for this thread.
#[cfg(target_arch = "x86_64")]
pub(crate) struct Tmm(());

#[cfg(target_arch = "x86_64")]
impl Tmm {
    /// The unit, with this thread's tile configuration loaded on first use (the configuration
    /// is per thread and kept until the thread ends: nothing else in the process configures it).
    ///
    /// # Safety
    /// [`usable`] is true.
    pub unsafe fn configured() -> Tmm {
        thread_local! {
            static CONFIGURED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
        }
        if !CONFIGURED.get() {
            // Palette 1; bytes 16..32 the bytes per row of each tile (u16), 48..56 its rows.
            #[repr(C, align(64))]
            struct Config([u8; 64]);
            let mut config = Config([0; 64]);
            config.0[0] = 1;
            for t in 0..8 {
                config.0[16 + 2 * t] = ROW_BYTES as u8;
                config.0[48 + t] = ROWS as u8;
            }
            // SAFETY: the caller checked that the unit is usable; `ldtilecfg` reads the 64 bytes
            // of `config`, which is 64-byte aligned and alive for the instruction.
            unsafe {
                std::arch::asm!("ldtilecfg [{}]", in(reg) config.0.as_ptr(), options(nostack, readonly))
            };
            CONFIGURED.set(true);
        }
        Tmm(())
    }
}

/// One `asm!` per tile register, picked by a constant (tile registers cannot be operands).
#[cfg(target_arch = "x86_64")]
macro_rules! on_tile {
    ($t:expr, $($n:literal => $body:expr),*) => {
        match $t {
            $($n => $body,)*
            _ => unreachable!("tiles are 0 to 7"),
        }
    };
}

#[cfg(target_arch = "x86_64")]
impl TileUnit for Tmm {
    #[inline(always)]
    fn zero<const T: usize>(&mut self) {
        macro_rules! zero {
            ($tmm:tt) => {
                // SAFETY: a `Tmm` exists only where the unit is usable and configured.
                unsafe { std::arch::asm!(concat!("tilezero ", $tmm), out($tmm) _, options(nostack, nomem)) }
            };
        }
        on_tile!(T, 0 => zero!("tmm0"), 1 => zero!("tmm1"), 2 => zero!("tmm2"), 3 => zero!("tmm3"),
            4 => zero!("tmm4"), 5 => zero!("tmm5"), 6 => zero!("tmm6"), 7 => zero!("tmm7"))
    }

    #[inline(always)]
    fn load<const T: usize>(&mut self, src: &[u8], offset: usize, stride: usize) {
        check_rows(src.len(), offset, stride, ROW_BYTES);
        let base = src[offset..].as_ptr();
        macro_rules! load {
            ($tmm:tt) => {
                // SAFETY: the unit is usable and configured (a `Tmm` exists); the 16 rows of
                // 64 bytes it reads lie inside `src` (checked above).
                unsafe {
                    std::arch::asm!(
                        concat!("tileloadd ", $tmm, ", [{base} + {stride}*1]"),
                        base = in(reg) base,
                        stride = in(reg) stride,
                        out($tmm) _,
                        options(nostack, readonly)
                    )
                }
            };
        }
        on_tile!(T, 0 => load!("tmm0"), 1 => load!("tmm1"), 2 => load!("tmm2"), 3 => load!("tmm3"),
            4 => load!("tmm4"), 5 => load!("tmm5"), 6 => load!("tmm6"), 7 => load!("tmm7"))
    }

    #[inline(always)]
    fn dot<const C: usize, const A: usize, const B: usize>(&mut self, dot: Dot) {
        macro_rules! dot {
            ($op:tt, $c:tt, $a:tt, $b:tt) => {
                // SAFETY: registers only; the unit is usable and configured (a `Tmm` exists),
                // and `usable` checked AMX-INT8 and AMX-BF16 both.
                unsafe {
                    std::arch::asm!(
                        concat!($op, " ", $c, ", ", $a, ", ", $b),
                        out($c) _,
                        options(nostack, nomem)
                    )
                }
            };
        }
        macro_rules! tiles {
            ($op:tt) => {
                match (C, A, B) {
                    (4, 0, 2) => dot!($op, "tmm4", "tmm0", "tmm2"),
                    (5, 0, 3) => dot!($op, "tmm5", "tmm0", "tmm3"),
                    (6, 1, 2) => dot!($op, "tmm6", "tmm1", "tmm2"),
                    (7, 1, 3) => dot!($op, "tmm7", "tmm1", "tmm3"),
                    _ => unreachable!(
                        "the program multiplies C[i][j] = tile 4 + 2i + j by A tile i and B tile 2 + j"
                    ),
                }
            };
        }
        match dot {
            Dot::U8S8 => tiles!("tdpbusd"),
            Dot::Bf16 => tiles!("tdpbf16ps"),
        }
    }

    #[inline(always)]
    fn store<const T: usize>(&mut self, dst: &mut [i32], offset: usize, stride: usize) {
        check_rows(dst.len(), offset, stride, ROWS);
        let (base, stride) = (dst[offset..].as_mut_ptr(), stride * 4);
        macro_rules! store {
            ($tmm:tt) => {
                // SAFETY: the unit is usable and configured (a `Tmm` exists); the 16 rows of 16
                // i32 it writes lie inside `dst` (checked above), which we borrow mutably.
                unsafe {
                    std::arch::asm!(
                        concat!("tilestored [{base} + {stride}*1], ", $tmm),
                        base = in(reg) base,
                        stride = in(reg) stride,
                        options(nostack)
                    )
                }
            };
        }
        on_tile!(T, 0 => store!("tmm0"), 1 => store!("tmm1"), 2 => store!("tmm2"), 3 => store!("tmm3"),
            4 => store!("tmm4"), 5 => store!("tmm5"), 6 => store!("tmm6"), 7 => store!("tmm7"))
    }
}

/// The tile unit in plain Rust: eight 16 × 64-byte tiles and the instructions' arithmetic, for
/// testing the program on any CPU.
#[cfg(test)]
pub(crate) struct Model {
    tiles: [[[u8; ROW_BYTES]; ROWS]; 8],
}

#[cfg(test)]
impl Model {
    pub fn new() -> Self {
        // Whatever an unconfigured unit holds: never read by a correct program before it is
        // written, and not zero, so that a program that forgets `zero` fails.
        Model { tiles: [[[0xA5; ROW_BYTES]; ROWS]; 8] }
    }

    fn i32_at(&self, t: usize, r: usize, j: usize) -> i32 {
        i32::from_le_bytes(self.tiles[t][r][4 * j..4 * j + 4].try_into().expect("4 bytes"))
    }
}

#[cfg(test)]
impl TileUnit for Model {
    fn zero<const T: usize>(&mut self) {
        self.tiles[T] = [[0; ROW_BYTES]; ROWS];
    }

    fn load<const T: usize>(&mut self, src: &[u8], offset: usize, stride: usize) {
        check_rows(src.len(), offset, stride, ROW_BYTES);
        for (r, row) in self.tiles[T].iter_mut().enumerate() {
            row.copy_from_slice(&src[offset + r * stride..][..ROW_BYTES]);
        }
    }

    fn dot<const C: usize, const A: usize, const B: usize>(&mut self, dot: Dot) {
        let bf16 = |tile: &[u8; ROW_BYTES], i: usize| {
            f32::from_bits(u32::from(tile[i]) << 16 | u32::from(tile[i + 1]) << 24)
        };
        for r in 0..ROWS {
            for j in 0..16 {
                let mut sum = self.i32_at(C, r, j);
                for q in 0..16 {
                    let (a, b) = (&self.tiles[A][r], &self.tiles[B][q]);
                    match dot {
                        Dot::U8S8 => {
                            for i in 0..4 {
                                sum =
                                    sum.wrapping_add(i32::from(a[4 * q + i]) * i32::from(b[4 * j + i] as i8));
                            }
                        }
                        Dot::Bf16 => {
                            // The products of two bf16 are exact in f32; each sum rounds.
                            let mut acc = f32::from_bits(sum as u32);
                            for i in [0, 2] {
                                acc += bf16(a, 4 * q + i) * bf16(b, 4 * j + i);
                            }
                            sum = acc.to_bits() as i32;
                        }
                    }
                }
                self.tiles[C][r][4 * j..4 * j + 4].copy_from_slice(&sum.to_le_bytes());
            }
        }
    }

    fn store<const T: usize>(&mut self, dst: &mut [i32], offset: usize, stride: usize) {
        check_rows(dst.len(), offset, stride, ROWS);
        for r in 0..ROWS {
            for j in 0..16 {
                dst[offset + r * stride + j] = self.i32_at(T, r, j);
            }
        }
    }
}

/// Runs `f` on this thread's buffer for a tile program's 32 × 32 sums, whose contents are
/// whatever the last tile left: the program stores every sum the epilogue reads (rows past 16 only
/// when it has them). A fresh zeroed 4 KiB array per call cost as much as the epilogue.
pub(crate) fn with_sums<R>(f: impl FnOnce(&mut [i32; 32 * 32]) -> R) -> R {
    /// On 64-byte lines: each stored tile row is then one line, where an i32 array's alignment of
    /// 4 split most rows across two, for the stores and the epilogue's loads both.
    #[repr(C, align(64))]
    struct Sums([i32; 32 * 32]);
    thread_local! {
        static SUMS: std::cell::RefCell<Sums> = const { std::cell::RefCell::new(Sums([0; 32 * 32])) };
    }
    SUMS.with(|sums| f(&mut sums.borrow_mut().0))
}

/// Int8 multiply-adds per second, in trillions, of `tdpbusd` on tiles loaded once (four
/// accumulators from two A and two B tiles), on the calling thread: the unit's peak.
#[cfg(target_arch = "x86_64")]
pub(crate) fn int8_peak() -> f64 {
    let zeros = [0u8; ROWS * ROW_BYTES];
    // SAFETY: `int8_peak` is reached only where `usable` is true.
    let mut unit = unsafe { Tmm::configured() };
    unit.zero::<4>();
    unit.zero::<5>();
    unit.zero::<6>();
    unit.zero::<7>();
    unit.load::<0>(&zeros, 0, ROW_BYTES);
    unit.load::<1>(&zeros, 0, ROW_BYTES);
    unit.load::<2>(&zeros, 0, ROW_BYTES);
    unit.load::<3>(&zeros, 0, ROW_BYTES);
    let iterations = 2_000_000u64;
    let start = std::time::Instant::now();
    // SAFETY: the unit is configured (`unit` exists); the loop runs `tdpbusd` on registers only
    // and counts down its own register.
    unsafe {
        std::arch::asm!(
            "2:",
            "tdpbusd tmm4, tmm0, tmm2",
            "tdpbusd tmm5, tmm0, tmm3",
            "tdpbusd tmm6, tmm1, tmm2",
            "tdpbusd tmm7, tmm1, tmm3",
            "dec {n}",
            "jnz 2b",
            n = inout(reg) iterations => _,
            out("tmm4") _,
            out("tmm5") _,
            out("tmm6") _,
            out("tmm7") _,
            options(nostack, nomem)
        )
    };
    let seconds = start.elapsed().as_secs_f64();
    // Each instruction: 16 × 16 outputs of 64 multiply-adds.
    iterations as f64 * 4.0 * (16.0 * 16.0 * 64.0) / seconds / 1e12
}

/// The int8 tile program's own rates (K = 768, without quantizing or the epilogue, zeroing and
/// storing its accumulators on every call as the product does), in int8 TMAC/s on the calling
/// thread: what the program's shape allows, beside [`amx_int8_peak`](super::probe::amx_int8_peak).
#[derive(Debug, Clone, Copy)]
pub struct ProgramRates {
    /// On operands that stay in L1: one 32-row tile of inputs and one weight panel.
    pub l1: f64,
    /// On inputs from L2: a block of 8 input tiles (192 KiB) against one weight panel, as a
    /// product's task runs them.
    pub l2_inputs: f64,
    /// The L1 program's tile loads alone, counted as the products they would feed.
    pub loads: f64,
}

/// [`sums`] at K = 768 in int8 TMAC/s on the calling thread: over operands that stay in L1 (one
/// 32-row input tile, one weight panel); over inputs from L2 (a product's block of 8 input tiles,
/// 192 KiB, one after another against the same panel, as the product's tasks run them); and the
/// rate the same tile loads alone allow, as the multiply-adds they would feed.
#[cfg(target_arch = "x86_64")]
pub(crate) fn int8_program_rates() -> ProgramRates {
    const STEPS: usize = 768 / 4;
    const TILES: usize = 8;
    let lda = STEPS * 4;
    // On 64-byte lines, as the product's packed operands are: a tile row across two lines loads
    // both.
    let (mut a, mut b) = (
        super::layout::Aligned::<u8>::zeros(TILES * 32 * lda),
        super::layout::Aligned::<u8>::zeros(STEPS * PANEL_STEP),
    );
    a.as_mut_slice().fill(1);
    b.as_mut_slice().fill(1);
    let (a, b) = (a.as_slice(), b.as_slice());
    // SAFETY: `int8_program_rates` is reached only where `usable` is true.
    let mut unit = unsafe { Tmm::configured() };
    let calls = 20_000;
    let macs = calls as f64 * (32.0 * 32.0 * 768.0);
    let mut program = |tiles: usize| {
        let start = std::time::Instant::now();
        with_sums(|acc| {
            for call in 0..calls {
                let tile = &a[(call % tiles) * 32 * lda..][..32 * lda];
                sums(&mut unit, Dot::U8S8, Operands { a: tile, b, steps: STEPS, rows: 32 }, acc);
                std::hint::black_box(&mut *acc);
            }
        });
        macs / start.elapsed().as_secs_f64() / 1e12
    };
    let (l1, l2_inputs) = (program(1), program(TILES));
    let start = std::time::Instant::now();
    for _ in 0..calls {
        for chunk in 0..lda / ROW_BYTES {
            unit.load::<0>(a, chunk * ROW_BYTES, lda);
            unit.load::<2>(b, chunk * ROWS * PANEL_STEP, PANEL_STEP);
            unit.load::<3>(b, chunk * ROWS * PANEL_STEP + ROW_BYTES, PANEL_STEP);
            unit.load::<1>(a, ROWS * lda + chunk * ROW_BYTES, lda);
        }
    }
    let loads = macs / start.elapsed().as_secs_f64() / 1e12;
    ProgramRates { l1, l2_inputs, loads }
}

/// The bytes of a slice of plain integers.
pub(crate) fn as_bytes<T: Copy>(data: &[T]) -> &[u8] {
    // SAFETY: every caller passes u32, u16 or i8 slices: initialised, without padding, and any
    // byte pattern is a u8; u8's alignment is 1.
    unsafe { std::slice::from_raw_parts(data.as_ptr().cast::<u8>(), std::mem::size_of_val(data)) }
}

/// The tile program: up to 32 rows by 32 columns of 32-bit sums (i32 or f32 bits) of `tile`, row r
/// column j at `acc[32 r + j]`.
#[inline(always)]
pub(crate) fn sums(unit: &mut impl TileUnit, dot: Dot, tile: Operands, acc: &mut [i32; 32 * 32]) {
    sums_over(unit, dot, tile, 0..chunks(tile.steps), false, acc)
}

/// Chunks of 16 steps (one tile row of each input row) in a depth of `steps`, the last padded.
fn chunks(steps: usize) -> usize {
    super::layout::row_dwords(steps) * 4 / ROW_BYTES
}

/// One tile's operands, as [`sums`] takes them.
#[derive(Clone, Copy)]
pub(crate) struct Operands<'a> {
    /// 32 rows of [`row_dwords`](super::layout::row_dwords)`(steps)` dwords (zero past the
    /// depth, where the weights are zero too).
    pub a: &'a [u8],
    /// A panel of `steps` steps of 32 columns (4 u8 or 2 bf16 each, 128 bytes a step).
    pub b: &'a [u8],
    pub steps: usize,
    /// The rows wanted: the first `rows` of the 32.
    pub rows: usize,
}

/// [`sums`] over the depth's `chunks` (of 16 steps) alone, from zero or, where `resume`, from
/// the sums in `acc` (which the chunks before left there): the same sums, bit for bit, as one
/// run over the chunks together.
#[inline(always)]
fn sums_over(
    unit: &mut impl TileUnit,
    dot: Dot,
    Operands { a, b, steps, rows }: Operands,
    chunks: std::ops::Range<usize>,
    resume: bool,
    acc: &mut [i32; 32 * 32],
) {
    let lda = super::layout::row_dwords(steps) * 4;
    assert!(a.len() >= 32 * lda && b.len() >= steps * PANEL_STEP, "tile program: operands do not fit");
    // The second row block only where the tile has rows for it: a short tile costs half.
    let two = rows > ROWS;
    if resume {
        let sums = as_bytes(&acc[..]);
        unit.load::<4>(sums, 0, 32 * 4);
        unit.load::<5>(sums, 16 * 4, 32 * 4);
        if two {
            unit.load::<6>(sums, 16 * 32 * 4, 32 * 4);
            unit.load::<7>(sums, (16 * 32 + 16) * 4, 32 * 4);
        }
    } else {
        unit.zero::<4>();
        unit.zero::<5>();
        if two {
            unit.zero::<6>();
            unit.zero::<7>();
        }
    }
    // The last chunk of a depth that is not a multiple of 16 steps reads its weights from a copy
    // padded with zero steps, so that no load passes the panel.
    // (Made only then: zeroing 2 KiB on every call was a twentieth of an int8 forward pass.)
    let mut tail = None;
    for chunk in chunks {
        let first = chunk * ROWS;
        let (weights, offset) = if first + ROWS <= steps {
            (b, first * PANEL_STEP)
        } else {
            let left = (steps - first) * PANEL_STEP;
            let tail = tail.insert([0u8; ROWS * PANEL_STEP]);
            tail[..left].copy_from_slice(&b[first * PANEL_STEP..][..left]);
            (&tail[..], 0)
        };
        unit.load::<0>(a, chunk * ROW_BYTES, lda);
        unit.load::<2>(weights, offset, PANEL_STEP);
        unit.load::<3>(weights, offset + ROW_BYTES, PANEL_STEP);
        unit.dot::<4, 0, 2>(dot);
        unit.dot::<5, 0, 3>(dot);
        if two {
            unit.load::<1>(a, ROWS * lda + chunk * ROW_BYTES, lda);
            unit.dot::<6, 1, 2>(dot);
            unit.dot::<7, 1, 3>(dot);
        }
    }
    unit.store::<4>(acc, 0, 32);
    unit.store::<5>(acc, 16, 32);
    if two {
        unit.store::<6>(acc, 16 * 32, 32);
        unit.store::<7>(acc, 16 * 32 + 16, 32);
    }
}

/// Chunks (of 16 steps) in a depth block of [`column_sums`].
const DEPTH_BLOCK: usize = 16;

/// Tiles whose sums [`column_sums`] keeps between depth blocks: a product's row block.
const COLUMN_TILES: usize = 8;

/// [`sums`] for several tiles against one panel, each tile's sums handed to `done` once complete.
/// A depth of 17 to 32 chunks (bf16 at K = 768 to 1024) runs in blocks of 16, every tile's first
/// block before any tile's second, so that the panel's block (32 KiB) is read from L1 by all the
/// tiles where the whole panel (48 to 64 KiB, L1's size and more) had come from L2 for each. On
/// this crate's AMX Xeon the bf16 program alone ran 22 to 25% faster so, and a 512 × 768 × 768
/// product 10 to 15%; at 48 and 96 chunks (K = 1536 and 3072) blocks ran as fast or up to 6%
/// slower, and int8 at K = 768 (12 chunks, its panel 24 KiB) 12% slower in two blocks
/// (docs/log/2026-11-amx-bf16.md): those run whole.
#[inline(always)]
pub(crate) fn column_sums<'a>(
    unit: &mut impl TileUnit,
    dot: Dot,
    tiles: impl ExactSizeIterator<Item = Operands<'a>> + Clone,
    mut done: impl FnMut(usize, &[i32; 32 * 32]),
) {
    let Some(first) = tiles.clone().next() else { return };
    let chunks = chunks(first.steps);
    if chunks <= DEPTH_BLOCK || chunks > 2 * DEPTH_BLOCK || tiles.len() == 1 {
        with_sums(|acc| {
            for (i, tile) in tiles.enumerate() {
                sums_over(unit, dot, tile, 0..chunks, false, acc);
                done(i, acc);
            }
        });
        return;
    }
    #[repr(C, align(64))]
    struct Column([[i32; 32 * 32]; COLUMN_TILES]);
    thread_local! {
        static COLUMN: std::cell::RefCell<Column> =
            const { std::cell::RefCell::new(Column([[0; 32 * 32]; COLUMN_TILES])) };
    }
    COLUMN.with(|column| {
        let accs = &mut column.borrow_mut().0;
        for first in (0..tiles.len()).step_by(COLUMN_TILES) {
            let group = || tiles.clone().skip(first).take(COLUMN_TILES);
            for (block, start) in (0..chunks).step_by(DEPTH_BLOCK).enumerate() {
                let run = start..(start + DEPTH_BLOCK).min(chunks);
                let last = run.end == chunks;
                for ((i, tile), acc) in (first..).zip(group()).zip(accs.iter_mut()) {
                    sums_over(unit, dot, tile, run.clone(), block > 0, acc);
                    if last {
                        done(i, acc);
                    }
                }
            }
        }
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::runtime::kernels::gemm::{PackedBf16, PackedI8};
    use crate::runtime::kernels::layout::Input;
    use crate::runtime::kernels::noise;
    #[cfg(target_arch = "x86_64")]
    use crate::runtime::kernels::not_run_here;
    use crate::runtime::kernels::tile_bf16::{Bf16Kernel, Bf16Tile};
    use crate::runtime::kernels::tile_int8::{I8Kernel, I8Tile};
    use crate::runtime::kernels::Level;

    /// The tile program on the model unit, written out by the scalar epilogue the portable
    /// kernel uses, so that the two give the same floats.
    unsafe fn model_tile(t: &I8Tile) {
        t.check_input(32, 32, Input::Rows.tile_dwords(t.steps, 32, 0));
        let mut acc = [0i32; 32 * 32];
        sums(&mut Model::new(), Dot::U8S8, t.operands(), &mut acc);
        for r in 0..t.rows {
            // SAFETY: row r of `c` is valid for `cols` writes (the caller).
            unsafe { t.store(r, &acc[32 * r..32 * r + 32]) };
        }
    }

    /// The int8 tile program on the model unit, for the tests of what calls the program.
    pub(crate) static MODEL: I8Kernel = I8Kernel::tile_program(model_tile);

    /// Shapes with one and two row blocks (past 512 rows), partial last tiles, depths of a partial
    /// chunk, whole chunks and whole chunks plus a tail, partial and several panels.
    const SHAPES: [(usize, usize, usize); 10] = [
        (1, 3, 1),
        (5, 64, 32),
        (16, 70, 45),
        (17, 128, 33),
        (32, 4, 64),
        (37, 200, 70),
        (100, 65, 31),
        (230, 768, 40),
        (64, 1000, 96),
        (530, 64, 33),
    ];

    fn run(packed: &PackedI8, m: usize, seed: u64) -> Vec<f32> {
        let (n, k) = packed.dims();
        // Mostly positive rows with exact zeros, as after GELU.
        let a: Vec<f32> = noise(m * k, seed)
            .into_iter()
            .enumerate()
            .map(|(j, v)| if j % 7 == 0 { 0.0 } else { v + 0.2 })
            .collect();
        let bias = noise(n, seed + 1);
        let mut c = vec![f32::NAN; m * n];
        // SAFETY: `c` holds m × n floats.
        unsafe { packed.matmul(&a, m, Some(&bias), c.as_mut_ptr()) };
        c
    }

    #[test]
    fn the_tile_program_on_the_model_unit_equals_the_portable_kernel() {
        for (i, &(m, k, n)) in SHAPES.iter().enumerate() {
            let w = noise(n * k, 50 + i as u64);
            let model = PackedI8::for_kernels(&MODEL, None, &w, n, k);
            let portable = PackedI8::new(Level::Portable, &w, n, k);
            let (got, want) = (run(&model, m, i as u64), run(&portable, m, i as u64));
            assert!(
                got.iter().zip(&want).all(|(g, w)| g.to_bits() == w.to_bits()),
                "({m}, {k}, {n}): the model's program differs from the portable kernel"
            );
        }
    }

    /// The bf16 tile program on the model unit, in depth blocks as the unit runs it.
    unsafe fn model_bf16_tiles(tiles: &[Bf16Tile]) {
        tiles.iter().for_each(|t| t.check(&MODEL_BF16));
        column_sums(&mut Model::new(), Dot::Bf16, tiles.iter().map(Bf16Tile::operands), |i, acc| {
            let t = &tiles[i];
            for r in 0..t.rows {
                let row: [f32; 32] = std::array::from_fn(|j| f32::from_bits(acc[32 * r + j] as u32));
                // SAFETY: row r of `c` is valid for `cols` writes (the caller).
                unsafe { t.store(r, &row) };
            }
        })
    }

    /// The bf16 tile program on the model unit, for the tests of what calls the program.
    pub(crate) static MODEL_BF16: Bf16Kernel = Bf16Kernel::tile_program(model_bf16_tiles);

    fn run_bf16(packed: &PackedBf16, m: usize, seed: u64) -> Vec<f32> {
        let (n, k) = packed.dims();
        let a = noise(m * k, seed);
        let bias = noise(n, seed + 1);
        let mut c = vec![f32::NAN; m * n];
        // SAFETY: `c` holds m × n floats.
        unsafe { packed.matmul(&a, m, Some(&bias), c.as_mut_ptr()) };
        c
    }

    /// The largest difference between two products, over the largest magnitude of the second.
    fn relative_gap(got: &[f32], want: &[f32]) -> f32 {
        let gap = got.iter().zip(want).fold(0f32, |m, (g, w)| m.max((g - w).abs()));
        gap / want.iter().fold(1e-6f32, |m, w| m.max(w.abs()))
    }

    #[test]
    fn the_bf16_tile_program_on_the_model_unit_matches_the_portable_kernel() {
        // The same rounded operands, summed in f32 in another order: within a few ulps of the
        // largest output.
        for (i, &(m, k, n)) in SHAPES.iter().enumerate() {
            let w = noise(n * k, 50 + i as u64);
            let model = PackedBf16::for_kernels(&MODEL_BF16, None, &w, n, k);
            let portable = PackedBf16::new(Level::Portable, &w, n, k);
            let gap = relative_gap(&run_bf16(&model, m, i as u64), &run_bf16(&portable, m, i as u64));
            assert!(
                gap < 1e-5,
                "({m}, {k}, {n}): the model's bf16 program is {gap} from the portable kernel"
            );
        }
    }

    /// On `unit`: tiles of random bf16 operands at `steps` (32 rows each but the last's 20)
    /// against one panel, each tile's sums from [`column_sums`] against those of one run.
    fn depth_blocks_on(unit: &mut impl TileUnit, name: &str) {
        // 24 and 32 chunks run in blocks, the second with a tail chunk; 10 tiles take two groups.
        for (steps, tiles) in [(384, 10), (500, 3), (200, 2)] {
            let lda = crate::runtime::kernels::layout::row_dwords(steps) * 4;
            let bf16 = |v: f32| super::super::tile_bf16::to_bf16(v).to_le_bytes();
            let a: Vec<u8> = noise(tiles * 32 * lda / 2, steps as u64).into_iter().flat_map(bf16).collect();
            let b: Vec<u8> = noise(steps * PANEL_STEP / 2, 1).into_iter().flat_map(bf16).collect();
            let rows = |t: usize| if t + 1 == tiles { 20 } else { 32 };
            let operands = (0..tiles).map(|t| Operands {
                a: &a[t * 32 * lda..][..32 * lda],
                b: &b,
                steps,
                rows: rows(t),
            });
            let whole: Vec<[i32; 32 * 32]> = operands
                .clone()
                .map(|o| {
                    let mut acc = [0i32; 32 * 32];
                    sums(unit, Dot::Bf16, o, &mut acc);
                    acc
                })
                .collect();
            let mut seen = vec![false; tiles];
            column_sums(unit, Dot::Bf16, operands, |i, acc| {
                assert_eq!(acc[..32 * rows(i)], whole[i][..32 * rows(i)], "{name}: steps {steps}, tile {i}");
                seen[i] = true;
            });
            assert!(seen.iter().all(|&s| s), "{name}: steps {steps}: every tile's sums are handed over");
        }
    }

    #[test]
    fn depth_blocks_give_the_sums_of_one_run_bit_for_bit() {
        depth_blocks_on(&mut Model::new(), "model");
        #[cfg(target_arch = "x86_64")]
        if Level::Amx.supported() {
            // SAFETY: the level is supported, so the unit is usable.
            depth_blocks_on(&mut unsafe { Tmm::configured() }, "unit");
        } else {
            println!(
                "amx level: this CPU (or its OS) cannot run it; depth blocks ran on the model unit only"
            );
        }
    }

    #[test]
    fn a_program_that_reads_past_its_operands_is_stopped() {
        let mut unit = Model::new();
        let short = [0u8; 15 * 64 + 63];
        let result = std::panic::catch_unwind(move || unit.load::<0>(&short, 0, 64));
        assert!(result.is_err());
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_amx_level_equals_avx512_vnni_bit_for_bit() {
        if !Level::Amx.supported() {
            not_run_here(
                "the amx level's int8 tiles (this CPU or its OS cannot run them; \
                 the model unit ran the program)",
            );
            return;
        }
        println!("amx level: the tile unit runs here");
        let vnni = I8Kernel::for_level(Level::Amx);
        let (amx, min_rows) = I8Kernel::tiles_for_level(Level::Amx).expect("the amx level has tiles");
        for (i, &(m, k, n)) in SHAPES.iter().enumerate() {
            let w = noise(n * k, 50 + i as u64);
            let reference = run(&PackedI8::new(Level::Avx512Vnni, &w, n, k), m, i as u64);
            // The level as it runs (tiles from `min_rows` rows), and tiles at every size.
            for tiles_from in [min_rows, 1] {
                let packed = PackedI8::for_kernels(vnni, Some((amx, tiles_from)), &w, n, k);
                let got = run(&packed, m, i as u64);
                assert!(
                    got.iter().zip(&reference).all(|(g, w)| g.to_bits() == w.to_bits()),
                    "({m}, {k}, {n}), tiles from {tiles_from} rows: amx differs from avx512-vnni"
                );
            }
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_amx_bf16_program_matches_avx512_bf16_and_the_model() {
        if !Level::Amx.supported() {
            not_run_here(
                "the amx level's bf16 tiles (this CPU or its OS cannot run them; \
                 the model unit ran the program)",
            );
            return;
        }
        let registers = Bf16Kernel::for_level(Level::Amx).expect("amx has bf16 instructions");
        let (amx, _) = Bf16Kernel::tiles_for_level(Level::Amx).expect("the amx level has tiles");
        for (i, &(m, k, n)) in SHAPES.iter().enumerate() {
            let w = noise(n * k, 50 + i as u64);
            let unit = run_bf16(&PackedBf16::for_kernels(registers, Some((amx, 1)), &w, n, k), m, i as u64);
            let vdpbf16ps = run_bf16(&PackedBf16::for_kernels(registers, None, &w, n, k), m, i as u64);
            let model = run_bf16(&PackedBf16::for_kernels(&MODEL_BF16, None, &w, n, k), m, i as u64);
            let (to_registers, to_model) = (relative_gap(&unit, &vdpbf16ps), relative_gap(&unit, &model));
            assert!(
                to_registers < 1e-5 && to_model < 1e-5,
                "({m}, {k}, {n}): amx bf16 is {to_registers} from avx512-bf16 and {to_model} from the model"
            );
        }
    }
}
