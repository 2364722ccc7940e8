//! Metrics: one consistent-enough snapshot of every queue's and DLQ's numbers, as a plain
//! struct ([`Store::metrics_snapshot`]) and rendered in the Prometheus text exposition
//! format ([`Metrics::to_prometheus`]).
//!
//! Every number comes from counters the state machine keeps as records are applied, so a
//! snapshot costs one lock per queue and does not grow with the number of messages. The
//! `*_total` counters count since the oldest record still in the log (they start again from
//! what the log holds when a store is reopened, like a process restart for Prometheus).
//!
//! Metric names (each with the label `queue`; a queue's DLQ is named by
//! `deadletter_queue_info`, not by a label on every series, since it is a function of the
//! queue):
//!
//! | metric                                   | type    | field                         |
//! |------------------------------------------|---------|-------------------------------|
//! | `deadletter_queue_depth`                 | gauge   | [`QueueMetrics::depth`]       |
//! | `deadletter_queue_in_flight`             | gauge   | [`QueueMetrics::in_flight`]   |
//! | `deadletter_enqueued_total`              | counter | [`QueueMetrics::enqueued`]    |
//! | `deadletter_acked_total`                 | counter | [`QueueMetrics::acked`]       |
//! | `deadletter_retried_total`               | counter | [`QueueMetrics::retried`]     |
//! | `deadletter_dead_lettered_total`         | counter | [`QueueMetrics::dead_lettered`] |
//! | `deadletter_expired_total`               | counter | [`QueueMetrics::expired`]     |
//! | `deadletter_enqueue_refused_total`       | counter | [`QueueMetrics::refused`]     |
//! | `deadletter_dlq_pending`                 | gauge   | [`QueueMetrics::dlq_pending`] |
//! | `deadletter_dlq_replayed_total`          | counter | [`QueueMetrics::dlq_replayed`] |
//! | `deadletter_oldest_message_age_seconds`  | gauge   | [`QueueMetrics::oldest_message_age_ms`] |
//! | `deadletter_dlq_oldest_age_seconds`      | gauge   | [`QueueMetrics::dlq_oldest_age_ms`] |
//! | `deadletter_worker_pools`                | gauge   | [`QueueMetrics::pools`] (how many) |
//! | `deadletter_pool_workers`                | gauge   | [`QueueMetrics::pools`] (their workers) |
//! | `deadletter_pool_handlers_in_flight`     | gauge   | [`QueueMetrics::pools`] (their handlers running) |
//!
//! The pool gauges have a sample (0 when nothing consumes the queue) only where the pools
//! are known: the process that holds the store, or one that asked it (the `deadletter`
//! command); a read-only snapshot has none. Rates are not exposed as gauges: Prometheus
//! derives them from the `*_total` counters (`rate(deadletter_acked_total[1m])`).
//!
//! The two age gauges have no sample for a queue with nothing to age (an empty queue, an
//! empty DLQ): a 0 would read as "fresh", and an absent series is the exposition's way to
//! say there is no value. Then, with more labels or none:
//!
//! | metric | type | labels | from |
//! |---|---|---|---|
//! | `deadletter_queue_info` | gauge | `queue`, `dlq` | always 1: the name of the queue's DLQ |
//! | `deadletter_dlq_entries` | gauge | `queue`, `error_kind` | [`QueueMetrics::dlq_by_error_kind`] (one series per kind in the DLQ) |
//! | `deadletter_handler_duration_seconds` | histogram | `queue`, `le` | [`QueueMetrics::handler_duration`] (queues a worker pool was started on in this process, at zero until its first delivery) |
//! | `deadletter_store_disk_bytes` | gauge | none | [`Metrics::disk_bytes`] (when known) |
//! | `deadletter_build_info` | gauge | `version`, `format_version` | always 1: the library's version and the on-disk format version it writes |
//!
//! A DLQ's size is `sum by (queue) (deadletter_dlq_entries)` ([`QueueMetrics::dlq_size`]
//! is that sum): no family repeats it, since a total beside its parts is counted twice by
//! any `sum` over the family names.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use std::collections::BTreeMap;

use crate::api::activity::{QueueRates, Workers};
use crate::api::core::durations::{DurationHistogram, DURATION_BUCKETS_SECONDS};
use crate::api::core::pools::AttachedPool;
use crate::api::core::store::Store;
use crate::api::dlq::DlqStats;
use crate::api::queue::QueueStats;
use crate::storage::format::FORMAT_VERSION;

/// The numbers of one queue and its DLQ.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct QueueMetrics {
    /// The queue's name.
    pub queue: String,
    /// Its DLQ's name.
    pub dlq: String,
    /// Messages waiting (visible now or later).
    pub depth: u64,
    /// Messages leased to a consumer.
    pub in_flight: u64,
    /// Messages enqueued.
    pub enqueued: u64,
    /// Messages acknowledged.
    pub acked: u64,
    /// Failed deliveries that were retried.
    pub retried: u64,
    /// Messages moved to the DLQ.
    pub dead_lettered: u64,
    /// Messages whose time to live passed.
    pub expired: u64,
    /// Enqueues refused by the queue's limit (`QueueOptions::max_pending`) since the
    /// store opened.
    #[serde(default)]
    pub refused: u64,
    /// Entries in the DLQ now (the sum of [`QueueMetrics::dlq_by_error_kind`]; Prometheus:
    /// `sum by (queue) (deadletter_dlq_entries)`).
    pub dlq_size: u64,
    /// DLQ entries not dealt with yet.
    pub dlq_pending: u64,
    /// DLQ entries replayed to a queue.
    pub dlq_replayed: u64,
    /// How long the oldest waiting message has been visible without being consumed
    /// (counted from its enqueue time, or from the end of its delay or backoff); `None`
    /// when the queue is empty.
    pub oldest_message_age_ms: Option<u64>,
    /// Age of the oldest DLQ entry (since it was dead-lettered); `None` when the DLQ is
    /// empty.
    pub dlq_oldest_age_ms: Option<u64>,
    /// DLQ entries by error kind.
    pub dlq_by_error_kind: BTreeMap<String, u64>,
    /// How long handlers ran, from the worker pools on this queue in this process: `None`
    /// until a pool is started on the queue (or on a backend that keeps none), empty (all
    /// counts 0) from then until its first delivery is handled.
    pub handler_duration: Option<DurationHistogram>,
    /// The worker pools attached to the queue now (empty: nothing consumes it); `None`
    /// where they are not known (a read-only snapshot, a backend that keeps no list).
    #[serde(default)]
    pub pools: Option<Vec<AttachedPool>>,
    /// Enqueued, acked and failed over the last minutes; `None` where they are not known
    /// (as for `pools`).
    #[serde(default)]
    pub rates: Option<QueueRates>,
}

/// A snapshot of every queue of a store ([`Store::metrics_snapshot`]), as numbers or as
/// Prometheus text ([`Metrics::to_prometheus`]; the dashboard serves it at `/metrics`).
///
/// ```
/// use deadletter::{Config, Failure, Store};
/// use deadletter::queue::FailureReport;
///
/// # let dir = tempfile::tempdir().unwrap();
/// let store = Store::open(&dir, Config::fast())?;
/// let orders = store.queue("orders")?;
/// orders.enqueue_batch(&["ORD-1", "ORD-2", "ORD-3"])?;
/// let msg = orders.lease(1)?.remove(0);
/// orders.dead_letter(&msg, &FailureReport::new(&Failure::permanent("Invalid", "bad")))?;
///
/// let metrics = store.metrics_snapshot();
/// let q = &metrics.queues[0];
/// assert_eq!((q.queue.as_str(), q.depth, q.dead_lettered, q.dlq_size), ("orders", 2, 1, 1));
///
/// let text = metrics.to_prometheus();
/// assert!(text.contains("# TYPE deadletter_queue_depth gauge"));
/// assert!(text.contains(r#"deadletter_dlq_entries{queue="orders",error_kind="Invalid"} 1"#));
/// assert!(text.contains(r#"deadletter_queue_info{queue="orders",dlq="orders-dlq"} 1"#));
/// # Ok::<(), deadletter::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Metrics {
    /// When the snapshot was taken (ms since the epoch, by the store's clock).
    pub at_ms: u64,
    /// One entry per queue, in creation order.
    pub queues: Vec<QueueMetrics>,
    /// Bytes of the store's files on disk, when known.
    pub disk_bytes: Option<u64>,
}

impl QueueMetrics {
    /// The numbers of one queue from its counts and its DLQ's (a backend's, or the
    /// store's), `at_ms` being now by the backend's clock.
    pub fn from_stats(queue: &QueueStats, dlq: &DlqStats, at_ms: u64) -> QueueMetrics {
        QueueMetrics {
            queue: queue.name.clone(),
            dlq: queue.dlq_name.clone(),
            depth: queue.counts.ready,
            in_flight: queue.counts.in_flight,
            enqueued: queue.counts.enqueued,
            acked: queue.counts.acked,
            retried: queue.counts.retried,
            dead_lettered: queue.counts.dead_lettered,
            expired: queue.counts.expired,
            refused: queue.refused,
            dlq_size: queue.dlq_size,
            dlq_pending: dlq.pending,
            dlq_replayed: dlq.replayed,
            oldest_message_age_ms: queue.oldest_ready_at_ms.map(|t| at_ms.saturating_sub(t)),
            dlq_oldest_age_ms: dlq.oldest_age_ms,
            dlq_by_error_kind: dlq.by_error_kind.clone(),
            handler_duration: None,
            pools: None,
            rates: None,
        }
    }
}

impl Metrics {
    /// A snapshot taken at `at_ms` of `queues`.
    pub fn new(at_ms: u64, queues: Vec<QueueMetrics>) -> Metrics {
        Metrics {
            at_ms,
            queues,
            disk_bytes: None,
        }
    }

    setters! {
        /// The same, with the bytes the store takes on disk.
        with_disk_bytes(bytes: Option<u64>) => disk_bytes = bytes;
    }

    /// The same, with each queue's attached pools and rates from `workers` (read by the
    /// process that holds the store; queues it does not list keep theirs).
    pub fn with_workers(mut self, workers: &Workers) -> Metrics {
        for q in &mut self.queues {
            if let Some(w) = workers.queue(&q.queue) {
                q.pools = Some(w.pools.clone());
                q.rates = Some(w.rates);
            }
        }
        self
    }
}

impl Store {
    /// The numbers of every queue and DLQ, from incrementally kept counters (no scan).
    /// The pools attached and the rates are filled in by the process that holds the store
    /// (a read-only snapshot knows neither: see [`Metrics::with_workers`]).
    pub fn metrics_snapshot(&self) -> Metrics {
        let at_ms = self.now();
        let queues = self
            .queue_names()
            .iter()
            .filter_map(|name| self.existing_queue(name).ok())
            .map(|queue| {
                let mut m = QueueMetrics::from_stats(&queue.stats(), &queue.dlq().stats(), at_ms);
                m.handler_duration = queue.handler_duration();
                m
            })
            .collect();
        let metrics = Metrics::new(at_ms, queues).with_disk_bytes(self.disk_bytes());
        if self.is_read_only() {
            return metrics;
        }
        metrics.with_workers(&self.workers())
    }
}

/// One metric family: name, type, help, and how to read its value from a queue.
struct Family {
    name: &'static str,
    kind: &'static str,
    help: &'static str,
    value: fn(&QueueMetrics) -> MetricValue,
}

enum MetricValue {
    Count(u64),
    Seconds(Option<u64>),
    /// A count where it is known (no sample otherwise).
    Known(Option<u64>),
}

/// Builds [`FAMILIES`] from lines `name: kind, Value(field), help;`: the metric's name and
/// type, how its value is read from a queue's [`QueueMetrics`], and its help text.
macro_rules! families {
    ($($name:ident: $kind:ident, $value:ident($($field:tt)+), $help:literal;)*) => {
        &[$(Family {
            name: stringify!($name),
            kind: stringify!($kind),
            help: $help,
            value: |q| MetricValue::$value(q.$($field)+),
        }),*]
    };
}

const FAMILIES: &[Family] = families! {
    deadletter_queue_depth: gauge, Count(depth),
        "Messages waiting in the queue (visible now or later).";
    deadletter_queue_in_flight: gauge, Count(in_flight),
        "Messages leased to a consumer and not yet acknowledged.";
    deadletter_enqueued_total: counter, Count(enqueued), "Messages enqueued.";
    deadletter_acked_total: counter, Count(acked), "Messages acknowledged.";
    deadletter_retried_total: counter, Count(retried), "Failed deliveries that were retried.";
    deadletter_dead_lettered_total: counter, Count(dead_lettered),
        "Messages moved to the dead letter queue.";
    deadletter_expired_total: counter, Count(expired), "Messages whose time to live passed.";
    deadletter_enqueue_refused_total: counter, Count(refused),
        "Enqueues refused because the queue held its limit of pending messages.";
    deadletter_dlq_pending: gauge, Count(dlq_pending), "Dead letter entries not dealt with yet.";
    deadletter_dlq_replayed_total: counter, Count(dlq_replayed),
        "Dead letter entries replayed to a queue.";
    deadletter_oldest_message_age_seconds: gauge, Seconds(oldest_message_age_ms),
        "How long the oldest waiting message has been visible without being consumed.";
    deadletter_dlq_oldest_age_seconds: gauge, Seconds(dlq_oldest_age_ms),
        "Age of the oldest dead letter entry.";
    deadletter_worker_pools: gauge, Known(pool_count()),
        "Worker pools attached to the queue now.";
    deadletter_pool_workers: gauge, Known(pool_workers()),
        "Workers (threads, or handlers an async pool runs at once) of the pools attached to the queue.";
    deadletter_pool_handlers_in_flight: gauge, Known(pool_in_flight()),
        "Handlers of the attached pools running now.";
};

impl QueueMetrics {
    fn pool_sum(&self, of: fn(&AttachedPool) -> u64) -> Option<u64> {
        self.pools.as_ref().map(|p| p.iter().map(of).sum())
    }
    fn pool_count(&self) -> Option<u64> {
        self.pool_sum(|_| 1)
    }
    fn pool_workers(&self) -> Option<u64> {
        self.pool_sum(|p| p.workers)
    }
    fn pool_in_flight(&self) -> Option<u64> {
        self.pool_sum(|p| p.in_flight)
    }
}

impl Metrics {
    /// The names of the metric families [`Metrics::to_prometheus`] writes, in order.
    pub fn family_names() -> impl Iterator<Item = &'static str> {
        FAMILIES.iter().map(|f| f.name)
    }

    /// Renders the snapshot in the Prometheus text exposition format (version 0.0.4): one
    /// `# HELP` and `# TYPE` line per family, then one sample per queue (none for an age
    /// with nothing to age); then the queues' DLQ names, the DLQ entries by error kind, the
    /// handler durations, the disk bytes and the build info.
    pub fn to_prometheus(&self) -> String {
        let mut out = String::new();
        for family in FAMILIES {
            let _ = writeln!(out, "# HELP {} {}", family.name, family.help);
            let _ = writeln!(out, "# TYPE {} {}", family.name, family.kind);
            for q in &self.queues {
                let value = match (family.value)(q) {
                    MetricValue::Count(n) => n.to_string(),
                    MetricValue::Seconds(Some(ms)) => seconds(ms),
                    MetricValue::Seconds(None) | MetricValue::Known(None) => continue,
                    MetricValue::Known(Some(n)) => n.to_string(),
                };
                let _ = writeln!(out, "{}{{{}}} {value}", family.name, labels(q));
            }
        }
        self.write_labelled(&mut out);
        out
    }

    /// The families beyond one sample per queue.
    fn write_labelled(&self, out: &mut String) {
        let head = |out: &mut String, name: &str, kind: &str, help: &str| {
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} {kind}");
        };
        head(
            out,
            "deadletter_queue_info",
            "gauge",
            "The name of the queue's dead letter queue; always 1.",
        );
        for q in &self.queues {
            let dlq = escape_label(&q.dlq);
            let _ = writeln!(
                out,
                "deadletter_queue_info{{{},dlq=\"{dlq}\"}} 1",
                labels(q)
            );
        }
        head(
            out,
            "deadletter_dlq_entries",
            "gauge",
            "Entries in the dead letter queue by error kind.",
        );
        for q in &self.queues {
            for (kind, n) in &q.dlq_by_error_kind {
                let kind = escape_label(kind);
                let _ = writeln!(
                    out,
                    "deadletter_dlq_entries{{{},error_kind=\"{kind}\"}} {n}",
                    labels(q)
                );
            }
        }
        let name = "deadletter_handler_duration_seconds";
        head(
            out,
            name,
            "histogram",
            "How long a worker pool's handler ran for one delivery.",
        );
        for q in &self.queues {
            let Some(h) = &q.handler_duration else {
                continue;
            };
            let l = labels(q);
            for (bound, n) in DURATION_BUCKETS_SECONDS.iter().zip(&h.cumulative) {
                let _ = writeln!(out, "{name}_bucket{{{l},le=\"{bound}\"}} {n}");
            }
            let _ = writeln!(out, "{name}_bucket{{{l},le=\"+Inf\"}} {}", h.count);
            let sum = h.sum_micros as f64 / 1e6;
            let _ = writeln!(out, "{name}_sum{{{l}}} {sum}");
            let _ = writeln!(out, "{name}_count{{{l}}} {}", h.count);
        }
        if let Some(bytes) = self.disk_bytes {
            head(
                out,
                "deadletter_store_disk_bytes",
                "gauge",
                "Bytes of the store's files on disk.",
            );
            let _ = writeln!(out, "deadletter_store_disk_bytes {bytes}");
        }
        head(
            out,
            "deadletter_build_info",
            "gauge",
            "The deadletter library's version and the on-disk format version it writes; always 1.",
        );
        let _ = writeln!(
            out,
            "deadletter_build_info{{version=\"{}\",format_version=\"{FORMAT_VERSION}\"}} 1",
            env!("CARGO_PKG_VERSION")
        );
    }
}

/// The label of a queue's samples: `queue="…"`, escaped.
fn labels(q: &QueueMetrics) -> String {
    format!("queue=\"{}\"", escape_label(&q.queue))
}

/// Milliseconds as decimal seconds, exactly (`1500` -> `1.5`).
fn seconds(ms: u64) -> String {
    // Exact: a millisecond count below 10^15 divided by 1000 has at most 15 significant
    // digits, which the shortest form of the nearest f64 gives back.
    (ms as f64 / 1000.0).to_string()
}

/// Escapes a label value: backslash, double quote and line feed, as the format requires.
fn escape_label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_are_exact() {
        assert_eq!(seconds(0), "0");
        assert_eq!(seconds(1500), "1.5");
        assert_eq!(seconds(1001), "1.001");
        assert_eq!(seconds(120_000), "120");
    }

    #[test]
    fn labels_are_escaped() {
        assert_eq!(escape_label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
