//! What a forwarder shows: the link's state, what it forwarded and when, its errors, and
//! the lag of each forwarded queue, as a plain report ([`ForwardStatus`]) and in the
//! Prometheus text format ([`ForwardStatus::to_prometheus`]).
//!
//! The counters live in [`Counters`], shared by the forwarder's loop (which writes them)
//! and any thread that asks for a report; the lag is read from the store's counters when
//! the report is made, so it costs no scan.

use std::fmt::Write as _;

use deadletter::Store;
use parking_lot::Mutex;

/// The state of the link to the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LinkState {
    /// Not connected yet, or connecting again after a failure.
    Connecting,
    /// Connected: messages flow.
    Up,
    /// The last attempt failed; the forwarder waits out its backoff before the next.
    Down,
}

impl LinkState {
    /// The name used in reports and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            LinkState::Connecting => "connecting",
            LinkState::Up => "up",
            LinkState::Down => "down",
        }
    }
}

/// How far behind one forwarded queue is.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct QueueLag {
    /// The local queue.
    pub queue: String,
    /// Messages not forwarded yet (waiting or being forwarded).
    pub messages: u64,
    /// Age of the oldest waiting message, in milliseconds (0 when none waits).
    pub oldest_age_ms: u64,
    /// Entries in the queue's DLQ not forwarded yet (0 when its DLQ is not forwarded).
    pub dlq_entries: u64,
    /// Messages of this queue forwarded by this forwarder since it started.
    pub forwarded: u64,
}

/// A forwarder's report.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ForwardStatus {
    /// The origin name the forwarder sends as.
    pub origin: String,
    /// The link's state.
    pub link: LinkState,
    /// Queue messages forwarded since the forwarder started (acknowledged by the server).
    pub forwarded: u64,
    /// DLQ entries forwarded since the forwarder started.
    pub forwarded_dlq: u64,
    /// Publishes the server reported as duplicates (already stored: sent again after a
    /// lost acknowledgement or a restart). Not counted in `forwarded`.
    pub duplicates: u64,
    /// When the last message or entry was forwarded (ms since the epoch).
    pub last_forwarded_at_ms: Option<u64>,
    /// Failures of the link (connects, publishes) since the forwarder started.
    pub errors: u64,
    /// The last such failure.
    pub last_error: Option<String>,
    /// Replays from the fleet DLQ enqueued back into local queues.
    pub returned: u64,
    /// Per forwarded queue.
    pub queues: Vec<QueueLag>,
}

impl ForwardStatus {
    /// The report in the Prometheus text exposition format. Metrics (label `origin`, and
    /// `queue` for the per-queue ones):
    ///
    /// | metric | type |
    /// |---|---|
    /// | `deadletter_forward_link_up` | gauge (1 up, 0 otherwise) |
    /// | `deadletter_forward_forwarded_total` | counter |
    /// | `deadletter_forward_forwarded_dlq_total` | counter |
    /// | `deadletter_forward_duplicates_total` | counter |
    /// | `deadletter_forward_errors_total` | counter |
    /// | `deadletter_forward_returned_total` | counter |
    /// | `deadletter_forward_last_forwarded_timestamp_seconds` | gauge (0 before the first) |
    /// | `deadletter_forward_lag_messages` | gauge, per queue |
    /// | `deadletter_forward_lag_seconds` | gauge, per queue: age of the oldest waiting message (no sample while none waits) |
    /// | `deadletter_forward_dlq_lag_entries` | gauge, per queue |
    pub fn to_prometheus(&self) -> String {
        let o = escape(&self.origin);
        let mut out = String::new();
        let mut one = |name: &str, kind: &str, help: &str, value: String| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
            let _ = writeln!(out, "{name}{{origin=\"{o}\"}} {value}");
        };
        one(
            "deadletter_forward_link_up",
            "gauge",
            "1 when the forwarder is connected to the server.",
            u8::from(self.link == LinkState::Up).to_string(),
        );
        for (name, help, v) in [
            (
                "deadletter_forward_forwarded_total",
                "Queue messages forwarded and acknowledged by the server.",
                self.forwarded,
            ),
            (
                "deadletter_forward_forwarded_dlq_total",
                "DLQ entries forwarded and acknowledged by the server.",
                self.forwarded_dlq,
            ),
            (
                "deadletter_forward_duplicates_total",
                "Publishes the server already held (sent again after a lost acknowledgement).",
                self.duplicates,
            ),
            (
                "deadletter_forward_errors_total",
                "Failures of the link to the server.",
                self.errors,
            ),
            (
                "deadletter_forward_returned_total",
                "Replays from the fleet DLQ enqueued back into local queues.",
                self.returned,
            ),
        ] {
            one(name, "counter", help, v.to_string());
        }
        one(
            "deadletter_forward_last_forwarded_timestamp_seconds",
            "gauge",
            "When the last message was forwarded (0 before the first).",
            format!(
                "{:.3}",
                self.last_forwarded_at_ms.unwrap_or(0) as f64 / 1000.0
            ),
        );
        let per_queue: [(&str, &str, LagValue); 3] = [
            (
                "deadletter_forward_lag_messages",
                "Messages of the queue not forwarded yet.",
                |l| Some(l.messages.to_string()),
            ),
            (
                "deadletter_forward_lag_seconds",
                "Age of the queue's oldest message not forwarded yet.",
                // No message, no age: absent rather than 0 (Prometheus' convention), so
                // an alert on the age never fires on a drained queue.
                |l| (l.messages > 0).then(|| format!("{:.3}", l.oldest_age_ms as f64 / 1000.0)),
            ),
            (
                "deadletter_forward_dlq_lag_entries",
                "Entries of the queue's DLQ not forwarded yet.",
                |l| Some(l.dlq_entries.to_string()),
            ),
        ];
        for (name, help, value) in per_queue {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
            for lag in &self.queues {
                if let Some(value) = value(lag) {
                    let queue = escape(&lag.queue);
                    let _ = writeln!(out, "{name}{{origin=\"{o}\",queue=\"{queue}\"}} {value}");
                }
            }
        }
        out
    }
}

/// How a per-queue gauge reads its value (`None`: no sample for that queue).
type LagValue = fn(&QueueLag) -> Option<String>;

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The counters the forwarder's loop updates.
pub(crate) struct Counters {
    inner: Mutex<CountersInner>,
}

struct CountersInner {
    link: LinkState,
    forwarded: u64,
    forwarded_dlq: u64,
    duplicates: u64,
    last_forwarded_at_ms: Option<u64>,
    errors: u64,
    last_error: Option<String>,
    returned: u64,
    per_queue: Vec<u64>,
}

impl Counters {
    pub(crate) fn new(queues: usize) -> Self {
        Counters {
            inner: Mutex::new(CountersInner {
                link: LinkState::Connecting,
                forwarded: 0,
                forwarded_dlq: 0,
                duplicates: 0,
                last_forwarded_at_ms: None,
                errors: 0,
                last_error: None,
                returned: 0,
                per_queue: vec![0; queues],
            }),
        }
    }

    pub(crate) fn link(&self, state: LinkState) {
        self.inner.lock().link = state;
    }

    pub(crate) fn error(&self, e: &deadletter::Error) {
        let mut c = self.inner.lock();
        c.link = LinkState::Down;
        c.errors += 1;
        c.last_error = Some(e.to_string());
    }

    /// Counts a message or entry the server cannot take (the link is fine).
    pub(crate) fn refused(&self, what: String) {
        let mut c = self.inner.lock();
        c.errors += 1;
        c.last_error = Some(what);
    }

    /// `stored` new messages of queue `queue` (index) and `duplicates` the server already
    /// held were acknowledged at `now_ms`.
    pub(crate) fn forwarded(&self, queue: usize, stored: u64, duplicates: u64, now_ms: u64) {
        let mut c = self.inner.lock();
        c.forwarded += stored;
        c.duplicates += duplicates;
        c.per_queue[queue] += stored + duplicates;
        if stored + duplicates > 0 {
            c.last_forwarded_at_ms = Some(now_ms);
        }
    }

    pub(crate) fn forwarded_dlq(&self, stored: u64, duplicates: u64, now_ms: u64) {
        let mut c = self.inner.lock();
        c.forwarded_dlq += stored;
        c.duplicates += duplicates;
        if stored + duplicates > 0 {
            c.last_forwarded_at_ms = Some(now_ms);
        }
    }

    pub(crate) fn returned(&self, n: u64) {
        self.inner.lock().returned += n;
    }

    /// The report, with each queue's lag read from `store` now.
    pub(crate) fn report(
        &self,
        origin: &str,
        store: &Store,
        queues: &[(String, bool)],
        now_ms: u64,
    ) -> ForwardStatus {
        let c = self.inner.lock();
        let lags = queues
            .iter()
            .zip(&c.per_queue)
            .map(|((name, dlq), &forwarded)| {
                let stats = store.queue(name).map(|q| q.stats()).ok();
                let (messages, oldest, dlq_entries) = stats.map_or((0, 0, 0), |s| {
                    let oldest = s.oldest_ready_at_ms.map_or(0, |t| now_ms.saturating_sub(t));
                    (
                        s.counts.ready + s.counts.in_flight,
                        oldest,
                        if *dlq { s.dlq_size } else { 0 },
                    )
                });
                QueueLag {
                    queue: name.clone(),
                    messages,
                    oldest_age_ms: oldest,
                    dlq_entries,
                    forwarded,
                }
            })
            .collect();
        ForwardStatus {
            origin: origin.to_string(),
            link: c.link,
            forwarded: c.forwarded,
            forwarded_dlq: c.forwarded_dlq,
            duplicates: c.duplicates,
            last_forwarded_at_ms: c.last_forwarded_at_ms,
            errors: c.errors,
            last_error: c.last_error.clone(),
            returned: c.returned,
            queues: lags,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_every_metric_with_its_labels() {
        let status = ForwardStatus {
            origin: "dev-\"1".into(),
            link: LinkState::Up,
            forwarded: 10,
            forwarded_dlq: 2,
            duplicates: 3,
            last_forwarded_at_ms: Some(1_500),
            errors: 1,
            last_error: Some("gone".into()),
            returned: 0,
            queues: vec![
                QueueLag {
                    queue: "readings".into(),
                    messages: 7,
                    oldest_age_ms: 2_250,
                    dlq_entries: 1,
                    forwarded: 13,
                },
                QueueLag {
                    queue: "drained".into(),
                    messages: 0,
                    oldest_age_ms: 0,
                    dlq_entries: 0,
                    forwarded: 5,
                },
            ],
        };
        let text = status.to_prometheus();
        assert!(text.contains("deadletter_forward_link_up{origin=\"dev-\\\"1\"} 1\n"));
        assert!(text.contains("deadletter_forward_forwarded_total{origin=\"dev-\\\"1\"} 10\n"));
        assert!(text.contains(
            "deadletter_forward_lag_seconds{origin=\"dev-\\\"1\",queue=\"readings\"} 2.250\n"
        ));
        assert!(text.contains(
            "deadletter_forward_last_forwarded_timestamp_seconds{origin=\"dev-\\\"1\"} 1.500\n"
        ));
        assert_eq!(text.matches("# TYPE").count(), 10);
        // A drained queue has a lag of 0 messages and no age at all.
        assert!(text.contains(
            "deadletter_forward_lag_messages{origin=\"dev-\\\"1\",queue=\"drained\"} 0\n"
        ));
        assert!(
            !text.contains("deadletter_forward_lag_seconds{origin=\"dev-\\\"1\",queue=\"drained\"")
        );
    }
}
