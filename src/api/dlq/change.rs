//! Changing a DLQ other than by replay: importing an exported entry, marking an entry
//! reprocessed, deleting, purging, and retention. Each change is one record.

use std::time::Duration;

use super::{Dlq, Filter};
use crate::api::core::types::{DeadLetter, MessageId};
use crate::engine::op_entry;
use crate::engine::record::Op;
use crate::engine::state::{AuditAction, State};
use crate::error::Result;

impl Dlq {
    /// Imports an exported entry into this DLQ (one record): payload, history and metadata
    /// are kept; the entry gets a new id in this store, which is returned. Its status is
    /// pending again. (To import many, once each, see [`crate::dlq::Importer`].)
    pub fn import(&self, entry: &DeadLetter) -> Result<MessageId> {
        self.store.check_size(entry.payload.len())?;
        let at = self.store.now();
        self.store.commit_with(|st| {
            let id = st.next_id;
            let put = super::import::imported_put(entry, id, self.queue)?;
            let audit = self
                .store
                .audit_record(at, AuditAction::Import, &[id], None)?;
            Ok((vec![put, audit], id))
        })
    }

    /// Records that an entry was reprocessed outside the queue, with its outcome. The entry
    /// stays in the DLQ (no longer pending) until deleted or purged.
    pub fn mark_reprocessed(&self, id: MessageId, success: bool) -> Result<()> {
        let at = self.store.now();
        self.store.commit_with(|st| {
            self.entry_ref(st, id)?;
            let op = Op::MarkReprocessed { id, success, at };
            let audit = self
                .store
                .audit_record(at, AuditAction::MarkReprocessed, &[id], None)?;
            Ok((vec![op_entry(op)?, audit], ()))
        })
    }

    /// Deletes one entry for good.
    pub fn delete(&self, id: MessageId) -> Result<()> {
        self.delete_ids(&[id], Some(AuditAction::Delete), false)
            .map(|_| ())
    }

    /// Deletes the entries matching `filter`; returns how many.
    pub fn delete_matching(&self, filter: &Filter) -> Result<u64> {
        self.delete_matching_as(filter, AuditAction::Delete)
    }

    fn delete_matching_as(&self, filter: &Filter, action: AuditAction) -> Result<u64> {
        let ids = self.ids(filter, None)?;
        let deleted = self.delete_ids(&ids, Some(action), false)?;
        Ok(deleted.len() as u64)
    }

    /// Deletes those of `ids` that are entries of this DLQ (one record) and returns them;
    /// the others (replayed or deleted since they were selected) are left out.
    pub fn delete_present(&self, ids: &[MessageId]) -> Result<Vec<MessageId>> {
        self.delete_ids(ids, Some(AuditAction::Delete), true)
    }

    /// Deletes `ids` (one record), followed by the audit record of `action`; without one,
    /// the deletion is retention's (the store's own, which its record says). An id that is
    /// no entry of this DLQ is an error, or with `only_present` left out. Returns the ids
    /// deleted.
    fn delete_ids(
        &self,
        ids: &[MessageId],
        action: Option<AuditAction>,
        only_present: bool,
    ) -> Result<Vec<MessageId>> {
        let at = self.store.now();
        self.store.commit_with(|st| {
            let mut present = Vec::with_capacity(ids.len());
            for &id in ids {
                match self.entry_ref(st, id) {
                    Ok(_) => present.push(id),
                    Err(_) if only_present => {}
                    Err(err) => return Err(err),
                }
            }
            if present.is_empty() {
                return Ok((Vec::new(), present));
            }
            let expired = action.is_none();
            let mut batch = vec![op_entry(Op::Delete {
                at,
                ids: present.clone(),
                expired,
            })?];
            if let Some(action) = action {
                batch.push(self.store.audit_record(at, action, &present, None)?);
            }
            Ok((batch, present))
        })
    }

    /// Deletes entries dead-lettered more than `older_than` ago. Pending entries are kept
    /// unless `include_pending`. Returns how many were deleted.
    pub fn purge(&self, older_than: Duration, include_pending: bool) -> Result<u64> {
        self.purge_matching(&Filter::all(), older_than, include_pending)
    }

    /// Deletes the entries matching `filter` that were dead-lettered more than
    /// `older_than` ago (by the store's clock), reprocessed ones only unless
    /// `include_pending`: [`purge`](Dlq::purge) narrowed by a filter, such as one
    /// fingerprint. Returns how many were deleted.
    pub fn purge_matching(
        &self,
        filter: &Filter,
        older_than: Duration,
        include_pending: bool,
    ) -> Result<u64> {
        match filter.purge_cutoff(self.cutoff(older_than), include_pending) {
            Some(f) => self.delete_matching_as(&f, AuditAction::Purge),
            None => Ok(0),
        }
    }

    /// The dead-lettering time before which an entry is older than `older_than` now.
    fn cutoff(&self, older_than: Duration) -> u64 {
        let now = self.store.now();
        now.saturating_sub(older_than.as_millis() as u64)
    }

    /// Removes entries whose retention passed; returns how many. Compaction does this on
    /// its own; this is for tools and tests.
    pub fn expire_retention(&self) -> Result<u64> {
        self.expire_retention_at(self.store.expiry_now())
    }

    pub(crate) fn expire_retention_at(&self, now: u64) -> Result<u64> {
        let ids: Vec<MessageId> = {
            let st = self.store.engine().lock();
            st.queues[self.queue as usize]
                .dlq_order
                .keys()
                .filter(|(_, id)| retention_passed(&st, id, now))
                .map(|&(_, id)| id)
                .collect()
        };
        Ok(self.delete_ids(&ids, None, false)?.len() as u64)
    }
}

/// True when DLQ entry `id` is past its retention at `now`.
pub(crate) fn retention_passed(st: &State, id: &MessageId, now: u64) -> bool {
    let expires_at = st.dead.get(id).and_then(|d| d.expires_at);
    expires_at.is_some_and(|t| t <= now)
}
