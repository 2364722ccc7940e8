//! Compaction: TTL expiry, DLQ retention, checkpoints and disk reclaim.
//!
//! One run ([`Store::compact_now`], or the store's background thread every
//! [`CompactionOptions::interval`]) does, in order:
//! 1. **expiry**: main-queue messages past their TTL go to the DLQ with kind `expired`, or are
//!    deleted, per queue setting; DLQ entries past their retention are deleted. Every removal
//!    is recorded and counted in the queue's and DLQ's stats.
//! 2. **relocation**: the longest prefix of sealed segments (oldest first) whose live
//!    fraction, taken over the whole prefix, is under [`CompactionOptions::relocate_below`]
//!    has its live records (payloads, envelopes, failure histories still referenced by the
//!    index) copied forward, in log order, as relocated copies, which move the index's
//!    pointers and change nothing else. Judging the prefix rather than each segment matters:
//!    the log is reclaimed from its start only, so one dense segment at the front (say, DLQ
//!    entries relocated earlier and waiting out their retention) would otherwise pin every
//!    dead segment behind it. After a run every remaining prefix, the whole sealed log
//!    included, is at least `relocate_below` live, so sealed segments take at most
//!    `1 / relocate_below` times the live record bytes (`tests/soak.rs` measures it).
//! 3. **checkpoint**: the index at the log's end `P` is snapshotted, the log is fsynced up
//!    to `P`, and the snapshot is written into the older of two checkpoint slots.
//! 4. **reclaim**: whole segments below both the older checkpoint and the first record the
//!    snapshot of step 3 refers to are deleted.
//!
//! **Compaction's own index.** Steps 2 to 4 do not read the store's index: compaction keeps
//! a second one ([`Shadow`]), built at its first run from the newest checkpoint and the log
//! after it, and brought up to the log's end at each step by replaying the records written
//! since, with the same [`State::apply`] a reopen runs. A checkpoint is a snapshot of it, and
//! what is live is read from it. So however many messages are live, none of that holds the
//! store's lock: the lock is held only to write a batch (expiry, retention, relocation, at
//! most [`CompactionOptions::batch`] records, read and encoded beforehand) or to scan a
//! bounded slice of the TTL set or of a DLQ. The cost is a second copy of the index in
//! memory (about 40 bytes per live message) and replaying each record once more. A
//! checkpoint taken from the replayed index is also exactly what a reopen would rebuild:
//! it holds nothing that only the live process knew (expired leases, a reopen's releases).
//!
//! Relocation fsyncs the log every [`SYNC_EVERY`] bytes of copies, outside the lock: a
//! segment is sealed by an fsync on the append path, under the lock, and would otherwise
//! find a whole segment of copies to write (that was the longest pause left).
//!
//! Crash safety:
//! - a crash after step 2 leaves both the originals and the copies; replay applies both,
//!   and the copies win because they come later;
//! - a checkpoint's position is durable before the checkpoint exists (step 3 syncs first),
//!   so recovery never finds a checkpoint past the log's end unless the log lost durable
//!   records (then it is [`crate::CorruptionKind::BadCheckpoint`], see `Store::open`); a crash
//!   while writing one leaves the previous slots intact (temporary file, fsync, rename,
//!   directory fsync; failpoints `checkpoint-temp-written`, `checkpoint-renamed`,
//!   `checkpoint-written`);
//! - step 4 deletes only what no recoverable state needs. A state rebuilt after a crash is
//!   the state at the older checkpoint plus durable records after it, which is the state at
//!   the newer checkpoint `P` plus durable records after `P`; a record's pointers only ever
//!   keep their value or point at the record being applied, so such a state refers only to
//!   records the snapshot at `P` refers to, or to records at or after `P`. The cut is
//!   therefore taken from the snapshot, never from the live index, which may already hold
//!   the effect of a record (an ack, say) that a crash would lose.
//! - an error anywhere in steps 2 to 4 drops compaction's index; the next run rebuilds it
//!   from disk.
//!
//! Time: expiry uses [`Store::expiry_now`], which never goes backwards and follows a forward
//! jump of the wall clock by at most [`CompactionOptions::max_forward_jump`] per run, so a
//! clock set wrongly far ahead cannot expire everything at once, and one set back cannot
//! resurrect what already expired.

use std::ops::Bound::{Excluded, Unbounded};
use std::time::{Duration, Instant};

use crate::checkpoint;
use crate::error::Result;
use crate::format::FRAME_HEADER_LEN;
use crate::log::RecoveryMode;
use crate::record::{self, Decoded, Op, QueueId};
use crate::state::{LiveRef, State};
use crate::store::{load_checkpoint, op_entry, Store};
use crate::types::MessageId;

/// Compaction settings.
#[derive(Debug, Clone, PartialEq)]
pub struct CompactionOptions {
    /// How often the background thread runs (`None`: only [`Store::compact_now`]).
    pub interval: Option<Duration>,
    /// Relocate the live records of the oldest sealed segments while, taken together, their
    /// live fraction is below this; sealed segments then take at most `1 / relocate_below`
    /// times the live bytes. Lower: less copying, more disk. 0 disables relocation.
    pub relocate_below: f64,
    /// The furthest the expiry clock follows a forward jump of the wall clock per reading.
    pub max_forward_jump: Duration,
    /// Records per write batch (expiry, retention, relocation); bounds how long a batch
    /// holds the store's lock.
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

/// Compaction's own index: the state the log's records build up to `position`, kept
/// between runs and brought up to date by replaying the records written since (the same
/// `State::apply` a reopen runs). Checkpoints are snapshots of it, and relocation and
/// reclaim read what is live from it, so none of that holds the store's lock, however many
/// messages are live; it costs a second copy of the index in memory.
pub(crate) struct Shadow {
    state: State,
    position: u64,
}

/// Runs one compaction on `store`; `shadow` is compaction's index (`None` before the first
/// run, or after an error).
pub(crate) fn run(store: &Store, shadow: &mut Option<Shadow>) -> Result<CompactionReport> {
    let mut report = CompactionReport::default();
    let now = store.advance_expiry_clock();
    expire_ttl(store, now, &mut report)?;
    expire_retention(store, now, &mut report)?;
    let result = (|| {
        relocate(store, shadow, &mut report)?;
        let first_needed = write_checkpoint(store, shadow, &mut report)?;
        reclaim(store, first_needed, &mut report)
    })();
    if result.is_err() {
        // Whatever failed, rebuild the index from disk next time rather than trust it.
        *shadow = None;
    }
    result.map(|()| report)
}

/// Brings compaction's index up to the log's end (building it from the newest checkpoint
/// and the log after it on the first run) and returns it with the position it covers.
fn catch_up<'s>(store: &Store, shadow: &'s mut Option<Shadow>) -> Result<&'s mut Shadow> {
    let target = store.log().end_position();
    let sh = match shadow {
        Some(sh) => sh,
        None => {
            let config = store.config();
            let (state, position, _) = load_checkpoint(
                config.fs.as_ref(),
                store.dir(),
                store.log(),
                config.recovery == RecoveryMode::Strict,
            )?;
            shadow.insert(Shadow { state, position })
        }
    };
    if sh.position < target {
        for item in store.log().iter_from(sh.position)? {
            let (pos, rec) = item?;
            if pos >= target {
                break;
            }
            let decoded = record::decode_for_apply(&rec).map_err(|_| store.bad_content(pos))?;
            sh.state.apply(&decoded, pos);
        }
        sh.position = target;
        // Replaying fills lists only live operations drain, and keeps idempotency keys a
        // live enqueue would have expired.
        sh.state.reset_replay_lists();
        let window = store.config().idempotency_window.as_millis() as u64;
        let cutoff = sh.state.latest_time.saturating_sub(window);
        sh.state.expire_idempotency(cutoff);
    }
    Ok(sh)
}

fn note_hold(report: &mut CompactionReport, started: Instant) {
    report.longest_lock_hold = report.longest_lock_hold.max(started.elapsed());
}

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
                if st.msgs.get(&id).is_some_and(|m| m.place.is_ready()) {
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
                let queue = store.queue_handle(m.queue, st);
                let options = store.queue_options(m.queue);
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
    let queues = store.lock_state().queues.len() as QueueId;
    for q in 0..queues {
        let mut after: Option<(u64, MessageId)> = None;
        let mut due: Vec<MessageId> = Vec::new();
        loop {
            let started = Instant::now();
            let finished = {
                let st = store.lock_state();
                let order = &st.queues[q as usize].dlq_order;
                let range = match after {
                    None => order.range(..),
                    Some(key) => order.range((Excluded(key), Unbounded)),
                };
                let mut seen = 0;
                for &(at, id) in range.take(scan_step) {
                    seen += 1;
                    after = Some((at, id));
                    if st
                        .dead
                        .get(&id)
                        .and_then(|d| d.expires_at)
                        .is_some_and(|t| t <= now)
                    {
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
            .filter(|id| {
                st.dead
                    .get(id)
                    .and_then(|d| d.expires_at)
                    .is_some_and(|t| t <= now)
            })
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

/// Relocation fsyncs the log after this many bytes of copies.
const SYNC_EVERY: u64 = 1 << 20;

/// The frame size of the record at `pos`.
fn frame_size(store: &Store, pos: u64) -> Result<u64> {
    Ok((FRAME_HEADER_LEN + store.log().read(pos)?.len()) as u64)
}

/// Every record the index refers to, by position. A record may be referred to more than
/// once (an imported DLQ entry's payload record is also its envelope, and the history of a
/// message replayed from it): it is counted, and copied, once.
fn live_refs(state: &State) -> Vec<LiveRef> {
    let mut refs = state.live_refs();
    refs.sort_unstable_by_key(|r| r.pos);
    refs
}

/// How many sealed segments, from the oldest, to relocate: the longest prefix whose live
/// fraction is under `threshold` (0 when none is). `live_bytes(i)` is the live byte count of
/// segment `i`; it is asked for segments in order and only while a longer prefix could still
/// qualify.
pub(crate) fn prefix_to_relocate(
    sizes: &[u64],
    threshold: f64,
    mut live_bytes: impl FnMut(usize) -> Result<u64>,
) -> Result<usize> {
    let total: u64 = sizes.iter().sum();
    let (mut live, mut size, mut take) = (0u64, 0u64, 0usize);
    for (i, &seg) in sizes.iter().enumerate() {
        // Once the live bytes seen reach the threshold of everything sealed, no longer prefix
        // can be under it.
        if live as f64 >= threshold * total as f64 {
            break;
        }
        live += live_bytes(i)?;
        size += seg;
        if (live as f64) < threshold * size as f64 {
            take = i + 1;
        }
    }
    Ok(take)
}

fn relocate(
    store: &Store,
    shadow: &mut Option<Shadow>,
    report: &mut CompactionReport,
) -> Result<()> {
    let threshold = store.config().compaction.relocate_below;
    let batch_size = store.config().compaction.batch.max(1);
    // What is live in every sealed segment: the index at the log's end refers to every
    // record of theirs the live index will ever refer to (a pointer only ever keeps its
    // value or points at the record being applied, which is past them). Whether it still
    // does is checked again, under the lock, batch by batch.
    let sh = catch_up(store, shadow)?;
    let sealed: Vec<_> = store
        .log()
        .segments()
        .into_iter()
        .filter(|s| !s.active && s.end <= sh.position)
        .collect();
    if sealed.is_empty() || threshold <= 0.0 {
        return Ok(());
    }
    let refs = live_refs(&sh.state);
    let in_segment = |i: usize| {
        let (base, end) = (sealed[i].base, sealed[i].end);
        let from = refs.partition_point(|r| r.pos < base);
        let to = refs.partition_point(|r| r.pos < end);
        from..to
    };
    let sizes: Vec<u64> = sealed.iter().map(|s| (s.end - s.base).max(1)).collect();
    let take = prefix_to_relocate(&sizes, threshold, |i| {
        let mut live = 0;
        let mut last = None;
        for r in &refs[in_segment(i)] {
            if last != Some(r.pos) {
                live += frame_size(store, r.pos)?;
                last = Some(r.pos);
            }
        }
        Ok(live)
    })?;
    if take == 0 {
        return Ok(());
    }
    let doomed = &refs[..refs.partition_point(|r| r.pos < sealed[take - 1].end)];
    let mut relocated_any = false;
    let mut copied: Option<u64> = None;
    let mut unsynced = 0u64;
    for chunk in doomed.chunks(batch_size) {
        // Read and wrap the copies first, without the lock (records never change and only
        // compaction deletes segments); under the lock, keep those still referred to.
        let mut copies = Vec::with_capacity(chunk.len());
        for r in chunk {
            if copied == Some(r.pos) {
                continue;
            }
            copied = Some(r.pos);
            let rec = store.log().read(r.pos)?;
            let original = detach(record::decode(&rec)?);
            copies.push((record::encode_relocated(&rec), original, r.pos));
        }
        let started = Instant::now();
        let (count, bytes) = {
            let mut st = store.lock_state();
            let mut batch = Vec::with_capacity(copies.len());
            let mut bytes = 0u64;
            for (body, original, pos) in copies {
                // The copy of a record moves every pointer to it, whatever its kind.
                let same = doomed.partition_point(|r| r.pos < pos)
                    ..doomed.partition_point(|r| r.pos <= pos);
                let wanted = doomed[same].iter().any(|r| st.still_refers(r));
                if wanted {
                    bytes += body.len() as u64;
                    batch.push((body, Decoded::Relocated(Box::new(original))));
                }
            }
            let n = batch.len() as u64;
            if n > 0 {
                // Not waited for, whatever the durability setting: a copy lost by a crash
                // leaves its original in place, which nothing deletes before the fsync
                // that precedes the next checkpoint. (Applying a copy wakes no one.)
                store.write_locked(&mut st, batch)?;
            }
            (n, bytes)
        };
        note_hold(report, started);
        report.records_relocated += count;
        report.bytes_relocated += bytes;
        relocated_any |= count > 0;
        unsynced += bytes;
        if unsynced >= SYNC_EVERY {
            // Outside the lock, so that the fsync that seals a full segment (on the append
            // path, under the lock) finds little left to write.
            store.log().sync()?;
            unsynced = 0;
        }
    }
    if relocated_any {
        store.log().sync()?;
        failpoint("copy-written");
    }
    Ok(())
}

/// Writes a checkpoint of the index at the log's end and returns the lowest log position
/// that checkpoint's index refers to (`u64::MAX`: none).
fn write_checkpoint(
    store: &Store,
    shadow: &mut Option<Shadow>,
    report: &mut CompactionReport,
) -> Result<u64> {
    let sh = catch_up(store, shadow)?;
    let position = sh.position;
    // The index reflects every record before `position`; none of them may be lost by a
    // crash once the checkpoint exists.
    store.log().sync()?;
    let snapshot = sh.state.snapshot();
    let first_needed = snapshot
        .msgs
        .iter()
        .map(|(_, m)| m.payload_pos)
        .chain(snapshot.dead.iter().map(|(_, d)| d.envelope_pos))
        .chain(snapshot.extras.iter().filter_map(|(_, e)| e.history_pos))
        .min()
        .unwrap_or(u64::MAX);
    let mut slots = store.checkpoint_slots();
    if slots.positions.contains(&Some(position)) {
        // Nothing was written since the last checkpoint.
        report.checkpoint_position = Some(position);
        return Ok(first_needed);
    }
    let bytes = checkpoint::encode(position, &snapshot)?;
    drop(snapshot);
    let slot = slots.next;
    // Until the new file is complete the slot holds nothing usable for reclaim.
    slots.positions[slot] = None;
    checkpoint::write(store.config().fs.as_ref(), store.dir(), slot, &bytes)?;
    failpoint("checkpoint-written");
    slots.positions[slot] = Some(position);
    slots.next = 1 - slot;
    report.checkpoint_position = Some(position);
    Ok(first_needed)
}

fn reclaim(store: &Store, first_needed: u64, report: &mut CompactionReport) -> Result<()> {
    let safe = {
        let slots = store.checkpoint_slots();
        match slots.positions {
            [Some(a), Some(b)] => a.min(b),
            _ => return Ok(()),
        }
    };
    let cut = safe.min(first_needed);
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
