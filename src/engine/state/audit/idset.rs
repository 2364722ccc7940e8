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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_are_minimal_and_answer_membership() {
        let set = IdSet::of(&[9, 3, 4, 5, 5, 7, 8, 20]);
        assert_eq!(set.runs(), &[(3, 3), (7, 3), (20, 1)]);
        assert_eq!(set.len(), 7);
        assert_eq!(set.iter().collect::<Vec<_>>(), [3, 4, 5, 7, 8, 9, 20]);
        for id in 0..25 {
            assert_eq!(
                set.contains(id),
                [3, 4, 5, 7, 8, 9, 20].contains(&id),
                "{id}"
            );
        }
        assert!(IdSet::of(&[]).is_empty());
    }

    #[test]
    fn stored_runs_that_break_the_invariants_are_refused() {
        assert!(IdSet::from_runs(vec![(1, 2), (5, 1)]).is_some());
        assert!(IdSet::from_runs(vec![(1, 0)]).is_none());
        assert!(IdSet::from_runs(vec![(5, 1), (1, 1)]).is_none());
        assert!(IdSet::from_runs(vec![(1, 2), (3, 1)]).is_none());
        assert!(IdSet::from_runs(vec![(u64::MAX, 2)]).is_none());
    }
}
