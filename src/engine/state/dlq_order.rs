//! The browse order of one DLQ, with a compact summary of every entry: what a listing's
//! filter checks, so that choosing a page reads neither the log nor the per-id tables.
//!
//! A listing walks the entries in browse order (dead-lettering time, then id) and keeps
//! those its filter accepts. Checking an entry against the id-keyed tables (`State::dead`,
//! `State::msgs`, the fingerprint index) costs a few hash lookups at random places in
//! memory; the summary sits next to its key in the ordered map, so the walk reads memory in
//! order and only the entries of the page returned are looked up elsewhere.
//!
//! Invariants:
//! - the keys are exactly the DLQ's entries, `(dead_at, id)`, as `State::dead` holds them;
//! - a summary equals what the tables say of its entry: interned error kind and worker of
//!   its `DeadInfo`, pending while its status is `Pending`, the delivery count of its
//!   `Msg` (which does not change while it is a DLQ entry), and the dense index of its
//!   fingerprint in `FingerprintIndex` ([`NO_FINGERPRINT`] while it has none);
//! - nothing here is written to disk: checkpoints hold the tables, and the summaries are
//!   rebuilt from them at open (`State::restore`), the fingerprints when those are
//!   computed.
//!
//! Memory: a summary is 20 bytes, next to a 16-byte key, so an entry takes 36 bytes of a
//! B-tree node instead of the 16 of the key alone (about 37 bytes more per entry in nodes
//! filled in order, which are a little over half full).

use std::collections::BTreeMap;

use super::{DeadInfo, DeadStatus, State};
use crate::engine::envelope::MessageId;

/// The fingerprint index of an entry that has none (fingerprints are not kept, or not
/// computed yet).
pub const NO_FINGERPRINT: u32 = u32::MAX;

/// What a filter checks of one DLQ entry (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntrySummary {
    /// Interned error kind.
    pub kind: u32,
    /// Interned worker name (0: none).
    pub worker: u32,
    /// Deliveries counted.
    pub attempts: u32,
    /// Dense index of its fingerprint, or [`NO_FINGERPRINT`].
    pub fingerprint: u32,
    /// Not marked reprocessed.
    pub pending: bool,
}

const _: () = assert!(std::mem::size_of::<EntrySummary>() == 20);

impl EntrySummary {
    /// The summary of DLQ entry `d`, delivered `attempts` times, with its fingerprint's
    /// dense index.
    pub fn of(d: &DeadInfo, attempts: u32, fingerprint: u32) -> EntrySummary {
        EntrySummary {
            kind: d.kind,
            worker: d.worker,
            attempts,
            fingerprint,
            pending: d.status == DeadStatus::Pending,
        }
    }
}

/// A DLQ's entries by `(dead_at, id)`, each with its [`EntrySummary`].
pub type DlqOrder = BTreeMap<(u64, MessageId), EntrySummary>;

impl State {
    /// The first DLQ entry whose summary disagrees with the tables (or that the tables do
    /// not hold in that queue's DLQ at that time), if any: the invariant of this module,
    /// checked by the simulation's census.
    #[cfg_attr(not(feature = "sim"), allow(dead_code))]
    pub fn summary_mismatch(&self) -> Option<MessageId> {
        for (q, qs) in self.queues.iter().enumerate() {
            for (&(at, id), s) in qs.dlq_order.range(..) {
                let (Some(d), Some(m)) = (self.dead.get(&id), self.msgs.get(&id)) else {
                    return Some(id);
                };
                let fingerprint = self.fingerprints.dense_of(id).unwrap_or(NO_FINGERPRINT);
                let expected = EntrySummary::of(d, m.attempts, fingerprint);
                if m.queue() as usize != q || d.dead_at != at || *s != expected {
                    return Some(id);
                }
            }
        }
        None
    }
}
