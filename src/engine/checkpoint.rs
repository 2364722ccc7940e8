//! Checkpoints: a CRC-checked snapshot of the index and the log position it covers, so that
//! opening a store replays only the records after it.
//!
//! Two slots (`checkpoint-0`, `checkpoint-1`) are written in turn, each atomically: the
//! snapshot goes to a temporary file (written over the reserve kept there between
//! checkpoints, [`super::reserve`]), which is fsynced, renamed over the slot, and the
//! directory fsynced. Invariants:
//! - a slot on disk is either a complete, checksummed snapshot or is rejected whole;
//! - the snapshot at position `P` reflects exactly the records before `P`;
//! - compaction deletes log segments only below the position of the *older* valid slot, so
//!   if the newer slot is damaged the older one plus the log after it still rebuilds the
//!   state; if both are damaged and the log no longer starts at position 0, opening fails
//!   with a typed error instead of rebuilding a wrong state.
//!
//! The file's bytes are [`crate::engine::wire`]'s business (`wire/checkpoint.rs`,
//! `docs/FORMAT.md`): a header with the format version, a CRC over the whole file, the
//! position, and the snapshot. A checkpoint of a newer format version than this build
//! reads, or of a development build before release 0.1.0, is not damage: reading it is
//! [`Error::UnsupportedFormat`], in every recovery mode, and the engine reads the slots
//! before the log's recovery changes anything.

use std::path::Path;

use crate::engine::failpoint::failpoint;
use crate::engine::state::{Snapshot, State};
use crate::engine::wire::{self, CheckpointError, CheckpointFile, FORMAT_VERSION};
use crate::error::{CorruptionKind, Error, IoContext, Result};
use crate::storage::log::{CheckpointMark, Log, QuarantinedRange, RecoveryReport};
use crate::storage::vfs::Vfs;

/// The two slot file names.
pub const SLOTS: [&str; 2] = ["checkpoint-0", "checkpoint-1"];
pub(crate) const TEMP: &str = "checkpoint.tmp";

/// Decodes a checkpoint file's bytes. Damage is [`CorruptionKind::BadCheckpoint`] at the
/// offset where it shows; a newer format version, or a development build's, is
/// [`Error::UnsupportedFormat`].
pub(crate) fn decode(bytes: &[u8], path: &Path) -> Result<CheckpointFile> {
    wire::decode_checkpoint(bytes).map_err(|e| match e {
        CheckpointError::Damaged(offset) => {
            Error::corrupt_file(CorruptionKind::BadCheckpoint, path, offset)
        }
        CheckpointError::Newer(found) | CheckpointError::PreRelease(found) => {
            Error::UnsupportedFormat {
                path: path.to_path_buf(),
                found,
                supported: FORMAT_VERSION,
                pre_release: matches!(e, CheckpointError::PreRelease(_)),
            }
        }
    })
}

/// Writes `bytes` (from [`wire::encode_checkpoint`]) into slot `slot` atomically. The
/// temporary file is the reserve when there is one ([`super::reserve`]): the checkpoint is
/// written over its zeros, needing no new space while it fits, and the file is cut to the
/// checkpoint's length.
pub fn write(fs: &dyn Vfs, dir: &Path, slot: usize, bytes: &[u8]) -> Result<()> {
    let temp = dir.join(TEMP);
    let target = dir.join(SLOTS[slot % 2]);
    let file = match fs.open(&temp, false) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            fs.create(&temp).io("create", &temp)?
        }
        Err(e) => return Err(Error::io("open", &temp, e)),
    };
    file.write_at(bytes, 0).io("write", &temp)?;
    if file.len().io("stat", &temp)? != bytes.len() as u64 {
        file.set_len(bytes.len() as u64).io("set_len", &temp)?;
    }
    file.sync().io("fsync", &temp)?;
    drop(file);
    failpoint("checkpoint-temp-written");
    fs.rename(&temp, &target).io("rename", &temp)?;
    failpoint("checkpoint-renamed");
    fs.sync_dir(dir).io("fsync dir", dir)
}

/// What a slot holds.
#[derive(Debug)]
pub enum SlotState {
    /// No file.
    Missing,
    /// A valid checkpoint: its position, and from format version 2 on the store id and
    /// the active segment's number it names.
    Valid(CheckpointMark, Box<Snapshot>),
    /// A file that does not verify (the error says where).
    Damaged(Error),
}

/// Reads slot `slot`. A checkpoint of a format this build does not read is an error
/// ([`Error::UnsupportedFormat`]), not a damaged slot.
pub fn read(fs: &dyn Vfs, dir: &Path, slot: usize) -> Result<SlotState> {
    let path = dir.join(SLOTS[slot % 2]);
    let file = match fs.open(&path, true) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(SlotState::Missing),
        Err(e) => return Err(Error::io("open", &path, e)),
    };
    let len = file.len().io("stat", &path)?;
    let mut bytes = vec![0u8; len as usize];
    let mut at = 0usize;
    while at < bytes.len() {
        let n = file
            .read_at(&mut bytes[at..], at as u64)
            .io("read", &path)?;
        if n == 0 {
            break;
        }
        at += n;
    }
    bytes.truncate(at);
    Ok(match decode(&bytes, &path) {
        Ok(file) => {
            let mark = CheckpointMark {
                position: file.position,
                store_id: file.store_id,
                seq: file.seq,
            };
            SlotState::Valid(mark, Box::new(file.snapshot))
        }
        Err(e @ Error::UnsupportedFormat { .. }) => return Err(e),
        Err(e) => SlotState::Damaged(e),
    })
}

/// Reads both slots.
pub(crate) fn read_slots(fs: &dyn Vfs, dir: &Path) -> Result<[SlotState; 2]> {
    Ok([read(fs, dir, 0)?, read(fs, dir, 1)?])
}

/// What the log's recovery needs of the valid slots, oldest first (the newest one's id
/// breaks a tie between the segments' ids; those of this store give its durable
/// high-water mark and the segment number it must reach: see `storage/log/recovery.rs`).
pub(crate) fn marks(slots: &[SlotState; 2]) -> Vec<CheckpointMark> {
    let mut marks: Vec<CheckpointMark> = slots
        .iter()
        .filter_map(|s| match s {
            SlotState::Valid(mark, _) => Some(*mark),
            _ => None,
        })
        .collect();
    marks.sort_by_key(|m| m.position);
    marks
}

/// Which checkpoint slots hold which positions, and which one is written next.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct CheckpointSlots {
    /// The position each slot covers, if it holds a valid checkpoint.
    pub positions: [Option<u64>; 2],
    /// The slot the next checkpoint goes to (the older one).
    pub next: usize,
}

/// Loads the newest usable checkpoint of the two `read` (by [`read_slots`]): the state it
/// holds, the position to replay from, the slots, and a range of positions the store
/// needs that no segment holds (quarantine only: strict refuses it with
/// [`CorruptionKind::MissingRange`]). Without a checkpoint, replays from the start of the
/// log, which is only possible while the log still starts at position 0 (a log whose
/// first segment recovery quarantined still does); a log that starts later has lost its
/// head: missing `[0, first)`. With one, every position its state refers to must be in
/// the log once the records after it are applied: the caller checks that (see
/// [`missing_range`]).
///
/// A checkpoint is usable when its position lies within the log's records. One past them
/// covers records the log no longer has (compaction makes its position durable before
/// writing it, so the log lost durable records): the log's recovery refuses that under
/// strict recovery ([`CorruptionKind::LostTail`]: the checkpoint's position is the log's
/// high-water mark); under quarantine it lists the lost range, and the file is removed
/// here, since it describes records the log no longer has. One before the log's start is
/// ignored (the next checkpoint overwrites it).
///
/// For a `read_only` snapshot nothing is removed, and a checkpoint past the log's end is an
/// error (the owner wrote it after the snapshot's segments were read, or the log lost
/// records: the caller tries again, and reports it if it stays).
pub(crate) fn load_newest(
    fs: &dyn Vfs,
    dir: &Path,
    read: [SlotState; 2],
    log: &Log,
    report: &RecoveryReport,
    strict: bool,
    read_only: bool,
) -> Result<(State, u64, CheckpointSlots, Option<QuarantinedRange>)> {
    for (name, state) in SLOTS.iter().zip(&read) {
        if matches!(state, SlotState::Valid(m, _) if read_only && m.position > log.end_position()) {
            let path = dir.join(name);
            return Err(Error::corrupt_file(CorruptionKind::BadCheckpoint, path, 16));
        }
    }
    // Past here a read-only snapshot has no slot past the log's end: nothing is removed.
    let mut slots = CheckpointSlots::default();
    let mut candidates = Vec::new();
    let mut damage = None;
    let first = log_start(log, report);
    // Where the records end when its tail was lost.
    let records_end = report.quarantined.iter().find_map(|q| match q.kind {
        CorruptionKind::LostTail { actual, .. } => Some(actual),
        _ => None,
    });
    let end = records_end.unwrap_or_else(|| log.end_position());
    for ((slot, name), state) in SLOTS.iter().enumerate().zip(read) {
        match state {
            // Another store's checkpoint is never restored: strict refuses it, quarantine
            // passes it over (the next checkpoint overwrites it).
            SlotState::Valid(
                CheckpointMark {
                    store_id: Some(found),
                    ..
                },
                _,
            ) if log.store_id().is_some_and(|expected| expected != found) => {
                let kind = CorruptionKind::Foreign {
                    expected: log.store_id().unwrap_or_default(),
                    found,
                };
                let err = Error::corrupt_file(kind, dir.join(name), 32);
                if strict || read_only {
                    return Err(err);
                }
                damage = Some(err);
            }
            SlotState::Valid(m, _) if m.position > end => {
                let path = dir.join(name);
                let err = Error::corrupt_file(CorruptionKind::BadCheckpoint, &path, 16);
                if strict {
                    return Err(err);
                }
                fs.remove(&path).io("remove", &path)?;
                fs.sync_dir(dir).io("fsync dir", dir)?;
                damage = Some(err);
            }
            SlotState::Valid(m, _) if m.position < first => {}
            SlotState::Valid(CheckpointMark { position: pos, .. }, snap) => {
                slots.positions[slot] = Some(pos);
                candidates.push((pos, slot, snap));
            }
            SlotState::Damaged(e) => damage = Some(e),
            SlotState::Missing => {}
        }
    }
    candidates.sort_by_key(|c| std::cmp::Reverse(c.0));
    slots.next = match slots.positions {
        [Some(a), Some(b)] => usize::from(a > b),
        [Some(_), None] => 1,
        _ => 0,
    };
    if let Some((pos, _, snap)) = candidates.into_iter().next() {
        return Ok((State::restore(*snap), pos, slots, None));
    }
    if first == 0 {
        return Ok((State::default(), 0, slots, None));
    }
    // A damaged checkpoint is the error to report (it names a file that is there).
    if let Some(damage) = damage {
        return Err(damage);
    }
    // Without a checkpoint the log must start at 0: its head is missing.
    let lost = missing_range(log, dir, 0, first, strict || read_only)?;
    Ok((State::default(), first, slots, lost))
}

/// Where the log starts, with the ranges recovery quarantined counted as the log's: a log
/// whose first segment was lost still starts at 0.
pub(crate) fn log_start(log: &Log, report: &RecoveryReport) -> u64 {
    let quarantined = report.quarantined.iter().map(|q| q.start);
    quarantined.fold(log.first_position(), u64::min)
}

/// Positions `[start, end)` the store needs that no segment holds (the log's first segment
/// starts at `end`): [`CorruptionKind::MissingRange`] against the first segment that is
/// there, an error when `refuse` (strict, or a snapshot, which tries again), otherwise the
/// range to list with what recovery quarantined.
pub(crate) fn missing_range(
    log: &Log,
    dir: &Path,
    start: u64,
    end: u64,
    refuse: bool,
) -> Result<Option<QuarantinedRange>> {
    let path = log
        .segments()
        .first()
        .map_or_else(|| dir.to_path_buf(), |s| s.path.clone());
    let kind = CorruptionKind::MissingRange { start, end };
    if refuse {
        return Err(Error::corrupt_file(kind, path, 0));
    }
    Ok(Some(QuarantinedRange {
        path,
        kind,
        start,
        end,
    }))
}
