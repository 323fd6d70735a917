//! The GLUE metrics, equal to scikit-learn's and scipy's.

use super::glue::Metric;

pub fn accuracy(predictions: &[usize], labels: &[usize]) -> f64 {
    if labels.is_empty() {
        return 0.0;
    }
    predictions.iter().zip(labels).filter(|(p, l)| p == l).count() as f64 / labels.len() as f64
}

/// F1 of class 1 (sklearn's `f1_score` with the default binary average); 0 when undefined.
pub fn f1_binary(predictions: &[usize], labels: &[usize]) -> f64 {
    let (mut tp, mut fp, mut fneg) = (0.0, 0.0, 0.0);
    for (&p, &l) in predictions.iter().zip(labels) {
        match (p == 1, l == 1) {
            (true, true) => tp += 1.0,
            (true, false) => fp += 1.0,
            (false, true) => fneg += 1.0,
            _ => {}
        }
    }
    if tp == 0.0 {
        0.0
    } else {
        2.0 * tp / (2.0 * tp + fp + fneg)
    }
}

/// Matthews correlation coefficient for any number of classes (sklearn's formula); 0 when undefined.
pub fn matthews_corrcoef(predictions: &[usize], labels: &[usize]) -> f64 {
    let classes = predictions.iter().chain(labels).copied().max().map_or(0, |m| m + 1);
    let (mut t, mut p) = (vec![0.0f64; classes], vec![0.0f64; classes]);
    let mut correct = 0.0;
    for (&pr, &l) in predictions.iter().zip(labels) {
        t[l] += 1.0;
        p[pr] += 1.0;
        if pr == l {
            correct += 1.0;
        }
    }
    let s = labels.len() as f64;
    let tp: f64 = t.iter().zip(&p).map(|(a, b)| a * b).sum();
    let cov_ytyp = correct * s - tp;
    let cov_ypyp = s * s - p.iter().map(|x| x * x).sum::<f64>();
    let cov_ytyt = s * s - t.iter().map(|x| x * x).sum::<f64>();
    let denom = (cov_ytyt * cov_ypyp).sqrt();
    if denom == 0.0 {
        0.0
    } else {
        cov_ytyp / denom
    }
}

pub fn pearson(x: &[f64], y: &[f64]) -> f64 {
    let n = x.len() as f64;
    let (mx, my) = (x.iter().sum::<f64>() / n, y.iter().sum::<f64>() / n);
    let cov: f64 = x.iter().zip(y).map(|(a, b)| (a - mx) * (b - my)).sum();
    let (vx, vy): (f64, f64) =
        (x.iter().map(|a| (a - mx).powi(2)).sum(), y.iter().map(|b| (b - my).powi(2)).sum());
    cov / (vx * vy).sqrt()
}

/// Spearman's rank correlation, ties ranked by their average (as scipy does).
pub fn spearman(x: &[f64], y: &[f64]) -> f64 {
    pearson(&ranks(x), &ranks(y))
}

fn ranks(v: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..v.len()).collect();
    order.sort_by(|&a, &b| v[a].total_cmp(&v[b]));
    let mut ranks = vec![0.0; v.len()];
    let mut i = 0;
    while i < order.len() {
        let mut j = i;
        while j + 1 < order.len() && v[order[j + 1]] == v[order[i]] {
            j += 1;
        }
        let rank = (i + j) as f64 / 2.0 + 1.0;
        for &k in &order[i..=j] {
            ranks[k] = rank;
        }
        i = j + 1;
    }
    ranks
}

/// The task's metric, by name, for class predictions.
pub fn classification_scores(
    metric: Metric,
    predictions: &[usize],
    labels: &[usize],
) -> Vec<(&'static str, f64)> {
    match metric {
        Metric::Matthews => vec![("matthews_corr", matthews_corrcoef(predictions, labels))],
        Metric::F1Accuracy => {
            vec![("f1", f1_binary(predictions, labels)), ("accuracy", accuracy(predictions, labels))]
        }
        _ => vec![("accuracy", accuracy(predictions, labels))],
    }
}

/// Pearson and Spearman correlation for regression predictions.
pub fn regression_scores(predictions: &[f64], labels: &[f64]) -> Vec<(&'static str, f64)> {
    vec![("pearson", pearson(predictions, labels)), ("spearman", spearman(predictions, labels))]
}
