//! The failure history of a DLQ as a series: how many messages were dead-lettered in each
//! hour of a window, in total and by error kind ([`FailureTimeline`]). The store keeps the
//! counts as dead-letter records are applied, in its checkpoints too, so one call reads
//! them without touching an entry, and a replay, delete or purge does not change the past:
//! the series says what failed, not what is left. Hours older than [`HISTORY_HOURS`] (90
//! days) are not kept.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::Dlq;
use crate::engine::state::{HISTORY_HOURS as KEPT_HOURS, HOUR_MS};
use crate::error::{require, Result};

/// Hours of failure history a store keeps: 90 days.
pub const HISTORY_HOURS: u32 = KEPT_HOURS as u32;

/// Dead-letterings per hour over a window of whole UTC hours, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct FailureTimeline {
    /// Start of the first hour (ms since the epoch).
    pub start_ms: u64,
    /// Length of a bucket: an hour (3,600,000 ms).
    pub bucket_ms: u64,
    /// Dead-letterings in each hour of the window.
    pub buckets: Vec<u64>,
    /// The same, by error kind (only kinds with at least one in the window).
    pub by_kind: BTreeMap<String, Vec<u64>>,
    /// Dead-letterings before the window (within what is kept).
    pub earlier: u64,
    /// True when the counts are of every dead-lettering, kept by the backend whatever
    /// happened to the entries since; false when they are of the entries the DLQ still
    /// holds (a backend that keeps no history).
    pub persisted: bool,
}

impl FailureTimeline {
    /// An empty window of `hours` hours ending with the hour holding `until_ms`.
    pub fn empty(until_ms: u64, hours: u32, persisted: bool) -> Self {
        let end = (until_ms / HOUR_MS + 1) * HOUR_MS;
        FailureTimeline {
            start_ms: end.saturating_sub(u64::from(hours) * HOUR_MS),
            bucket_ms: HOUR_MS,
            buckets: vec![0; hours as usize],
            by_kind: BTreeMap::new(),
            earlier: 0,
            persisted,
        }
    }

    /// Counts one dead-lettering of `kind` at `at_ms` (or in `earlier`); a time past the
    /// window is not counted.
    pub fn count(&mut self, at_ms: u64, kind: &str, n: u64) {
        if at_ms < self.start_ms {
            self.earlier += n;
            return;
        }
        let i = ((at_ms - self.start_ms) / self.bucket_ms) as usize;
        if i < self.buckets.len() {
            self.buckets[i] += n;
            let hours = self.buckets.len();
            self.by_kind
                .entry(kind.to_string())
                .or_insert_with(|| vec![0; hours])[i] += n;
        }
    }

    /// Checks a window's length: 1 to [`HISTORY_HOURS`].
    pub fn check_hours(hours: u32) -> Result<()> {
        require(
            (1..=HISTORY_HOURS).contains(&hours),
            format_args!("a failure timeline covers 1 to {HISTORY_HOURS} hours, not {hours}"),
        )
    }
}

impl Dlq {
    /// Dead-letterings per hour in the `hours` hours (1 to [`HISTORY_HOURS`]) up to and
    /// including the hour holding `until_ms`, from the history the store keeps: one read of
    /// the counts, no entry loaded; replays and deletes since do not change it.
    pub fn failure_timeline(&self, until_ms: u64, hours: u32) -> Result<FailureTimeline> {
        FailureTimeline::check_hours(hours)?;
        let mut t = FailureTimeline::empty(until_ms, hours, true);
        let first_hour = t.start_ms / HOUR_MS;
        let st = self.store.engine().lock();
        let history = &st.queues[self.queue as usize].history;
        let (per_hour, earlier) = history.window(first_hour, u64::from(hours));
        t.earlier = earlier;
        for (i, kinds) in per_hour.into_iter().enumerate() {
            let at = t.start_ms + i as u64 * HOUR_MS;
            for (kind, n) in kinds {
                t.count(at, st.strings.name(kind), n);
            }
        }
        Ok(t)
    }
}
