//! Latency percentiles, exact: every sample is kept (nanoseconds, one `u64`
//! each) and sorted once at the end. A run records at most a few hundred
//! thousand samples, so a histogram crate would only trade exactness for
//! memory this harness does not need.

use serde::Serialize;

/// Percentiles of one set of latency samples, in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Percentiles {
    /// Samples measured.
    pub samples: usize,
    /// Median.
    pub p50_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// 99.9th percentile.
    pub p999_ns: u64,
    /// Largest sample.
    pub max_ns: u64,
}

impl Percentiles {
    /// The percentiles of `samples` (sorted in place); `None` when empty.
    pub fn of(samples: &mut [u64]) -> Option<Self> {
        if samples.is_empty() {
            return None;
        }
        samples.sort_unstable();
        Some(Percentiles {
            samples: samples.len(),
            p50_ns: rank(samples, 0.50),
            p99_ns: rank(samples, 0.99),
            p999_ns: rank(samples, 0.999),
            max_ns: samples[samples.len() - 1],
        })
    }
}

/// The nearest-rank `q` quantile of sorted `samples`: the smallest sample with
/// at least `q` of the samples at or below it.
fn rank(sorted: &[u64], q: f64) -> u64 {
    let n = sorted.len();
    let k = ((q * n as f64).ceil() as usize).clamp(1, n);
    sorted[k - 1]
}

/// Milliseconds with three decimals, for tables.
pub fn ms(ns: u64) -> String {
    format!("{:.3}", ns as f64 / 1e6)
}
