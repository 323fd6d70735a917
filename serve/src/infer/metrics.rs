//! Prometheus text exposition under TEI's `te_*` names, written by hand: a handful of counters,
//! histograms and one gauge do not justify a metrics crate.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;

#[derive(Default)]
pub struct Metrics {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// Keyed by metric name, then by the rendered label set (`method="single"`, or empty).
    counters: BTreeMap<&'static str, BTreeMap<String, u64>>,
    histograms: BTreeMap<&'static str, Histogram>,
    gauges: BTreeMap<&'static str, f64>,
}

struct Histogram {
    bounds: Vec<f64>,
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Histogram {
    /// The buckets metrics-exporter-prometheus uses for these names in TEI.
    fn for_name(name: &str) -> Self {
        let bounds: Vec<f64> = if name.ends_with("duration") {
            (0..35).map(|i| 1e-5 * 1.5f64.powi(i + 1)).collect()
        } else {
            let top = match name {
                "te_batch_next_size" => 12,
                "te_batch_next_tokens" => 20,
                _ => 19,
            };
            (0..=top).map(|i| 2f64.powi(i)).collect()
        };
        Self { counts: vec![0; bounds.len()], bounds, sum: 0.0, count: 0 }
    }

    fn observe(&mut self, value: f64) {
        for (bound, count) in self.bounds.iter().zip(&mut self.counts) {
            if value <= *bound {
                *count += 1;
            }
        }
        self.sum += value;
        self.count += 1;
    }
}

impl Metrics {
    pub fn inc(&self, name: &'static str, labels: &str) {
        self.add(name, labels, 1);
    }

    pub fn add(&self, name: &'static str, labels: &str, n: u64) {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        *inner.counters.entry(name).or_default().entry(labels.to_string()).or_default() += n;
    }

    pub fn observe(&self, name: &'static str, value: f64) {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.histograms.entry(name).or_insert_with(|| Histogram::for_name(name)).observe(value);
    }

    pub fn set_gauge(&self, name: &'static str, value: f64) {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.gauges.insert(name, value);
    }

    pub fn render(&self) -> String {
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = String::new();
        for (name, series) in &inner.counters {
            let _ = writeln!(out, "# TYPE {name} counter");
            for (labels, value) in series {
                if labels.is_empty() {
                    let _ = writeln!(out, "{name} {value}");
                } else {
                    let _ = writeln!(out, "{name}{{{labels}}} {value}");
                }
            }
            out.push('\n');
        }
        for (name, value) in &inner.gauges {
            let _ = writeln!(out, "# TYPE {name} gauge\n{name} {value}\n");
        }
        for (name, h) in &inner.histograms {
            let _ = writeln!(out, "# TYPE {name} histogram");
            for (bound, count) in h.bounds.iter().zip(&h.counts) {
                let _ = writeln!(out, "{name}_bucket{{le=\"{bound}\"}} {count}");
            }
            let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {}", h.count);
            let _ = writeln!(out, "{name}_sum {}\n{name}_count {}\n", h.sum, h.count);
        }
        out
    }
}
