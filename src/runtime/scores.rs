//! Scores from a model's logits, written once for every pipeline and for generation (the server's
//! scores come from the pipelines): [`softmax`], [`sigmoid`], [`argmax`] and [`top_k`], on plain
//! `f32` slices, in f32 as transformers' pipelines compute them.
//!
//! ```
//! use roformer::scores::{argmax, sigmoid, softmax, top_k};
//!
//! let logits = [0.0, (3.0f32).ln(), f32::NAN];
//! assert!((softmax(&logits[..2])[1] - 0.75).abs() < 1e-6);
//! assert_eq!(sigmoid(0.0), 0.5);
//! assert_eq!(argmax(&logits), 1); // NaN never wins over a number
//! assert_eq!(top_k(&[0.5, 0.9, 0.5], 2), [(1, 0.9), (0, 0.5)]); // ties keep index order
//! ```

/// exp(x − max) / Σ exp(x − max) over `logits` (a NaN anywhere makes every value NaN).
pub fn softmax(logits: &[f32]) -> Vec<f32> {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let exp: Vec<f32> = logits.iter().map(|l| (l - max).exp()).collect();
    let sum: f32 = exp.iter().sum();
    exp.into_iter().map(|e| e / sum).collect()
}

/// 1 / (1 + exp(−x)).
pub fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

/// The index of the largest value, the first on ties, as numpy's `argmax`; NaN never wins over
/// a number. 0 for an empty slice or one of NaN only.
pub fn argmax(xs: &[f32]) -> usize {
    let mut best = 0;
    for (i, &x) in xs.iter().enumerate() {
        if x > xs[best] || (xs[best].is_nan() && !x.is_nan()) {
            best = i;
        }
    }
    best
}

/// The `k` highest values (all when fewer) with their indices, highest first: ties keep index
/// order and NaN comes last, as a stable sort would leave them (`k == xs.len()` ranks them all).
pub fn top_k(xs: &[f32], k: usize) -> Vec<(usize, f32)> {
    // A total order (index breaks ties), so a partial selection gives what a stable sort gives.
    let order = |a: &(usize, f32), b: &(usize, f32)| match (a.1.is_nan(), b.1.is_nan()) {
        (false, false) => b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)),
        (true, true) => a.0.cmp(&b.0),
        (nan_a, nan_b) => nan_a.cmp(&nan_b),
    };
    let mut ranked: Vec<(usize, f32)> = xs.iter().copied().enumerate().collect();
    let k = k.min(ranked.len());
    if k == 0 {
        return Vec::new();
    }
    if k < ranked.len() {
        ranked.select_nth_unstable_by(k - 1, order);
        ranked.truncate(k);
    }
    ranked.sort_unstable_by(order);
    ranked
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn softmax_and_sigmoid_are_transformers_ones() {
        let p = softmax(&[1.0, 2.0, 3.0]);
        let want = [0.090_030_57, 0.244_728_48, 0.665_240_94];
        assert!(p.iter().zip(want).all(|(p, w)| (p - w).abs() < 1e-6), "{p:?}");
        assert!(softmax(&[f32::NAN, 1.0]).iter().all(|p| p.is_nan()));
        assert!(softmax(&[]).is_empty());
        assert!((sigmoid(2.0) - 0.880_797_1).abs() < 1e-6);
    }

    #[test]
    fn argmax_takes_the_first_best_and_never_nan() {
        assert_eq!(argmax(&[1.0, 3.0, 3.0, 2.0]), 1);
        assert_eq!(argmax(&[f32::NAN, 1.0, 0.0]), 1);
        assert_eq!(argmax(&[0.0, f32::NAN, -1.0]), 0);
        assert_eq!((argmax(&[]), argmax(&[f32::NAN])), (0, 0));
    }

    #[test]
    fn top_k_is_a_stable_ranking_with_nan_last() {
        let xs = [0.5, f32::NAN, 0.9, 0.5, -1.0];
        let all: Vec<usize> = top_k(&xs, xs.len()).into_iter().map(|(i, _)| i).collect();
        assert_eq!(all, [2, 0, 3, 4, 1]);
        for k in 0..=xs.len() + 1 {
            let some: Vec<usize> = top_k(&xs, k).into_iter().map(|(i, _)| i).collect();
            assert_eq!(some, all[..k.min(xs.len())], "k = {k}");
        }
        assert_eq!(top_k(&xs, 1)[0].0, argmax(&xs));
    }
}
