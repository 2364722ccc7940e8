//! Counting and analysing a DLQ: [`Dlq::stats`] reads counters kept as records are
//! applied (its cost does not grow with the DLQ); [`Dlq::analyze`] reads the matching
//! envelopes and groups them into failure patterns ([`Analysis::of`] does the same
//! grouping for any list of entries).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::{Deserialize, Serialize};

use super::fingerprints::Grouper;
use super::{Dlq, Filter, FingerprintStats};

use crate::api::core::types::{DeadLetter, MessageId};
use crate::engine::fingerprint::Fingerprint;
use crate::engine::state::IdMap;
use crate::error::Result;

/// Counts of a DLQ.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct DlqStats {
    /// The DLQ's name.
    pub name: String,
    /// Entries in the DLQ.
    pub total: u64,
    /// Entries not dealt with yet.
    pub pending: u64,
    /// Entries marked reprocessed and still kept.
    pub reprocessed: u64,
    /// Reprocessing that succeeded (replayed then acked, or marked ok).
    pub reprocessed_ok: u64,
    /// Reprocessing that failed (replayed then dead-lettered again, or marked failed).
    pub reprocessed_failed: u64,
    /// Entries replayed to a queue.
    pub replayed: u64,
    /// Entries deleted or purged.
    pub deleted: u64,
    /// Entries removed by retention.
    pub expired: u64,
    /// Age of the oldest entry.
    pub oldest_age_ms: Option<u64>,
    /// Age of the newest entry.
    pub newest_age_ms: Option<u64>,
    /// Entries per error kind.
    pub by_error_kind: BTreeMap<String, u64>,
    /// Entries per worker (`""` when unknown).
    pub by_worker: BTreeMap<String, u64>,
    /// Entries per failure fingerprint (empty on a backend that keeps none; see
    /// [`Dlq::fingerprints`] for their templates and times).
    #[serde(default)]
    pub by_fingerprint: BTreeMap<Fingerprint, u64>,
}

/// A group of at least three failures of the same kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct FailurePattern {
    /// The error kind.
    pub error_kind: String,
    /// Entries in the group.
    pub count: u64,
    /// Earliest dead-lettering.
    pub first_ms: u64,
    /// Latest dead-lettering.
    pub last_ms: u64,
    /// Workers involved.
    pub workers: BTreeSet<String>,
    /// The most frequent error messages with their counts (up to 3).
    pub common_messages: Vec<(String, u64)>,
    /// The most frequent context and attribute values `key=value` with counts (up to 5).
    pub common_context: Vec<(String, u64)>,
}

/// What [`Dlq::analyze`] finds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Analysis {
    /// Entries analysed.
    pub total: u64,
    /// Entries per error kind.
    pub by_error_kind: BTreeMap<String, u64>,
    /// Entries per worker.
    pub by_worker: BTreeMap<String, u64>,
    /// Entries per hour of day (UTC) of dead-lettering.
    pub by_hour_of_day: [u64; 24],
    /// Mean deliveries per entry.
    pub average_attempts: f64,
    /// Earliest and latest dead-lettering.
    pub time_range: Option<(u64, u64)>,
    /// Groups of at least 3 entries by error kind, largest first.
    pub patterns: Vec<FailurePattern>,
    /// The entries grouped by failure fingerprint (error kind and message template), most
    /// entries first: what turns thousands of entries into the few bugs behind them.
    pub fingerprints: Vec<FingerprintStats>,
}

impl Dlq {
    /// Counts, from counters kept incrementally: the cost does not grow with the DLQ.
    pub fn stats(&self) -> DlqStats {
        let now = self.store.now();
        let st = self.store.engine().lock();
        let qs = &st.queues[self.queue as usize];
        let d = &qs.dlq;
        let names = |m: &IdMap<u32, u64>| {
            m.iter()
                .map(|(k, v)| (st.strings.name(*k).to_string(), *v))
                .collect::<BTreeMap<_, _>>()
        };
        let age = |&(t, _): &(u64, MessageId)| now.saturating_sub(t);
        DlqStats {
            name: self.name(),
            total: qs.dlq_order.len() as u64,
            pending: d.pending,
            reprocessed: d.reprocessed_kept,
            reprocessed_ok: d.reprocessed_ok,
            reprocessed_failed: d.reprocessed_failed,
            replayed: d.replayed,
            deleted: d.deleted,
            expired: d.expired,
            oldest_age_ms: qs.dlq_order.keys().next().map(age),
            newest_age_ms: qs.dlq_order.keys().next_back().map(age),
            by_error_kind: names(&d.by_kind),
            by_worker: names(&d.by_worker),
            by_fingerprint: st
                .fingerprints
                .counts(self.queue)
                .map(|(def, n)| (def.id, n))
                .collect(),
        }
    }

    /// Failure distributions and the common patterns of the entries matching `filter`.
    pub fn analyze(&self, filter: &Filter) -> Result<Analysis> {
        let mut analyzer = Analyzer::default();
        self.scan_from(filter, None, usize::MAX, |e| {
            analyzer.add(&e);
            true
        })?;
        Ok(analyzer.finish())
    }
}

impl DlqStats {
    /// The counts of an empty DLQ named `name`: a backend fills in what it counted.
    pub fn new(name: impl Into<String>) -> Self {
        DlqStats {
            name: name.into(),
            ..Self::default()
        }
    }
}

impl Analysis {
    /// The analysis of `entries` (already filtered): the same grouping
    /// [`Dlq::analyze`] does, for backends that hold their entries elsewhere.
    pub fn of<'a>(entries: impl IntoIterator<Item = &'a DeadLetter>) -> Analysis {
        let mut analyzer = Analyzer::default();
        entries.into_iter().for_each(|e| analyzer.add(e));
        analyzer.finish()
    }
}

/// One group of entries of the same error kind, while an analysis runs.
#[derive(Default)]
struct Group {
    count: u64,
    first: u64,
    last: u64,
    workers: BTreeSet<String>,
    messages: HashMap<String, u64>,
    context: HashMap<String, u64>,
}

/// An analysis being built, one entry at a time.
#[derive(Default)]
struct Analyzer {
    total: u64,
    attempts_sum: u64,
    by_error_kind: BTreeMap<String, u64>,
    by_worker: BTreeMap<String, u64>,
    by_hour_of_day: [u64; 24],
    time_range: Option<(u64, u64)>,
    groups: BTreeMap<String, Group>,
    fingerprints: Grouper,
}

impl Analyzer {
    fn add(&mut self, e: &DeadLetter) {
        self.fingerprints.add(e);
        let at = e.dlq.dead_lettered_at_ms;
        self.total += 1;
        self.attempts_sum += e.metadata.delivery_count as u64;
        *self
            .by_error_kind
            .entry(e.failure.error_kind.clone())
            .or_default() += 1;
        let worker = e.dlq.worker.clone().unwrap_or_default();
        *self.by_worker.entry(worker.clone()).or_default() += 1;
        self.by_hour_of_day[((at / 3_600_000) % 24) as usize] += 1;
        self.time_range = Some(match self.time_range {
            None => (at, at),
            Some((lo, hi)) => (lo.min(at), hi.max(at)),
        });
        let g = self
            .groups
            .entry(e.failure.error_kind.clone())
            .or_insert_with(|| Group {
                first: at,
                last: at,
                ..Group::default()
            });
        g.count += 1;
        g.first = g.first.min(at);
        g.last = g.last.max(at);
        if !worker.is_empty() {
            g.workers.insert(worker);
        }
        *g.messages
            .entry(e.failure.error_message.clone())
            .or_default() += 1;
        for (k, v) in e.failure.context.iter().chain(e.metadata.attributes.iter()) {
            *g.context.entry(format!("{k}={v}")).or_default() += 1;
        }
    }

    fn finish(self) -> Analysis {
        let top = |m: HashMap<String, u64>, n: usize| {
            let mut v: Vec<(String, u64)> = m.into_iter().collect();
            v.sort_by(|x, y| y.1.cmp(&x.1).then_with(|| x.0.cmp(&y.0)));
            v.truncate(n);
            v
        };
        let mut patterns: Vec<FailurePattern> = self
            .groups
            .into_iter()
            .filter(|(_, g)| g.count >= 3)
            .map(|(kind, g)| FailurePattern {
                error_kind: kind,
                count: g.count,
                first_ms: g.first,
                last_ms: g.last,
                workers: g.workers,
                common_messages: top(g.messages, 3),
                common_context: top(g.context, 5),
            })
            .collect();
        patterns.sort_by(|x, y| {
            y.count
                .cmp(&x.count)
                .then_with(|| x.error_kind.cmp(&y.error_kind))
        });
        Analysis {
            total: self.total,
            by_error_kind: self.by_error_kind,
            by_worker: self.by_worker,
            by_hour_of_day: self.by_hour_of_day,
            average_attempts: if self.total > 0 {
                self.attempts_sum as f64 / self.total as f64
            } else {
                0.0
            },
            time_range: self.time_range,
            patterns,
            fingerprints: self.fingerprints.finish(),
        }
    }
}
