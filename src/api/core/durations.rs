//! How long handlers take: a histogram per queue of the time a worker pool's handler ran
//! for each delivery ([`HandlerDurations`]), recorded by the pool through
//! [`WorkerQueue::observe_handler`](crate::backend::WorkerQueue::observe_handler) and read into
//! [`QueueMetrics::handler_duration`](crate::metrics::QueueMetrics::handler_duration) (Prometheus:
//! `deadletter_handler_duration_seconds`).
//!
//! Invariants: recording is a few relaxed atomic additions (no lock once the queue's
//! histogram exists); the counts live in the process, not in the store: they start at zero
//! with each open, like any process metric.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Upper bounds of the buckets, in seconds: 1 ms to 1 minute.
pub const DURATION_BUCKETS_SECONDS: [f64; 14] = [
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

/// The same bounds in microseconds, for recording without floating point.
const BUCKETS_MICROS: [u64; 14] = [
    1_000, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000, 2_500_000,
    5_000_000, 10_000_000, 30_000_000, 60_000_000,
];

/// A live histogram of handler durations (one per queue, shared by every pool on it).
#[derive(Debug, Default)]
pub(crate) struct HandlerDurations {
    /// Observations per bucket (not cumulative); the last one is above every bound.
    buckets: [AtomicU64; 15],
    sum_micros: AtomicU64,
}

impl HandlerDurations {
    /// Records one handler run.
    pub(crate) fn observe(&self, duration: Duration) {
        let micros = micros_of(duration);
        self.buckets[bucket_of(micros)].fetch_add(1, Ordering::Relaxed);
        self.sum_micros.fetch_add(micros, Ordering::Relaxed);
    }

    /// Records several handler runs: counted locally first, then one addition per bucket
    /// used, so that pool workers recording batches do not contend on the counters.
    pub(crate) fn observe_all(&self, durations: &[Duration]) {
        let mut counts = [0u64; BUCKETS_MICROS.len() + 1];
        let mut sum = 0u64;
        for &d in durations {
            let micros = micros_of(d);
            counts[bucket_of(micros)] += 1;
            sum = sum.saturating_add(micros);
        }
        for (bucket, n) in self.buckets.iter().zip(counts) {
            if n > 0 {
                bucket.fetch_add(n, Ordering::Relaxed);
            }
        }
        self.sum_micros.fetch_add(sum, Ordering::Relaxed);
    }

    /// The counts now (all 0 before the first observation: the histogram exists once a
    /// pool declared it or a run was recorded).
    pub(crate) fn snapshot(&self) -> DurationHistogram {
        let mut cumulative = Vec::with_capacity(BUCKETS_MICROS.len());
        let mut total = 0;
        for b in &self.buckets[..BUCKETS_MICROS.len()] {
            total += b.load(Ordering::Relaxed);
            cumulative.push(total);
        }
        let count = total + self.buckets[BUCKETS_MICROS.len()].load(Ordering::Relaxed);
        DurationHistogram {
            cumulative,
            count,
            sum_micros: self.sum_micros.load(Ordering::Relaxed),
        }
    }
}

/// A duration in whole microseconds.
fn micros_of(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}

/// The bucket a run of `micros` falls in (the last one is above every bound).
fn bucket_of(micros: u64) -> usize {
    BUCKETS_MICROS
        .iter()
        .position(|&bound| micros <= bound)
        .unwrap_or(BUCKETS_MICROS.len())
}

/// Handler durations of one queue, as Prometheus histograms hold them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct DurationHistogram {
    /// Runs that took at most each bound of [`DURATION_BUCKETS_SECONDS`] (cumulative).
    pub cumulative: Vec<u64>,
    /// Every run (the `+Inf` bucket).
    pub count: u64,
    /// Time spent in all of them, in microseconds.
    pub sum_micros: u64,
}
