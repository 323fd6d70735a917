//! Branch-free elementwise math, written so that the compiler vectorises it inside each
//! multiversioned kernel: every helper is `#[inline(always)]`. One kernel is here as well, the
//! in-place exact GELU, because it needs nothing above this file.

use super::multiversion;

/// The sum of `f(v)` over `values` in sixteen lanes, added up at the end: a plain fold keeps
/// its strict order and does not vectorise.
#[inline(always)]
pub(crate) fn lane_sum(values: &[f32], f: impl Fn(f32) -> f32) -> f32 {
    let mut lanes = [0f32; 16];
    let chunks = values.chunks_exact(16);
    let tail: f32 = chunks.remainder().iter().map(|&v| f(v)).sum();
    for chunk in chunks {
        for (lane, &v) in lanes.iter_mut().zip(chunk) {
            *lane += f(v);
        }
    }
    lanes.iter().sum::<f32>() + tail
}

/// The largest of `init` and `values`. Sixteen lanes and plain comparisons vectorise, where
/// `f32::max`'s NaN rules do not; NaN values are passed over, as `f32::max` passes them.
#[inline(always)]
pub(crate) fn lane_max(values: &[f32], init: f32) -> f32 {
    lane_pick(values, init, |best, v| if v > best { v } else { best })
}

/// The smallest of `init` and `values`, as [`lane_max`] finds the largest.
#[inline(always)]
pub(crate) fn lane_min(values: &[f32], init: f32) -> f32 {
    lane_pick(values, init, |best, v| if v < best { v } else { best })
}

#[inline(always)]
fn lane_pick(values: &[f32], init: f32, pick: impl Fn(f32, f32) -> f32) -> f32 {
    let mut lanes = [init; 16];
    let chunks = values.chunks_exact(16);
    let tail = chunks.remainder().iter().fold(init, |best, &v| pick(best, v));
    for chunk in chunks {
        for (lane, &v) in lanes.iter_mut().zip(chunk) {
            *lane = pick(*lane, v);
        }
    }
    lanes.iter().fold(tail, |best, &v| pick(best, v))
}

/// `x` rounded to the nearest integer, ties to even, for |x| < 2^22: adding 1.5 · 2^23 leaves
/// the integer in the low mantissa bits. Unlike `f32::round_ties_even`, which can become a libm
/// call per value, this vectorises.
#[inline(always)]
pub(crate) fn round_small(x: f32) -> i32 {
    (x + 12_582_912.0).to_bits() as i32 - 0x4B40_0000
}

/// [`exp`]'s reduction by ln 2 in two parts, and its polynomial for (e^r − 1 − r) / r², highest
/// degree first.
const LN2_HI: f32 = 0.693_359_4;
const LN2_LO: f32 = -2.121_944_4e-4;
const EXP_POLY: [f32; 6] =
    [1.987_569_1e-4, 1.398_199_9e-3, 8.333_452e-3, 4.166_579_6e-2, 1.666_666_5e-1, 0.5];
/// [`exp`] gives 0 below this, and takes no input above [`EXP_MAX`].
const EXP_MIN: f32 = -87.3;
const EXP_MAX: f32 = 88.7;

/// e^x for f32, within 2 ulp on [-87, 88] (Cephes' polynomial after reduction by ln 2); inputs
/// below -87.3 give 0, as `f32::exp` underflows there too.
#[inline(always)]
pub(crate) fn exp(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    let underflow = x < EXP_MIN;
    let x = x.clamp(EXP_MIN, EXP_MAX);
    // Adding 1.5 × 2^23 rounds to the nearest integer (ties to even) and leaves it in the low
    // mantissa bits: an integer without a float-to-int cast, which would not vectorise (Rust's
    // `as` saturates and maps NaN to 0, so LLVM emits it lane by lane).
    const MAGIC: f32 = 12_582_912.0;
    let shifted = x * LOG2E + MAGIC;
    let n = shifted - MAGIC;
    let r = x - n * LN2_HI - n * LN2_LO;
    let p = EXP_POLY[1..].iter().fold(EXP_POLY[0], |p, &c| p * r + c);
    let y = p * r * r + r + 1.0;
    // 2^n by building the exponent bits; n is in [-126, 128], so split it to stay normal.
    let n = (shifted.to_bits() as i32).wrapping_sub(MAGIC.to_bits() as i32);
    let half = n >> 1;
    let scale_a = f32::from_bits(((half + 127) as u32) << 23);
    let scale_b = f32::from_bits(((n - half + 127) as u32) << 23);
    let value = y * scale_a * scale_b;
    if underflow {
        0.0
    } else {
        value
    }
}

/// [`exp`] of 16 lanes in AVX-512 registers: the same reduction and polynomial, in fused
/// multiply-adds, with `vrndscaleps` for n and `vscalefps` for 2^n, in about half the
/// instructions [`exp`] vectorises to (it builds 2^n from bits, in two halves). Within the same
/// bound of libm; 0 below -87.3, NaN kept.
///
/// # Safety
/// The CPU has AVX-512 F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
pub(crate) unsafe fn exp_avx512(x: std::arch::x86_64::__m512) -> std::arch::x86_64::__m512 {
    use std::arch::x86_64::*;
    let keep = _mm512_cmp_ps_mask::<_CMP_NLT_UQ>(x, _mm512_set1_ps(EXP_MIN));
    // `vmaxps` and `vminps` give their second operand where one is NaN: x's NaN goes through.
    let x = _mm512_min_ps(_mm512_set1_ps(EXP_MAX), _mm512_max_ps(_mm512_set1_ps(EXP_MIN), x));
    let t = _mm512_mul_ps(x, _mm512_set1_ps(std::f32::consts::LOG2_E));
    let n = _mm512_roundscale_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(t);
    let r = _mm512_fnmadd_ps(n, _mm512_set1_ps(LN2_HI), x);
    let r = _mm512_fnmadd_ps(n, _mm512_set1_ps(LN2_LO), r);
    let p = EXP_POLY[1..]
        .iter()
        .fold(_mm512_set1_ps(EXP_POLY[0]), |p, &c| _mm512_fmadd_ps(p, r, _mm512_set1_ps(c)));
    let y = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0));
    _mm512_maskz_scalef_ps(keep, y, n)
}

/// e^x for x ≤ 0, within 1e-4 relative: what softmax weights need when they are rounded to
/// bf16 next (whose own rounding strays by up to 2⁻⁸ = 3.9e-3), at under half of [`exp`]'s work:
/// 2^t for t = x · log₂e, as 2^n times a degree-3 polynomial of f = t − n on [-½, ½] (fitted to
/// 2^f's relative error, 7.5e-5). Inputs with t below -126 give 0, so that no result is subnormal;
/// positive ones are taken as 0. [`EXP2_COARSE`] holds the coefficients, which the AVX-512 softmax
/// uses too.
#[inline(always)]
pub(crate) fn exp_nonpositive_coarse(x: f32) -> f32 {
    const MAGIC: f32 = 12_582_912.0;
    let t = x * std::f32::consts::LOG2_E;
    let underflow = t < EXP2_COARSE_MIN;
    let t = t.clamp(EXP2_COARSE_MIN, 0.0);
    // n = t rounded to nearest, ties to even (as `vrndscaleps` rounds), f in [-½, ½].
    let shifted = t + MAGIC;
    let f = t - (shifted - MAGIC);
    let [c0, c1, c2, c3] = EXP2_COARSE;
    let p = c0 + f * (c1 + f * (c2 + f * c3));
    // n in [-126, 0], and p ≥ 1 where n = -126 (f ≥ 0 there): a normal float.
    let n = (shifted.to_bits() as i32).wrapping_sub(MAGIC.to_bits() as i32);
    let value = p * f32::from_bits(((n + 127) as u32) << 23);
    if underflow {
        0.0
    } else {
        value
    }
}

/// [`exp_nonpositive_coarse`]'s polynomial for 2^f on [-½, ½], lowest degree first.
pub(crate) const EXP2_COARSE: [f32; 4] = [0.999_928_1, 0.693_260_97, 0.242_610_54, 0.055_171_322];

/// Below this t = x · log₂e, [`exp_nonpositive_coarse`] gives 0.
pub(crate) const EXP2_COARSE_MIN: f32 = -126.0;

/// erf(x) as a ratio of odd and even polynomials on [-4, 4] (Eigen's `generic_fast_erf_float`,
/// as PyTorch vectorises it): within 1e-6 of erf.
#[inline(always)]
pub(crate) fn erf(x: f32) -> f32 {
    let x = x.clamp(-4.0, 4.0);
    let x2 = x * x;
    let mut p = -2.726_142_3e-10_f32;
    p = p * x2 + 2.770_681_4e-8;
    p = p * x2 - 2.101_024e-6;
    p = p * x2 - 5.692_506_4e-5;
    p = p * x2 - 7.349_906_3e-4;
    p = p * x2 - 2.954_600_1e-3;
    p = p * x2 - 1.609_603_3e-2;
    let mut q = -1.456_607_2e-5_f32;
    q = q * x2 - 2.133_740_5e-4;
    q = q * x2 - 1.682_827e-3;
    q = q * x2 - 7.373_329e-3;
    q = q * x2 - 1.426_474e-2;
    x * p / q
}

/// The exact (erf) GELU.
#[inline(always)]
pub(crate) fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + erf(x * std::f32::consts::FRAC_1_SQRT_2))
}

/// tanh(x) = 1 - 2 / (e^{2x} + 1), saturating cleanly at both ends.
#[inline(always)]
pub(crate) fn tanh(x: f32) -> f32 {
    1.0 - 2.0 / (exp(2.0 * x) + 1.0)
}

/// The tanh-approximated GELU (`gelu_new`, `gelu_pytorch_tanh`).
#[inline(always)]
pub(crate) fn gelu_tanh(x: f32) -> f32 {
    const C: f32 = 0.797_884_6; // sqrt(2 / pi)
    0.5 * x * (1.0 + tanh(C * (x + 0.044_715 * x * x * x)))
}

/// x · sigmoid(x).
#[inline(always)]
pub(crate) fn silu(x: f32) -> f32 {
    x / (1.0 + exp(-x))
}

multiversion! {
    /// The exact (erf) GELU of every value, in place: `Activation::Gelu` on f32 CPU tensors.
    pub(crate) fn gelu_in_place(xs: &mut [f32]) {
        xs.iter_mut().for_each(|x| *x = gelu(*x))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_small_rounds_ties_to_even() {
        for x in [-255.5f32, -3.5, -2.5, -0.5, -0.49, 0.0, 0.5, 1.5, 2.5, 126.7, 254.5, 255.0, -4_000_000.5] {
            assert_eq!(round_small(x), x.round_ties_even() as i32, "{x}");
        }
    }

    #[test]
    fn exp_is_close_to_libm() {
        let mut worst = 0f64;
        for i in -90_000..=88_000 {
            let x = i as f32 * 1e-3;
            let (ours, want) = (super::exp(x) as f64, (x as f64).exp());
            if want > 1e-37 {
                worst = worst.max(((ours - want) / want).abs());
            }
        }
        assert!(worst < 3e-7, "max relative error {worst:e}");
        assert_eq!(super::exp(-200.0), 0.0);
        assert!(super::exp(0.0) == 1.0);
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn exp_in_avx512_registers_is_close_to_libm() {
        use std::arch::x86_64::*;
        if !std::arch::is_x86_feature_detected!("avx512f") {
            crate::runtime::kernels::not_run_here("exp_avx512 (this CPU has no AVX-512)");
            return;
        }
        let xs: Vec<f32> =
            (-90_000..=88_000).map(|i| i as f32 * 1e-3).chain([f32::NAN, -200.0, 0.0]).collect();
        let mut got = vec![0f32; xs.len() + 16];
        for (x, out) in xs.chunks(16).zip(got.chunks_mut(16)) {
            let mut lanes = [0f32; 16];
            lanes[..x.len()].copy_from_slice(x);
            // SAFETY: the CPU has AVX-512 F (detected); `lanes` and `out` hold 16 floats.
            unsafe { _mm512_storeu_ps(out.as_mut_ptr(), super::exp_avx512(_mm512_loadu_ps(lanes.as_ptr()))) };
        }
        let mut worst = 0f64;
        for (&x, &ours) in xs.iter().zip(&got) {
            let want = (x as f64).exp();
            if want > 1e-37 {
                worst = worst.max(((ours as f64 - want) / want).abs());
            }
        }
        assert!(worst < 3e-7, "max relative error {worst:e}");
        let n = xs.len();
        assert!(got[n - 3].is_nan() && got[n - 2] == 0.0 && got[n - 1] == 1.0, "{:?}", &got[n - 3..n]);
    }

    #[test]
    fn coarse_exp_is_within_1e_4_of_libm_below_zero() {
        let mut worst = 0f64;
        for i in -87_000..=0 {
            let x = i as f32 * 1e-3;
            let (ours, want) = (super::exp_nonpositive_coarse(x) as f64, (x as f64).exp());
            worst = worst.max(((ours - want) / want).abs());
        }
        assert!(worst < 1e-4, "max relative error {worst:e}");
        assert_eq!(super::exp_nonpositive_coarse(-200.0), 0.0);
        assert_eq!(super::exp_nonpositive_coarse(f32::NEG_INFINITY), 0.0);
        assert_eq!(super::exp_nonpositive_coarse(f32::MIN), 0.0);
    }

    #[test]
    fn erf_is_within_1e_6_of_erf() {
        let worst = crate::runtime::kernels::largest(
            (-600_000..=600_000)
                .map(|i| i as f64 * 1e-5)
                .map(|x| (super::erf(x as f32) as f64 - candle_core::cpu::erf::erf_f64(x)).abs()),
        );
        assert!(worst < 1e-6, "max error {worst:e}");
    }

    #[test]
    fn activations_match_their_definitions() {
        for i in -2000..=2000 {
            let x = i as f32 * 5e-3;
            let xd = x as f64;
            let tanh_gelu = 0.5
                * xd
                * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (xd + 0.044715 * xd.powi(3))).tanh());
            assert!((super::gelu_tanh(x) as f64 - tanh_gelu).abs() < 2e-6, "gelu_tanh({x})");
            assert!((super::silu(x) as f64 - xd / (1.0 + (-xd).exp())).abs() < 2e-6, "silu({x})");
            assert!((super::tanh(x) as f64 - xd.tanh()).abs() < 2e-6, "tanh({x})");
        }
    }
}
