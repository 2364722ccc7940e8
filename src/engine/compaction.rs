//! Compaction, the engine's part: relocation, checkpoints and disk reclaim.
//!
//! A compaction run (`Store::compact_now`, or the store's background thread) first expires
//! messages and DLQ entries (step 1, in the API layer: it writes queue records), then calls
//! [`Engine::compact`], which does, in order:
//! 2. **relocation**: the longest prefix of sealed segments (oldest first) whose live
//!    fraction, taken over the whole prefix, is under `relocate_below` has its live records
//!    (payloads, envelopes, failure histories still referenced by the index) copied
//!    forward, in log order, as relocated copies, which move the index's pointers and change
//!    nothing else. Judging the prefix rather than each segment matters: the log is
//!    reclaimed from its start only, so one dense segment at the front (say, DLQ entries
//!    relocated earlier and waiting out their retention) would otherwise pin every dead
//!    segment behind it. After a run every remaining prefix, the whole sealed log included,
//!    is at least `relocate_below` live, so sealed segments take at most
//!    `1 / relocate_below` times the live record bytes (`tests/soak.rs` measures it).
//! 3. **checkpoint**: the index at the log's end `P` is snapshotted, the log is fsynced up
//!    to `P`, and the snapshot is written into the older of two checkpoint slots.
//! 4. **reclaim**: whole segments below both the older checkpoint and the first record the
//!    snapshot of step 3 refers to are deleted.
//!
//! **A drained store** (between steps 2 and 3): when compaction's index refers to no record
//! (every message acked, no DLQ entry), the log starts a segment of the first size, the
//! checkpoint of step 3 goes into both slots, and step 4 deletes every segment before the
//! new one: the store is back to its starting size (see [`restart_if_drained`]).
//!
//! **A full disk.** The checkpoint of step 3 is written over the reserve
//! ([`super::reserve`]), which needs no new space, and the reserve is made again after it.
//! When the disk is full (a roll failed for want of space, relocation was stopped by it, or
//! the reserve could not be made again), the same checkpoint also goes into the other slot
//! before step 4, so that both slots reach past what the acks made dead and reclaim frees
//! it now rather than a run later; the reserve is made again after step 4, from the space
//! it freed. Expiry and relocation write records, which need room in the log: a full disk
//! stops them early and the run goes on (`CompactionReport::full_disk`).
//!
//! **Compaction's own index.** Steps 2 to 4 do not read the store's index: compaction keeps
//! a second one ([`Shadow`]), built at its first run from the newest checkpoint and the log
//! after it, and brought up to the log's end at each step by replaying the records written
//! since, with the same [`State::apply`] a reopen runs. A checkpoint is a snapshot of it, and
//! what is live is read from it. So however many messages are live, none of that holds the
//! store's lock: the lock is held only to write a batch of relocated copies (at most
//! `batch` records, read and encoded beforehand). The cost is a second copy of the index in
//! memory (the messages' entries, 24 bytes per live message: it keeps no ready lists, which
//! only live operations drain) and replaying each record once more. A
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
//!   records (then it is [`crate::recovery::CorruptionKind::BadCheckpoint`], see
//!   [`checkpoint::load_newest`]); a crash while writing one leaves the previous slots
//!   intact (temporary file, fsync, rename, directory fsync; failpoints
//!   `checkpoint-temp-written`, `checkpoint-renamed`, `checkpoint-written`);
//! - step 4 deletes only what no recoverable state needs. A state rebuilt after a crash is
//!   the state at the older checkpoint plus durable records after it, which is the state at
//!   the newer checkpoint `P` plus durable records after `P`; a record's pointers only ever
//!   keep their value or point at the record being applied, so such a state refers only to
//!   records the snapshot at `P` refers to, or to records at or after `P`. The cut is
//!   therefore taken from the snapshot, never from the live index, which may already hold
//!   the effect of a record (an ack, say) that a crash would lose.
//! - an error anywhere in steps 2 to 4 drops compaction's index; the next run rebuilds it
//!   from disk.

use std::time::{Duration, Instant};

use super::checkpoint;
use super::commit::Batch;
use super::failpoint::failpoint;
use super::record::{self, Decoded};
use super::reserve::{self, Reserve};
use super::state::State;
use super::wire;
use super::{bad_content, Engine};
use crate::error::{Error, Result};
use crate::storage::format::{self, frame_len, FRAME_HEADER_LEN};

/// What one compaction run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
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
    /// The disk was full (a roll had failed for want of space, expiry or relocation, which
    /// write records, stopped early for it, or the checkpoint reserve found no room): the
    /// run went on without what stopped, wrote its checkpoint into both slots and
    /// reclaimed everything below it.
    pub full_disk: bool,
    /// The disk had no room for the whole checkpoint reserve after the run (see
    /// `docs/RELIABILITY.md`, "A full disk"): the next run or open tries again.
    pub reserve_short: bool,
    /// The store was drained (nothing left that refers to the log) and its log started a
    /// segment of the first size again, reclaiming every segment before it.
    pub restarted_small: bool,
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

impl Engine {
    /// An estimate of the heap memory compaction's own index holds (0 before its first
    /// run), as [`State::index_bytes`] counts it.
    #[cfg(feature = "sim")]
    pub(crate) fn shadow_index_bytes(&self) -> u64 {
        self.shadow
            .lock()
            .as_ref()
            .map_or(0, |sh| sh.state.index_bytes())
    }

    /// Runs the engine's part of a compaction (steps 2 to 4): relocation, a checkpoint,
    /// and reclaim, adding what it did to `report`.
    pub(crate) fn compact(&self, report: &mut CompactionReport) -> Result<()> {
        let mut shadow = self.shadow.lock();
        let result = (|| {
            match relocate(self, &mut shadow, report) {
                // Copies need room in the log; what compaction frees does not. A batch of
                // copies cut short by the full disk poisons the log instead (its first part
                // is in the log, unapplied): that error stands, see `write_checkpoint`.
                Err(Error::DiskFull { .. }) if !self.log.is_poisoned() => report.full_disk = true,
                other => other?,
            }
            let drained = restart_if_drained(self, &mut shadow, report)?;
            let written = write_checkpoint(self, &mut shadow, report, Slots::Next)?;
            let fs = self.fs.as_ref();
            let reserve = reserve::size_for(written.len);
            let kept = reserve::keep(fs, &self.dir, reserve)?;
            report.full_disk |= kept == Reserve::Short || self.log.is_out_of_space();
            if !report.full_disk && !drained {
                return reclaim(self, written.first_needed, report);
            }
            // The disk is full, or the store drained. Reclaim stops at the older slot's
            // position, which may keep every segment the acks made dead: the same index
            // goes into that slot too (written over what the reserve got), then the
            // reserve is made again from the space reclaimed.
            let written = write_checkpoint(self, &mut shadow, report, Slots::Both)?;
            reclaim(self, written.first_needed, report)?;
            report.reserve_short = reserve::keep(fs, &self.dir, reserve)? == Reserve::Short;
            Ok(())
        })();
        if result.is_err() {
            // Whatever failed, rebuild the index from disk next time rather than trust it.
            *shadow = None;
        }
        result
    }
}

/// Brings compaction's index up to the log's end (building it from the newest checkpoint
/// and the log after it on the first run) and returns it with the position it covers.
fn catch_up<'s>(engine: &Engine, shadow: &'s mut Option<Shadow>) -> Result<&'s mut Shadow> {
    let target = engine.log.end_position();
    let sh = match shadow {
        Some(sh) => sh,
        None => {
            let slots = checkpoint::read_slots(engine.fs.as_ref(), &engine.dir)?;
            let (mut state, position, _, _) = checkpoint::load_newest(
                engine.fs.as_ref(),
                &engine.dir,
                slots,
                &engine.log,
                &engine.report,
                engine.strict,
                false,
            )?;
            // The ids the live index skipped at open, so checkpoints keep skipping them.
            state.skip_lost_ids(&engine.report);
            state.audit.set_limits(engine.audit.0);
            state.audit_frames = engine.audit.1;
            // It never leases: no ready lists, no lease deadlines.
            state.set_replay_only();
            shadow.insert(Shadow { state, position })
        }
    };
    if sh.position < target {
        Engine::replay(&engine.log, sh.position, target, &mut sh.state)?;
        sh.position = target;
        // Replaying fills lists only live operations drain, and keeps idempotency keys a
        // live enqueue would have expired.
        sh.state.reset_replay_lists();
        let cutoff = sh
            .state
            .latest_time
            .saturating_sub(engine.idempotency_window_ms);
        sh.state.expire_idempotency(cutoff);
    }
    Ok(sh)
}

pub(crate) fn note_hold(report: &mut CompactionReport, started: Instant) {
    report.longest_lock_hold = report.longest_lock_hold.max(started.elapsed());
}

/// Relocation fsyncs the log after this many bytes of copies.
const SYNC_EVERY: u64 = 1 << 20;

/// Step 2b, **a drained store**: when compaction's index refers to no record at all (every
/// message acked, no DLQ entry), nothing in the log is needed but its position, so the
/// store may go back to its starting size now rather than wait for the half-live rule,
/// the older checkpoint slot and the active segment's end. If the log holds more than one
/// small segment, it starts a small one ([`crate::storage::log::Log::restart_small`]) and
/// the run then writes its checkpoint into both slots and reclaims everything below it.
/// Returns true when the store drained (and the run must do so). A record appended
/// meanwhile is safe: the checkpoint covers it and reclaim keeps the segment it is in. On a
/// full disk, where the small segment cannot be made, the run goes on as on any full disk.
fn restart_if_drained(
    engine: &Engine,
    shadow: &mut Option<Shadow>,
    report: &mut CompactionReport,
) -> Result<bool> {
    if engine.log.is_poisoned() {
        return Ok(false);
    }
    let sh = catch_up(engine, shadow)?;
    if sh.state.lowest_position().is_some() {
        return Ok(false);
    }
    let segments = engine.log.segments();
    let restarted = match engine.log.restart_small() {
        Ok(restarted) => restarted,
        // No room for the small segment: the run frees what it can as on any full disk,
        // and a later run starts small.
        Err(Error::DiskFull { .. }) if !engine.log.is_poisoned() => {
            report.full_disk = true;
            false
        }
        Err(e) => return Err(e),
    };
    report.restarted_small |= restarted;
    Ok(restarted || segments.len() > 1)
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
    engine: &Engine,
    shadow: &mut Option<Shadow>,
    report: &mut CompactionReport,
) -> Result<()> {
    let threshold = engine.relocate_below;
    let batch_size = engine.batch.max(1);
    // What is live in every sealed segment: the index at the log's end refers to every
    // record of theirs the live index will ever refer to (a pointer only ever keeps its
    // value or points at the record being applied, which is past them). Whether it still
    // does is checked again, under the lock, batch by batch.
    let sh = catch_up(engine, shadow)?;
    let sealed: Vec<_> = engine
        .log
        .segments()
        .into_iter()
        .filter(|s| !s.active && s.end <= sh.position)
        .collect();
    if sealed.is_empty() || threshold <= 0.0 {
        return Ok(());
    }
    let refs = sh.state.live_refs();
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
                live += (FRAME_HEADER_LEN + engine.log.read(r.pos)?.len()) as u64;
                last = Some(r.pos);
            }
        }
        Ok(live)
    })?;
    if take == 0 {
        return Ok(());
    }
    let doomed = &refs[..refs.partition_point(|r| r.pos < sealed[take - 1].end)];
    // Each write of copies fits in one segment: a roll that fails for want of space then
    // fails before any of it is written, and the log stays usable (a longer batch would
    // roll twice, and one cut short by its second roll poisons the log).
    let opts = engine.log.options();
    let part_limit = opts
        .segment_size
        .saturating_sub(format::header_len(opts.format_version) as u64)
        .saturating_sub(opts.reserve);
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
            let rec = engine.log.read(r.pos)?;
            let original = wire::decode(rec.version(), &rec).map_err(|_| bad_content(r.pos))?;
            let body = wire::encode_relocated(&original)?;
            copies.push((body, detach(original), r.pos));
        }
        let started = Instant::now();
        let (count, bytes, written) = {
            let mut st = engine.lock();
            let mut parts = Parts::new(part_limit);
            for (body, original, pos) in copies {
                // The copy of a record moves every pointer to it, whatever its kind.
                let same = doomed.partition_point(|r| r.pos < pos)
                    ..doomed.partition_point(|r| r.pos <= pos);
                let wanted = doomed[same].iter().any(|r| st.still_refers(r));
                if wanted {
                    parts.push(body, Decoded::Relocated(Box::new(original)));
                }
            }
            // Not waited for, whatever the durability setting: a copy lost by a crash
            // leaves its original in place, which nothing deletes before the fsync that
            // precedes the next checkpoint. (Applying a copy wakes no one.)
            let (mut count, mut bytes) = (0, 0);
            let mut written = Ok(());
            for (part, part_bytes) in parts.done {
                let n = part.len() as u64;
                written = engine.write_locked(&mut st, part).map(|_| ());
                if written.is_err() {
                    break;
                }
                count += n;
                bytes += part_bytes;
            }
            (count, bytes, written)
        };
        note_hold(report, started);
        report.records_relocated += count;
        report.bytes_relocated += bytes;
        written?;
        relocated_any |= count > 0;
        unsynced += bytes;
        if unsynced >= SYNC_EVERY {
            // Outside the lock, so that the fsync that seals a full segment (on the append
            // path, under the lock) finds little left to write.
            engine.log.sync()?;
            unsynced = 0;
        }
    }
    if relocated_any {
        engine.log.sync()?;
        failpoint("copy-written");
    }
    Ok(())
}

/// A batch of copies cut into parts whose frames fit in `limit` bytes (a part holds at
/// least one copy), each with its bodies' bytes.
struct Parts {
    limit: u64,
    done: Vec<(Batch<'static>, u64)>,
    frames: u64,
}

impl Parts {
    fn new(limit: u64) -> Parts {
        Parts {
            limit,
            done: Vec::new(),
            frames: 0,
        }
    }

    fn push(&mut self, body: Vec<u8>, decoded: Decoded<'static>) {
        let frame = frame_len(body.len()) as u64;
        match self.done.last_mut() {
            Some((part, bytes)) if self.frames + frame <= self.limit => {
                *bytes += body.len() as u64;
                part.push((body, decoded));
                self.frames += frame;
            }
            _ => {
                self.frames = frame;
                let bytes = body.len() as u64;
                self.done.push((vec![(body, decoded)], bytes));
            }
        }
    }
}

/// Which slots must hold the checkpoint at the log's end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slots {
    /// One of them (the older one is written, unless one holds it already).
    Next,
    /// Both (the older one is written, unless both hold it already).
    Both,
}

/// What [`write_checkpoint`] did.
struct Written {
    /// The lowest log position the checkpoint's index refers to (`u64::MAX`: none).
    first_needed: u64,
    /// The checkpoint's length in bytes (0 when none was written).
    len: u64,
}

/// Writes a checkpoint of the index at the log's end into the slots `slots` asks for.
fn write_checkpoint(
    engine: &Engine,
    shadow: &mut Option<Shadow>,
    report: &mut CompactionReport,
    want: Slots,
) -> Result<Written> {
    // A poisoned log may hold records the live index never applied (the first part of a
    // batch cut short by a failed roll): a checkpoint would take them in, and the reclaim
    // after it delete the segments the live index still reads. A reopen replays them.
    if engine.log.is_poisoned() {
        return Err(Error::Poisoned);
    }
    let sh = catch_up(engine, shadow)?;
    let position = sh.position;
    // The index reflects every record before `position`; none of them may be lost by a
    // crash once the checkpoint exists.
    engine.log.sync()?;
    let snapshot = sh.state.snapshot();
    let first_needed = snapshot
        .msgs
        .iter()
        .map(|(_, m)| m.payload_pos)
        .chain(snapshot.dead.iter().map(|(_, d)| d.envelope_pos))
        .chain(snapshot.extras.iter().filter_map(|(_, e)| e.history_pos))
        .min()
        .unwrap_or(u64::MAX);
    let mut slots = engine.slots.lock();
    let done = match want {
        Slots::Next => slots.positions.contains(&Some(position)),
        Slots::Both => slots.positions == [Some(position); 2],
    };
    if done {
        // Nothing was written since the last checkpoint.
        report.checkpoint_position = Some(position);
        return Ok(Written {
            first_needed,
            len: 0,
        });
    }
    // A log opened to write always has the store's id (recovery gives one to a store
    // that had none).
    let store_id = engine.log.store_id().unwrap_or_default();
    let seq = engine.log.active_seq();
    let bytes = wire::encode_checkpoint(position, store_id, seq, snapshot)?;
    let slot = slots.next;
    // Until the new file is complete the slot holds nothing usable for reclaim.
    slots.positions[slot] = None;
    checkpoint::write(engine.fs.as_ref(), &engine.dir, slot, &bytes)?;
    failpoint("checkpoint-written");
    slots.positions[slot] = Some(position);
    slots.next = 1 - slot;
    report.checkpoint_position = Some(position);
    Ok(Written {
        first_needed,
        len: bytes.len() as u64,
    })
}

fn reclaim(engine: &Engine, first_needed: u64, report: &mut CompactionReport) -> Result<()> {
    let safe = {
        let slots = engine.slots.lock();
        match slots.positions {
            [Some(a), Some(b)] => a.min(b),
            _ => return Ok(()),
        }
    };
    let cut = safe.min(first_needed);
    report.segments_deleted += engine.log.delete_below(cut)?;
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
