//! The failure history of one DLQ: how many messages were dead-lettered in each hour, by
//! error kind. It is counted as dead-letter records are applied (one map update each), so
//! it is kept by checkpoints and rebuilt by replaying the log like every other count, and
//! it only ever grows: a replay, delete or purge of an entry does not change the hour it
//! was dead-lettered in.
//!
//! Invariants:
//! - hours are UTC hours since the epoch (`dead_lettered_at_ms / 3_600_000`), taken from
//!   the records, never from the clock, so a rebuild from the log gives the same history;
//! - only the [`HISTORY_HOURS`] hours up to the newest one seen are kept: a count older
//!   than that is dropped when a newer hour arrives, and a dead-lettering older than that
//!   is not counted (the size is bounded by hours x error kinds, whatever the traffic).

use std::collections::BTreeMap;

/// Milliseconds in an hour.
pub const HOUR_MS: u64 = 3_600_000;

/// Hours of history kept: 90 days.
pub const HISTORY_HOURS: u64 = 90 * 24;

/// Dead-letterings per (hour, interned error kind).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FailureHistory {
    counts: BTreeMap<(u64, u32), u64>,
    newest_hour: u64,
}

impl FailureHistory {
    /// A history of these (hour, kind, count) entries, as a checkpoint holds them.
    pub fn from_counts(entries: impl IntoIterator<Item = (u64, u32, u64)>) -> Self {
        let mut h = FailureHistory::default();
        for (hour, kind, count) in entries {
            h.add(hour, kind, count);
        }
        h
    }

    /// Every (hour, kind, count), oldest hour first.
    pub fn counts(&self) -> impl Iterator<Item = (u64, u32, u64)> + '_ {
        self.counts
            .iter()
            .map(|(&(hour, kind), &n)| (hour, kind, n))
    }

    /// Counts one dead-lettering at `at_ms` of error kind `kind`.
    pub fn record(&mut self, at_ms: u64, kind: u32) {
        self.add(at_ms / HOUR_MS, kind, 1);
    }

    fn add(&mut self, hour: u64, kind: u32, count: u64) {
        if hour + HISTORY_HOURS <= self.newest_hour {
            return;
        }
        *self.counts.entry((hour, kind)).or_default() += count;
        if hour > self.newest_hour {
            self.newest_hour = hour;
            let keep_from = (hour + 1).saturating_sub(HISTORY_HOURS);
            while self
                .counts
                .first_key_value()
                .is_some_and(|(&(h, _), _)| h < keep_from)
            {
                self.counts.pop_first();
            }
        }
    }

    /// Dead-letterings in each hour from `first_hour` on (`hours` of them), by kind
    /// (`kinds[i]` for hour `first_hour + i`), and in total before `first_hour`.
    pub fn window(&self, first_hour: u64, hours: u64) -> (Vec<Vec<(u32, u64)>>, u64) {
        let mut per_hour = vec![Vec::new(); hours as usize];
        let end = first_hour.saturating_add(hours);
        for (&(hour, kind), &n) in self.counts.range((first_hour, 0)..(end, 0)) {
            per_hour[(hour - first_hour) as usize].push((kind, n));
        }
        let earlier = self.counts.range(..(first_hour, 0)).map(|(_, &n)| n).sum();
        (per_hour, earlier)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_a_bounded_window() {
        let mut h = FailureHistory::default();
        h.record(0, 1);
        h.record(HOUR_MS, 1);
        h.record(HISTORY_HOURS * HOUR_MS, 1); // hour 0 falls out
        assert_eq!(
            h.counts().map(|(hour, ..)| hour).collect::<Vec<_>>(),
            [1, HISTORY_HOURS]
        );
        h.record(0, 1); // too old to count
        assert_eq!(h.counts().count(), 2);
    }
}
