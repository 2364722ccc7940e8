//! The fingerprint of every DLQ entry, kept beside the index: which entries share one
//! template, and how many each DLQ holds of each.
//!
//! Invariants:
//! - while enabled, every DLQ entry whose envelope was applied has exactly one fingerprint
//!   here, and `counts[(queue, fp)]` is the number of entries of that DLQ with it (zero
//!   counts are removed); adding and removing an entry is O(1);
//! - nothing here is written to disk: a fingerprint is a function of the entry's envelope,
//!   so entries restored from a checkpoint get theirs from their envelopes at open
//!   (`Engine::open` calls [`FingerprintIndex::missing`] and [`FingerprintIndex::add`]);
//! - the index compaction keeps for checkpoints leaves it disabled (it never answers a
//!   query), so it pays nothing for it.

use std::collections::HashMap;

use super::IdMap;
use crate::engine::envelope::{FailureInfo, MessageId};
use crate::engine::fingerprint::{frame_key, message_template, Fingerprint};
use crate::engine::record::QueueId;

/// What a fingerprint stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FingerprintDef {
    /// Its stable id.
    pub id: Fingerprint,
    /// The error kind.
    pub kind: String,
    /// The normalised message.
    pub template: String,
}

/// Fingerprints of DLQ entries (see the module documentation).
#[derive(Debug, Default)]
pub struct FingerprintIndex {
    /// `Some(frames)` when fingerprints are kept, with the number of trace frames they use.
    frames: Option<usize>,
    /// Fingerprints seen, by dense index.
    defs: Vec<FingerprintDef>,
    by_id: HashMap<Fingerprint, u32>,
    /// The dense index of each DLQ entry's fingerprint.
    of_entry: IdMap<MessageId, u32>,
    /// Entries per (DLQ, fingerprint).
    counts: HashMap<(QueueId, u32), u64>,
}

impl FingerprintIndex {
    /// Starts keeping fingerprints built from the message and `frames` trace frames.
    pub fn enable(&mut self, frames: usize) {
        self.frames = Some(frames);
    }

    /// True when fingerprints are kept.
    pub fn enabled(&self) -> bool {
        self.frames.is_some()
    }

    /// Records the fingerprint of DLQ entry `id` of `queue`'s DLQ, and returns its dense
    /// index (`None` while fingerprints are not kept).
    pub fn add(&mut self, queue: QueueId, id: MessageId, failure: &FailureInfo) -> Option<u32> {
        let frames = self.frames?;
        if let Some(&dense) = self.of_entry.get(&id) {
            return Some(dense);
        }
        let template = message_template(&failure.error_message);
        let trace = failure
            .stack_trace
            .as_deref()
            .or(failure.details.as_deref());
        let fp =
            Fingerprint::of_template(&failure.error_kind, &template, &frame_key(trace, frames));
        let dense = match self.by_id.get(&fp) {
            Some(&d) => d,
            None => {
                let d = self.defs.len() as u32;
                self.defs.push(FingerprintDef {
                    id: fp,
                    kind: failure.error_kind.clone(),
                    template,
                });
                self.by_id.insert(fp, d);
                d
            }
        };
        self.of_entry.insert(id, dense);
        *self.counts.entry((queue, dense)).or_default() += 1;
        Some(dense)
    }

    /// The dense index of fingerprint `fp`, if any entry ever had it (dense indexes are
    /// never reused).
    pub fn dense(&self, fp: Fingerprint) -> Option<u32> {
        self.by_id.get(&fp).copied()
    }

    /// Forgets the fingerprint of an entry that left `queue`'s DLQ.
    pub fn remove(&mut self, queue: QueueId, id: MessageId) {
        let Some(dense) = self.of_entry.remove(&id) else {
            return;
        };
        if let Some(n) = self.counts.get_mut(&(queue, dense)) {
            *n -= 1;
            if *n == 0 {
                self.counts.remove(&(queue, dense));
            }
        }
    }

    /// The fingerprint of DLQ entry `id`, if known.
    pub fn of(&self, id: MessageId) -> Option<&FingerprintDef> {
        self.of_entry.get(&id).map(|&d| &self.defs[d as usize])
    }

    /// The dense index of entry `id`'s fingerprint, if known (the simulation's census).
    #[cfg_attr(not(feature = "sim"), allow(dead_code))]
    pub fn dense_of(&self, id: MessageId) -> Option<u32> {
        self.of_entry.get(&id).copied()
    }

    /// Entry counts of `queue`'s DLQ by fingerprint.
    pub fn counts(&self, queue: QueueId) -> impl Iterator<Item = (&FingerprintDef, u64)> + '_ {
        self.counts
            .iter()
            .filter(move |((q, _), _)| *q == queue)
            .map(|(&(_, d), &n)| (&self.defs[d as usize], n))
    }

    /// Which of `dead` (DLQ entries) have no fingerprint yet (those restored from a
    /// checkpoint), when fingerprints are kept.
    pub fn missing<'a>(
        &'a self,
        dead: impl Iterator<Item = MessageId> + 'a,
    ) -> impl Iterator<Item = MessageId> + 'a {
        dead.filter(move |id| self.enabled() && !self.of_entry.contains_key(id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure(kind: &str, msg: &str) -> FailureInfo {
        FailureInfo::new(kind, msg, 0)
    }

    #[test]
    fn counts_follow_entries_in_and_out() {
        let mut ix = FingerprintIndex::default();
        ix.add(0, 1, &failure("E", "order 1"));
        assert!(ix.of(1).is_none(), "disabled: nothing kept");
        ix.enable(0);
        ix.add(0, 1, &failure("E", "order 1"));
        ix.add(0, 2, &failure("E", "order 2"));
        ix.add(1, 3, &failure("E", "order 3"));
        ix.add(0, 4, &failure("F", "order 4"));
        ix.add(0, 2, &failure("E", "order 2")); // twice: counted once
        let fp = ix.of(1).unwrap().id;
        let dense = ix.dense(fp);
        assert!(dense.is_some() && ix.dense_of(2) == dense && ix.dense_of(3) == dense);
        assert_ne!(ix.dense_of(4), dense);
        let mut q0: Vec<(String, u64)> = ix.counts(0).map(|(d, n)| (d.kind.clone(), n)).collect();
        q0.sort();
        assert_eq!(q0, [("E".to_string(), 2), ("F".to_string(), 1)]);
        ix.remove(0, 1);
        ix.remove(0, 2);
        ix.remove(0, 2);
        assert_eq!(ix.counts(0).count(), 1);
        assert_eq!(ix.counts(1).map(|(_, n)| n).sum::<u64>(), 1);
        assert_eq!(ix.of(3).unwrap().template, "order <num>");
        assert_eq!(
            ix.missing([1, 3, 9].into_iter()).collect::<Vec<_>>(),
            [1, 9]
        );
        // A new entry of a known fingerprint gets its dense index, kept once gone.
        assert_eq!(ix.add(1, 6, &failure("E", "order 6")), dense);
    }
}
