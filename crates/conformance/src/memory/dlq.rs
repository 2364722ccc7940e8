//! [`MemoryDlq`]: the DLQ of a queue of the in-memory backend, implementing
//! [`DeadLetterQueue`]. Entries are kept whole, so every filter, page, count and
//! analysis is computed from them with the `deadletter` crate's own helpers
//! ([`Filter::matches`], [`Cursor`], [`Analysis::of`]), as on any backend.

use std::sync::Arc;
use std::time::Duration;

use deadletter::dlq::{Analysis, Cursor, DeadLetter, DlqAlert, DlqStats, EntryStatus};
use deadletter::queue::MessageId;
use deadletter::replay::ReplayReport;
use deadletter::{DeadLetterQueue, Error, Filter, Page, ReplayOptions, Result};

use crate::memory::state::{dlq_name, now_ms, Memory};

/// The DLQ of one queue of a [`Memory`] namespace. Cheap to clone.
#[derive(Clone)]
pub struct MemoryDlq {
    memory: Memory,
    queue: Arc<str>,
}

impl std::fmt::Debug for MemoryDlq {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryDlq")
            .field("name", &dlq_name(&self.queue))
            .finish()
    }
}

impl Memory {
    /// The DLQ named `name` (such as `"orders-dlq"`), or the DLQ of queue `name`.
    pub fn dlq(&self, name: &str) -> Result<MemoryDlq> {
        let queue = self.with(|st| {
            st.queue_of_dlq(name)
                .ok_or_else(|| Error::UnknownQueue(name.to_string()))
        })?;
        Ok(MemoryDlq::new(self.clone(), queue.into()))
    }
}

impl MemoryDlq {
    pub(crate) fn new(memory: Memory, queue: Arc<str>) -> MemoryDlq {
        MemoryDlq { memory, queue }
    }

    fn entries(&self, filter: &Filter) -> Result<Vec<DeadLetter>> {
        self.memory.with(|st| st.entries(&self.queue, filter))
    }

    fn replay_with(
        &self,
        id: MessageId,
        options: &ReplayOptions,
        payload: Option<&[u8]>,
    ) -> Result<()> {
        self.memory
            .with(|st| st.replay(&self.queue, id, options, payload))
    }
}

impl DeadLetterQueue for MemoryDlq {
    fn name(&self) -> String {
        dlq_name(&self.queue)
    }
    fn queue_name(&self) -> &str {
        &self.queue
    }
    fn len(&self) -> Result<u64> {
        Ok(self.entries(&Filter::all())?.len() as u64)
    }
    fn list(&self, filter: &Filter, page: Page) -> Result<Vec<DeadLetter>> {
        let bound = match (page.before_cursor, page.after_cursor, page.after) {
            (Some(c), ..) => Some((c, true)),
            (None, Some(c), _) => Some((c, false)),
            (None, None, Some(id)) => Some((Cursor::of(&self.get(id)?), false)),
            (None, None, None) => None,
        };
        let mut entries = self.entries(filter)?;
        Ok(match bound {
            None => entries.into_iter().take(page.limit).collect(),
            Some((bound, false)) => entries
                .into_iter()
                .filter(|e| Cursor::of(e) > bound)
                .take(page.limit)
                .collect(),
            Some((bound, true)) => {
                entries.retain(|e| Cursor::of(e) < bound);
                let skip = entries.len().saturating_sub(page.limit);
                entries.split_off(skip)
            }
        })
    }
    fn get(&self, id: MessageId) -> Result<DeadLetter> {
        self.memory
            .with(|st| st.entry(&self.queue, id).map(|e| e.clone()))
    }
    fn ids(&self, filter: &Filter, limit: Option<usize>) -> Result<Vec<MessageId>> {
        let entries = self.entries(filter)?;
        let limit = limit.unwrap_or(usize::MAX);
        Ok(entries.iter().take(limit).map(DeadLetter::id).collect())
    }
    fn stats(&self) -> Result<DlqStats> {
        let snap = self.memory.with(|st| st.snapshot(&self.queue))?;
        let now = now_ms();
        let c = snap.counts;
        let mut s = DlqStats::new(dlq_name(&self.queue));
        for e in &snap.entries {
            s.total += 1;
            match e.status {
                EntryStatus::Pending => s.pending += 1,
                EntryStatus::Reprocessed { .. } => s.reprocessed += 1,
            }
            *s.by_error_kind
                .entry(e.failure.error_kind.clone())
                .or_default() += 1;
            let worker = e.dlq.worker.clone().unwrap_or_default();
            *s.by_worker.entry(worker).or_default() += 1;
        }
        let times = snap.entries.iter().map(|e| e.dlq.dead_lettered_at_ms);
        s.oldest_age_ms = times.clone().min().map(|t| now.saturating_sub(t));
        s.newest_age_ms = times.max().map(|t| now.saturating_sub(t));
        s.reprocessed_ok = c.reprocessed_ok;
        s.reprocessed_failed = c.reprocessed_failed;
        s.replayed = c.replayed;
        s.deleted = c.deleted;
        s.expired = c.retention_expired;
        Ok(s)
    }
    fn analyze(&self, filter: &Filter) -> Result<Analysis> {
        Ok(Analysis::of(&self.entries(filter)?))
    }
    fn replay(&self, filter: &Filter, options: &ReplayOptions) -> Result<ReplayReport> {
        let ids = self.ids(filter, options.limit)?;
        self.replay_ids(&ids, options)
    }
    fn replay_ids(&self, ids: &[MessageId], options: &ReplayOptions) -> Result<ReplayReport> {
        let mut report = ReplayReport::new(options.dry_run);
        for &id in ids {
            match self.replay_with(id, options, None) {
                Ok(()) => report.replayed.push(id),
                Err(e @ (Error::NotFound(_) | Error::AlreadyReprocessed(_))) => {
                    report.failed.push((id, e.to_string()))
                }
                Err(e) => return Err(e),
            }
        }
        Ok(report)
    }
    fn replay_one(&self, id: MessageId, options: &ReplayOptions) -> Result<()> {
        self.replay_with(id, options, None)
    }
    fn replay_corrected(
        &self,
        id: MessageId,
        payload: impl AsRef<[u8]>,
        options: &ReplayOptions,
    ) -> Result<()> {
        self.replay_with(id, options, Some(payload.as_ref()))
    }
    fn mark_reprocessed(&self, id: MessageId, success: bool) -> Result<()> {
        self.memory.with(|st| st.mark(&self.queue, id, success))
    }
    fn delete(&self, id: MessageId) -> Result<()> {
        self.memory.with(|st| {
            st.entry(&self.queue, id)?;
            st.delete(&self.queue, &[id]).map(|_| ())
        })
    }
    fn delete_matching(&self, filter: &Filter) -> Result<u64> {
        self.memory.with(|st| {
            let entries = st.entries(&self.queue, filter)?;
            let ids: Vec<MessageId> = entries.iter().map(DeadLetter::id).collect();
            st.delete(&self.queue, &ids)
        })
    }
    fn purge(&self, older_than: Duration, include_pending: bool) -> Result<u64> {
        let cutoff = now_ms().saturating_sub(older_than.as_millis() as u64);
        match Filter::all().purge_cutoff(cutoff, include_pending) {
            Some(filter) => self.delete_matching(&filter),
            None => Ok(0),
        }
    }
    fn on_threshold(
        &self,
        threshold: u64,
        callback: impl Fn(&DlqAlert) + Send + Sync + 'static,
    ) -> Result<()> {
        self.memory
            .add_hook(&self.queue, threshold, Arc::new(callback))
    }
}
