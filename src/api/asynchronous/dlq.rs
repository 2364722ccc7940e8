//! [`AsyncDlq`]: a [`Dlq`] whose changes return [`Committed`] futures. Its reads (list,
//! get, stats) come from the index and the log's memory map, never wait for an fsync, and
//! complete at once.

use std::time::Duration;

use super::committed::Committed;
use crate::api::core::types::{DeadLetter, MessageId};
use crate::api::dlq::{Dlq, DlqStats, Filter, Page, ReplayOptions, ReplayReport};
use crate::error::Result;

/// A DLQ handle with an async API (feature `async`); see [`AsyncQueue`](super::AsyncQueue)
/// for how its futures complete. Cheap to clone.
#[derive(Debug, Clone)]
pub struct AsyncDlq {
    dlq: Dlq,
}

impl AsyncDlq {
    /// The async face of `dlq`.
    pub fn new(dlq: &Dlq) -> AsyncDlq {
        AsyncDlq { dlq: dlq.clone() }
    }

    /// The blocking handle on the same DLQ.
    pub fn dlq(&self) -> &Dlq {
        &self.dlq
    }

    fn deferred<T>(&self, op: impl FnOnce(&Dlq) -> Result<T>) -> Committed<T> {
        self.dlq.store().deferred(|| op(&self.dlq))
    }

    /// A page of entries ([`Dlq::list`]), browsing without side effects. Cancel-safe: it
    /// changes nothing.
    pub fn list(&self, filter: &Filter, page: Page) -> Committed<Vec<DeadLetter>> {
        Committed::ready(self.dlq.list(filter, page))
    }

    /// One entry by id ([`Dlq::get`]). Cancel-safe: it changes nothing.
    pub fn get(&self, id: MessageId) -> Committed<DeadLetter> {
        Committed::ready(self.dlq.get(id))
    }

    /// Counts, ages and breakdowns ([`Dlq::stats`]), from counters. Cancel-safe.
    pub fn stats(&self) -> Committed<DlqStats> {
        Committed::ready(Ok(self.dlq.stats()))
    }

    /// Replays the entries `filter` selects ([`Dlq::replay`]); the report once the moves
    /// are durable. Cancel-safety: dropped, the replay is still made (each entry moved by
    /// one record: in the DLQ or back in its queue, never both).
    pub fn replay(&self, filter: &Filter, options: &ReplayOptions) -> Committed<ReplayReport> {
        self.deferred(|d| d.replay(filter, options))
    }

    /// Replays the entries `ids` ([`Dlq::replay_ids`]). Cancel-safety: as
    /// [`AsyncDlq::replay`].
    pub fn replay_ids(
        &self,
        ids: &[MessageId],
        options: &ReplayOptions,
    ) -> Committed<ReplayReport> {
        self.deferred(|d| d.replay_ids(ids, options))
    }

    /// Replays one entry ([`Dlq::replay_one`]). Cancel-safety: as [`AsyncDlq::replay`].
    pub fn replay_one(&self, id: MessageId, options: &ReplayOptions) -> Committed<()> {
        self.deferred(|d| d.replay_one(id, options))
    }

    /// Replays one entry with a corrected payload ([`Dlq::replay_corrected`]).
    /// Cancel-safety: as [`AsyncDlq::replay`].
    pub fn replay_corrected(
        &self,
        id: MessageId,
        payload: impl AsRef<[u8]>,
        options: &ReplayOptions,
    ) -> Committed<()> {
        self.deferred(|d| d.replay_corrected(id, payload, options))
    }

    /// Records an outcome handled outside the queue ([`Dlq::mark_reprocessed`]).
    /// Cancel-safety: dropped, the mark is still made.
    pub fn mark_reprocessed(&self, id: MessageId, success: bool) -> Committed<()> {
        self.deferred(|d| d.mark_reprocessed(id, success))
    }

    /// Deletes one entry ([`Dlq::delete`]). Cancel-safety: dropped, it is still deleted.
    pub fn delete(&self, id: MessageId) -> Committed<()> {
        self.deferred(|d| d.delete(id))
    }

    /// Deletes the entries `filter` selects ([`Dlq::delete_matching`]). Cancel-safety: as
    /// [`AsyncDlq::delete`].
    pub fn delete_matching(&self, filter: &Filter) -> Committed<u64> {
        self.deferred(|d| d.delete_matching(filter))
    }

    /// Removes entries older than `older_than` ([`Dlq::purge`]). Cancel-safety: as
    /// [`AsyncDlq::delete`].
    pub fn purge(&self, older_than: Duration, include_pending: bool) -> Committed<u64> {
        self.deferred(|d| d.purge(older_than, include_pending))
    }
}
