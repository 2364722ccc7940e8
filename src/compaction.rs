//! Compaction: TTL expiry, DLQ retention, checkpoints and disk reclaim.
//!
//! One run ([`Store::compact_now`], or the store's background thread every
//! [`CompactionOptions::interval`]) does, in order:
//! 1. **expiry**: main-queue messages past their TTL go to the DLQ with kind `expired`, or are
//!    deleted, per queue setting; DLQ entries past their retention are deleted. Every removal
//!    is one record and is counted in the queue's and DLQ's stats.
//! 2. **relocation**: from the oldest sealed segment on, while a segment's live fraction is
//!    under [`CompactionOptions::relocate_below`], its live records (payloads, envelopes,
//!    failure histories still referenced by the index) are copied forward as relocated
//!    copies, which move the index's pointers and change nothing else.
//! 3. **checkpoint**: the index is snapshotted at the log's end (after an fsync) into the
//!    older of two checkpoint slots.
//! 4. **reclaim**: whole segments below both the older checkpoint and the first live record
//!    are deleted.
//!
//! Crash safety: a crash after step 2 leaves both the originals and the copies; replay
//! applies both, and the copies win because they come later. A crash during step 3 leaves
//! the previous slots intact. Step 4 deletes only segments that neither checkpoint nor the
//! index needs. Locks are held for one batch at a time, so producers and consumers wait at
//! most one batch (the report measures the longest hold).
//!
//! Time: expiry uses [`Store::expiry_now`], which never goes backwards and follows a forward
//! jump of the wall clock by at most [`CompactionOptions::max_forward_jump`] per run, so a
//! clock set wrongly far ahead cannot expire everything at once, and one set back cannot
//! resurrect what already expired.

use std::time::{Duration, Instant};

use crate::checkpoint;
use crate::error::Result;
use crate::format::FRAME_HEADER_LEN;
use crate::record::{self, Decoded, QueueId};
use crate::state::LiveRef;
use crate::store::{op_entry, Store};

/// Compaction settings.
#[derive(Debug, Clone, PartialEq)]
pub struct CompactionOptions {
    /// How often the background thread runs (`None`: only [`Store::compact_now`]).
    pub interval: Option<Duration>,
    /// Relocate a sealed segment's live records when its live fraction is below this.
    pub relocate_below: f64,
    /// The furthest the expiry clock follows a forward jump of the wall clock per reading.
    pub max_forward_jump: Duration,
    /// Records per write batch (expiry and relocation); bounds how long a batch holds the
    /// store's lock.
    pub batch: usize,
}

impl Default for CompactionOptions {
    fn default() -> Self {
        CompactionOptions {
            interval: Some(Duration::from_secs(60)),
            relocate_below: 0.5,
            max_forward_jump: Duration::from_secs(3600),
            batch: 256,
        }
    }
}

/// What one compaction run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompactionReport {
    /// Messages past their TTL moved to their DLQ.
    pub expired_to_dlq: u64,
    /// Messages past their TTL deleted.
    pub expired_dropped: u64,
    /// DLQ entries past their retention deleted.
    pub retention_removed: u64,
    /// Live records copied forward.
    pub records_relocated: u64,
    /// Bytes copied forward.
    pub bytes_relocated: u64,
    /// Segments deleted.
    pub segments_deleted: usize,
    /// Log position of the checkpoint written.
    pub checkpoint_position: Option<u64>,
    /// The longest time the run held the store's lock at once.
    pub longest_lock_hold: Duration,
}

/// Test hook: when the environment variable `DEADLETTER_FAILPOINT` names this step, the
/// process aborts there (crash tests use it to stop compaction between its steps).
pub(crate) fn failpoint(step: &str) {
    static NAME: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    let name = NAME.get_or_init(|| std::env::var("DEADLETTER_FAILPOINT").ok());
    if name.as_deref() == Some(step) {
        std::process::abort();
    }
}

/// Runs one compaction on `store`.
pub(crate) fn run(store: &Store) -> Result<CompactionReport> {
    let mut report = CompactionReport::default();
    let now = store.advance_expiry_clock();
    expire_ttl(store, now, &mut report)?;
    expire_retention(store, now, &mut report)?;
    relocate(store, &mut report)?;
    write_checkpoint(store, &mut report)?;
    reclaim(store, &mut report)?;
    Ok(report)
}

fn note_hold(report: &mut CompactionReport, started: Instant) {
    report.longest_lock_hold = report.longest_lock_hold.max(started.elapsed());
}

fn expire_ttl(store: &Store, now: u64, report: &mut CompactionReport) -> Result<()> {
    let batch_size = store.config().compaction.batch.max(1);
    loop {
        let started = Instant::now();
        let done = store.commit_with(|st| {
            let due: Vec<_> = st
                .ttl
                .range(..(now + 1, 0))
                .map(|&(_, id)| id)
                .filter(|id| st.msgs.get(id).is_some_and(|m| m.place.is_ready()))
                .take(batch_size)
                .collect();
            let mut batch = Vec::with_capacity(due.len());
            let (mut to_dlq, mut dropped) = (0, 0);
            for id in &due {
                let Some(m) = st.msgs.get(id).copied() else {
                    continue;
                };
                let queue = store.queue_handle(m.queue, st);
                let options = store.queue_options(m.queue);
                if options.expired_to_dlq {
                    to_dlq += 1;
                } else {
                    dropped += 1;
                }
                batch.push(op_entry(queue.expire_op(st, *id, m, now, &options)?)?);
            }
            Ok((batch, (to_dlq, dropped, due.len() < batch_size)))
        })?;
        note_hold(report, started);
        report.expired_to_dlq += done.0;
        report.expired_dropped += done.1;
        if done.2 {
            return Ok(());
        }
    }
}

fn expire_retention(store: &Store, now: u64, report: &mut CompactionReport) -> Result<()> {
    let queues: Vec<QueueId> = {
        let st = store.lock_state();
        (0..st.queues.len() as QueueId).collect()
    };
    for q in queues {
        let started = Instant::now();
        let dlq = {
            let st = store.lock_state();
            store.queue_handle(q, &st).dlq()
        };
        report.retention_removed += dlq.expire_retention_at(now)?;
        note_hold(report, started);
    }
    Ok(())
}

/// The frame size of the record at `pos`.
fn frame_size(store: &Store, pos: u64) -> Result<u64> {
    Ok((FRAME_HEADER_LEN + store.log().read(pos)?.len()) as u64)
}

fn relocate(store: &Store, report: &mut CompactionReport) -> Result<()> {
    let threshold = store.config().compaction.relocate_below;
    let batch_size = store.config().compaction.batch.max(1);
    let sealed: Vec<_> = store
        .log()
        .segments()
        .into_iter()
        .filter(|s| !s.active)
        .collect();
    if sealed.is_empty() {
        return Ok(());
    }
    let mut refs = store.lock_state().live_refs();
    refs.sort_unstable_by_key(|r| r.pos);
    let mut relocated_any = false;
    for seg in sealed {
        let inside: Vec<LiveRef> = refs
            .iter()
            .copied()
            .filter(|r| r.pos >= seg.base && r.pos < seg.end)
            .collect();
        if inside.is_empty() {
            continue;
        }
        let mut live = 0u64;
        for r in &inside {
            live += frame_size(store, r.pos)?;
        }
        let size = (seg.end - seg.base).max(1);
        if live as f64 / size as f64 >= threshold {
            break;
        }
        for chunk in inside.chunks(batch_size) {
            let started = Instant::now();
            let (count, bytes) = store.commit_with(|st| {
                let mut batch = Vec::with_capacity(chunk.len());
                let mut bytes = 0u64;
                for r in chunk {
                    if !st.still_refers(r) {
                        continue;
                    }
                    let rec = store.log().read(r.pos)?;
                    let body = record::encode_relocated(&rec);
                    bytes += body.len() as u64;
                    let original = detach(record::decode(&rec)?);
                    batch.push((body, Decoded::Relocated(Box::new(original))));
                }
                let n = batch.len() as u64;
                Ok((batch, (n, bytes)))
            })?;
            note_hold(report, started);
            report.records_relocated += count;
            report.bytes_relocated += bytes;
            relocated_any |= count > 0;
        }
    }
    if relocated_any {
        store.log().sync()?;
        failpoint("copy-written");
    }
    Ok(())
}

fn write_checkpoint(store: &Store, report: &mut CompactionReport) -> Result<()> {
    store.log().sync()?;
    let started = Instant::now();
    let (position, snapshot) = {
        let st = store.lock_state();
        (store.log().end_position(), st.snapshot())
    };
    note_hold(report, started);
    let bytes = checkpoint::encode(position, &snapshot)?;
    let mut slots = store.checkpoint_slots();
    if slots.positions.contains(&Some(position)) {
        // Nothing was written since the last checkpoint.
        report.checkpoint_position = Some(position);
        return Ok(());
    }
    let slot = slots.next;
    checkpoint::write(store.config().fs.as_ref(), store.dir(), slot, &bytes)?;
    failpoint("checkpoint-written");
    slots.positions[slot] = Some(position);
    slots.next = 1 - slot;
    report.checkpoint_position = Some(position);
    Ok(())
}

fn reclaim(store: &Store, report: &mut CompactionReport) -> Result<()> {
    let safe = {
        let slots = store.checkpoint_slots();
        match slots.positions {
            [Some(a), Some(b)] => a.min(b),
            _ => return Ok(()),
        }
    };
    let started = Instant::now();
    let first_live = store
        .lock_state()
        .live_refs()
        .iter()
        .map(|r| r.pos)
        .min()
        .unwrap_or(u64::MAX);
    note_hold(report, started);
    let cut = safe.min(first_live);
    report.segments_deleted += store.log().delete_below(cut)?;
    if report.segments_deleted > 0 {
        failpoint("segment-deleted");
    }
    Ok(())
}

/// The decoded form the state machine needs of a relocated record: a payload is not needed
/// to move a pointer, so it is dropped and the record no longer borrows the log.
fn detach(decoded: Decoded<'_>) -> Decoded<'static> {
    match decoded {
        Decoded::Put(put) => Decoded::Put(record::Put {
            meta: put.meta,
            payload: &[],
        }),
        Decoded::Op(op) => Decoded::Op(op),
        Decoded::Relocated(inner) => Decoded::Relocated(Box::new(detach(*inner))),
    }
}
