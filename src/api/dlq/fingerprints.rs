//! Failure fingerprints of a DLQ: how many entries share each error kind and message
//! template, since when, and over the last day ([`Dlq::fingerprints`]); and the same
//! grouping for any list of entries ([`FingerprintStats::group`], used by
//! [`Dlq::analyze`](crate::Dlq::analyze)).
//!
//! The index keeps each entry's fingerprint and the count per fingerprint, both updated
//! in O(1) as entries arrive and leave. The times and hourly counts come from one pass over
//! the DLQ's ordered index in memory: no envelope is read.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::Dlq;
use crate::api::core::types::{DeadLetter, MessageId};
use crate::engine::fingerprint::{message_template, Fingerprint};

const HOUR_MS: u64 = 3_600_000;

/// The entries of one failure fingerprint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct FingerprintStats {
    /// The fingerprint.
    pub fingerprint: Fingerprint,
    /// The error kind.
    pub error_kind: String,
    /// The normalised message ([`crate::dlq::message_template`]).
    pub template: String,
    /// Entries with it.
    pub count: u64,
    /// When the oldest of them was dead-lettered (ms).
    pub first_seen_ms: u64,
    /// When the newest of them was dead-lettered (ms).
    pub last_seen_ms: u64,
    /// One entry with it (the oldest), to look at.
    pub example_id: MessageId,
    /// The time the hourly counts end at (ms): now for [`Dlq::fingerprints`], the newest
    /// entry's time in an [`Analysis`](crate::dlq::Analysis).
    pub as_of_ms: u64,
    /// Entries dead-lettered in each of the 24 hours before `as_of_ms`: `[0]` is the last
    /// hour, `[23]` the hour that ended 23 hours before.
    pub last_day_by_hour: [u64; 24],
}

impl FingerprintStats {
    fn new(fingerprint: Fingerprint, kind: &str, template: String, id: MessageId) -> Self {
        FingerprintStats {
            fingerprint,
            error_kind: kind.to_string(),
            template,
            count: 0,
            first_seen_ms: u64::MAX,
            last_seen_ms: 0,
            example_id: id,
            as_of_ms: 0,
            last_day_by_hour: [0; 24],
        }
    }

    fn add(&mut self, id: MessageId, at: u64) {
        self.count += 1;
        if at < self.first_seen_ms {
            self.first_seen_ms = at;
            self.example_id = id;
        }
        self.last_seen_ms = self.last_seen_ms.max(at);
    }

    fn count_hour(&mut self, at: u64, as_of: u64) {
        let hour = as_of.checked_sub(at).map(|ago| (ago / HOUR_MS) as usize);
        if let Some(n) = hour.and_then(|h| self.last_day_by_hour.get_mut(h)) {
            *n += 1;
        }
    }

    /// Groups `entries` by fingerprint (their own, or computed without frames), most
    /// entries first; hourly counts end at the newest entry's time.
    pub fn group<'a>(entries: impl IntoIterator<Item = &'a DeadLetter>) -> Vec<FingerprintStats> {
        let mut grouper = Grouper::default();
        entries.into_iter().for_each(|e| grouper.add(e));
        grouper.finish()
    }
}

/// Groups entries by fingerprint one at a time (for an analysis that streams them).
#[derive(Default)]
pub(super) struct Grouper {
    groups: HashMap<Fingerprint, FingerprintStats>,
    times: Vec<(Fingerprint, u64)>,
}

impl Grouper {
    pub(super) fn add(&mut self, e: &DeadLetter) {
        let f = &e.failure;
        let fp = e
            .fingerprint
            .unwrap_or_else(|| Fingerprint::of_failure(f, 0));
        let at = e.dlq.dead_lettered_at_ms;
        self.groups
            .entry(fp)
            .or_insert_with(|| {
                let template = message_template(&f.error_message);
                FingerprintStats::new(fp, &f.error_kind, template, e.id())
            })
            .add(e.id(), at);
        self.times.push((fp, at));
    }

    pub(super) fn finish(mut self) -> Vec<FingerprintStats> {
        let as_of = self.times.iter().map(|&(_, at)| at).max().unwrap_or(0);
        for (fp, at) in self.times {
            if let Some(g) = self.groups.get_mut(&fp) {
                g.count_hour(at, as_of);
            }
        }
        sorted(self.groups.into_values(), as_of)
    }
}

fn sorted(groups: impl Iterator<Item = FingerprintStats>, as_of: u64) -> Vec<FingerprintStats> {
    let mut v: Vec<FingerprintStats> = groups.collect();
    v.iter_mut().for_each(|g| g.as_of_ms = as_of);
    v.sort_by(|a, b| {
        b.count
            .cmp(&a.count)
            .then_with(|| a.first_seen_ms.cmp(&b.first_seen_ms))
            .then_with(|| a.fingerprint.cmp(&b.fingerprint))
    });
    v
}

impl Dlq {
    /// The DLQ's entries grouped by failure fingerprint, most entries first: count, first
    /// and last seen, an example entry, and counts per hour over the last day. Reads the
    /// index only.
    ///
    /// ```
    /// use deadletter::{Config, Failure, Filter, Page, Store};
    /// use deadletter::queue::FailureReport;
    ///
    /// # let dir = tempfile::tempdir().unwrap();
    /// let store = Store::open(&dir, Config::fast())?;
    /// let orders = store.queue("orders")?;
    /// orders.enqueue_batch(&["a", "b", "c"])?;
    /// for (i, msg) in orders.lease(3)?.into_iter().enumerate() {
    ///     let lost = Failure::permanent("NotFound", format!("order ORD-{i} not found"));
    ///     orders.dead_letter(&msg, &FailureReport::new(&lost))?;
    /// }
    /// let dlq = orders.dlq();
    /// let groups = dlq.fingerprints();
    /// assert_eq!(groups.len(), 1);
    /// assert_eq!(groups[0].template, "order ORD-<num> not found");
    /// assert_eq!(groups[0].count, 3);
    /// assert_eq!(groups[0].last_day_by_hour[0], 3);
    /// // Every operation that takes a filter takes one fingerprint.
    /// let same = Filter::all().fingerprint(groups[0].fingerprint);
    /// assert_eq!(dlq.delete_matching(&same)?, 3);
    /// # Ok::<(), deadletter::Error>(())
    /// ```
    pub fn fingerprints(&self) -> Vec<FingerprintStats> {
        let now = self.store.now();
        let st = self.store.engine().lock();
        let mut groups: HashMap<Fingerprint, FingerprintStats> = HashMap::new();
        for &(at, id) in st.queues[self.queue as usize].dlq_order.keys() {
            let Some(def) = st.fingerprints.of(id) else {
                continue;
            };
            let g = groups.entry(def.id).or_insert_with(|| {
                FingerprintStats::new(def.id, &def.kind, def.template.clone(), id)
            });
            g.add(id, at);
            g.count_hour(at, now);
        }
        sorted(groups.into_values(), now)
    }
}
