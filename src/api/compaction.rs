//! A compaction run ([`Store::compact_now`]): expiry, then the engine's part.
//!
//! Expiry comes first: messages past their time to live go to their DLQ with kind
//! [`EXPIRED_KIND`](crate::engine::state::EXPIRED_KIND) (or are deleted, per queue
//! setting), and DLQ entries past their retention are deleted. Every removal is one record,
//! counted in the queue's and the DLQ's stats; the engine's part of the run (relocation,
//! checkpoint, reclaim) follows, see [`Engine::compact`](crate::engine::Engine::compact).
//! What runs it on a schedule is a service (`api::services::compactor`).
//!
//! The work is done a bounded batch at a time ([`CompactionOptions::batch`] records, or 16
//! times as many index entries scanned) per hold of the store's lock, so expiring a large
//! backlog never stalls producers and consumers for long.
//!
//! Time: expiry uses [`Store::expiry_now`], which never goes backwards and follows a forward
//! jump of the wall clock by at most [`CompactionOptions::max_forward_jump`] per run, so a
//! clock set wrongly far ahead cannot expire everything at once, and one set back cannot
//! resurrect what already expired.

//!
//! [`CompactionOptions::batch`]: crate::store::CompactionOptions::batch
//! [`CompactionOptions::max_forward_jump`]: crate::store::CompactionOptions::max_forward_jump

use std::ops::Bound::{Excluded, Unbounded};
use std::time::Instant;

use crate::api::core::store::Store;
use crate::api::dlq::retention_passed;
use crate::engine::compaction::{note_hold, CompactionReport};
use crate::engine::envelope::MessageId;
use crate::engine::op_entry;
use crate::engine::record::{Op, QueueId};
use crate::error::{Error, Result};

impl Store {
    /// Runs one compaction now: TTL expiry, DLQ retention, relocation of live records out
    /// of sparse segments, a checkpoint, and deletion of segments nothing needs. A store
    /// opened with a [`CompactionOptions::interval`] does the same on its own that often
    /// (see [`crate::services::Compactor`]). One run at a time: a call waits for the one
    /// running.
    ///
    /// [`CompactionOptions::interval`]: crate::store::CompactionOptions::interval
    pub fn compact_now(&self) -> Result<CompactionReport> {
        self.writable()?;
        let _run = self.compaction_lock();
        let mut report = CompactionReport::default();
        let now = self.advance_expiry_clock();
        let expired = expire_ttl(self, now, &mut report)
            .and_then(|()| expire_retention(self, now, &mut report));
        match expired {
            // Expiry writes records; what compaction frees needs none: go on, and expire
            // the rest at the next run. (Unless a batch cut short poisoned the log: see
            // `Engine::compact`.)
            Err(Error::DiskFull { .. }) if !self.engine().log().is_poisoned() => {
                report.full_disk = true
            }
            other => other?,
        }
        self.engine().compact(&mut report)?;
        Ok(report)
    }
}

/// Moves (or deletes, per queue setting) the ready messages whose TTL passed, a batch per
/// record.
fn expire_ttl(store: &Store, now: u64, report: &mut CompactionReport) -> Result<()> {
    let batch_size = store.config().compaction.batch.max(1);
    let scan_step = batch_size.saturating_mul(16);
    // The TTL set in expiry order from a cursor, a bounded number of entries per lock hold:
    // leased messages past their TTL are skipped (their lease decides first), without
    // being scanned again by every batch.
    let mut after: Option<(u64, MessageId)> = None;
    loop {
        let started = Instant::now();
        let done = store.commit_with(|st| {
            let range = match after {
                None => st.ttl.range(..(now + 1, 0)),
                Some(key) => st.ttl.range((Excluded(key), Excluded((now + 1, 0)))),
            };
            let mut due = Vec::new();
            let mut seen = 0;
            for &(at, id) in range {
                if seen == scan_step || due.len() == batch_size {
                    break;
                }
                seen += 1;
                after = Some((at, id));
                if st.msgs.get(&id).is_some_and(|m| m.place().is_ready()) {
                    due.push(id);
                }
            }
            let finished = seen < scan_step && due.len() < batch_size;
            let mut batch = Vec::with_capacity(due.len());
            let (mut to_dlq, mut dropped) = (0, 0);
            for id in &due {
                let Some(m) = st.msgs.get(id).copied() else {
                    continue;
                };
                let queue = store.queue_handle(m.queue(), st);
                let options = store.queue_options(m.queue());
                if options.expired_to_dlq {
                    to_dlq += 1;
                } else {
                    dropped += 1;
                }
                batch.push(op_entry(queue.expire_op(st, *id, m, now, &options)?)?);
            }
            Ok((batch, (to_dlq, dropped, finished)))
        })?;
        note_hold(report, started);
        report.expired_to_dlq += done.0;
        report.expired_dropped += done.1;
        if done.2 {
            return Ok(());
        }
    }
}

/// Deletes the DLQ entries whose retention passed. Each DLQ is scanned in its browse order a
/// bounded number of entries per lock hold, and the due entries are deleted a batch per
/// record, so a large DLQ never holds the lock for a whole scan or one huge record.
fn expire_retention(store: &Store, now: u64, report: &mut CompactionReport) -> Result<()> {
    let batch_size = store.config().compaction.batch.max(1);
    let scan_step = batch_size.saturating_mul(16);
    let queues = store.engine().lock().queues.len() as QueueId;
    for q in 0..queues {
        let mut after: Option<(u64, MessageId)> = None;
        let mut due: Vec<MessageId> = Vec::new();
        loop {
            let started = Instant::now();
            let finished = {
                let st = store.engine().lock();
                let order = &st.queues[q as usize].dlq_order;
                let range = match after {
                    None => order.range(..),
                    Some(key) => order.range((Excluded(key), Unbounded)),
                };
                let mut seen = 0;
                for (&(at, id), _) in range.take(scan_step) {
                    seen += 1;
                    after = Some((at, id));
                    if retention_passed(&st, &id, now) {
                        due.push(id);
                    }
                }
                seen < scan_step
            };
            note_hold(report, started);
            while due.len() >= batch_size || (finished && !due.is_empty()) {
                let n = due.len().min(batch_size);
                let chunk: Vec<MessageId> = due.drain(..n).collect();
                report.retention_removed += delete_expired_entries(store, now, chunk, report)?;
            }
            if finished {
                break;
            }
        }
    }
    Ok(())
}

/// Deletes the DLQ entries of `ids` that are still in a DLQ and past their retention (one
/// record); returns how many.
fn delete_expired_entries(
    store: &Store,
    now: u64,
    ids: Vec<MessageId>,
    report: &mut CompactionReport,
) -> Result<u64> {
    let started = Instant::now();
    let removed = store.commit_with(|st| {
        let ids: Vec<MessageId> = ids
            .into_iter()
            .filter(|id| retention_passed(st, id, now))
            .collect();
        if ids.is_empty() {
            return Ok((Vec::new(), 0));
        }
        let n = ids.len() as u64;
        let op = Op::Delete {
            at: now,
            ids,
            expired: true,
        };
        Ok((vec![op_entry(op)?], n))
    })?;
    note_hold(report, started);
    Ok(removed)
}
