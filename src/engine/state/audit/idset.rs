//! A compact set of message ids: sorted runs of consecutive ids, `(first, count)`. An
//! operator's bulk change (a purge, a replay of one fingerprint) mostly touches runs of
//! neighbouring ids, so the audit trail keeps a few pairs where a list would keep
//! thousands of ids.
//!
//! Invariants: runs are sorted by `first`, never empty, never overlap and never touch (two
//! runs that could be one are one), so equal sets have equal runs.

use serde::{Deserialize, Serialize};

use crate::engine::envelope::MessageId;

/// A set of message ids as sorted runs (see the module documentation).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdSet {
    runs: Vec<(MessageId, u64)>,
}

impl IdSet {
    /// The set of `ids` (any order, duplicates allowed).
    pub fn of(ids: &[MessageId]) -> IdSet {
        let mut sorted = ids.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        let mut runs: Vec<(MessageId, u64)> = Vec::new();
        for id in sorted {
            match runs.last_mut() {
                Some((first, count)) if first.checked_add(*count) == Some(id) => *count += 1,
                _ => runs.push((id, 1)),
            }
        }
        IdSet { runs }
    }

    /// A set from runs as stored; `None` unless they keep the invariants (sorted, non-empty,
    /// apart), so damaged bytes never make a set that answers wrongly.
    pub fn from_runs(runs: Vec<(MessageId, u64)>) -> Option<IdSet> {
        let mut end: Option<u64> = None;
        for &(first, count) in &runs {
            let last_exclusive = first.checked_add(count)?;
            if count == 0 || end.is_some_and(|e| first <= e) {
                return None;
            }
            end = Some(last_exclusive);
        }
        Some(IdSet { runs })
    }

    /// The runs, `(first id, count)`, sorted.
    pub fn runs(&self) -> &[(MessageId, u64)] {
        &self.runs
    }

    /// True when `id` is in the set (a binary search over the runs).
    pub fn contains(&self, id: MessageId) -> bool {
        let i = self.runs.partition_point(|&(first, _)| first <= id);
        i > 0 && {
            let (first, count) = self.runs[i - 1];
            id - first < count
        }
    }

    /// How many ids.
    pub fn len(&self) -> u64 {
        self.runs.iter().map(|&(_, n)| n).sum()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// Every id, ascending.
    pub fn iter(&self) -> impl Iterator<Item = MessageId> + '_ {
        self.runs
            .iter()
            .flat_map(|&(first, count)| first..first + count)
    }
}
