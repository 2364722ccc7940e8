//! Checkpoints: a CRC-checked snapshot of the index and the log position it covers, so that
//! opening a store replays only the records after it.
//!
//! Two slots (`checkpoint-0`, `checkpoint-1`) are written in turn, each atomically: the
//! snapshot goes to a temporary file, which is fsynced, renamed over the slot, and the
//! directory fsynced. Invariants:
//! - a slot on disk is either a complete, checksummed snapshot or is rejected whole;
//! - the snapshot at position `P` reflects exactly the records before `P`;
//! - compaction deletes log segments only below the position of the *older* valid slot, so
//!   if the newer slot is damaged the older one plus the log after it still rebuilds the
//!   state; if both are damaged and the log no longer starts at position 0, opening fails
//!   with a typed error instead of rebuilding a wrong state.
//!
//! File layout (little-endian):
//!
//! ```text
//! 0      8        10       12       16         24          32
//! +------+--------+--------+--------+----------+-----------+------------------+
//! | magic| version| flags  | crc32  | position | body len  | body (bincode)   |
//! +------+--------+--------+--------+----------+-----------+------------------+
//! ```
//! The CRC covers bytes 0..32 with the CRC field zeroed, then the body.

use std::path::Path;

use crate::engine::failpoint::failpoint;
use crate::engine::state::{Snapshot, State};
use crate::error::{CorruptionKind, Error, Result};
use crate::storage::log::Log;
use crate::storage::vfs::Vfs;

/// The two slot file names.
pub const SLOTS: [&str; 2] = ["checkpoint-0", "checkpoint-1"];
const TEMP: &str = "checkpoint.tmp";
const MAGIC: [u8; 8] = *b"DLTRCKPT";
const VERSION: u16 = 1;
const HEADER_LEN: usize = 32;

fn bad(path: &Path, offset: u64) -> Error {
    Error::corrupt_file(CorruptionKind::BadCheckpoint, path, offset)
}

fn crc(header: &[u8], body: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    let mut head = [0u8; HEADER_LEN];
    head.copy_from_slice(&header[..HEADER_LEN]);
    head[12..16].fill(0);
    h.update(&head);
    h.update(body);
    h.finalize()
}

/// Encodes a snapshot covering the log up to `position`.
pub fn encode(position: u64, snapshot: &Snapshot) -> Result<Vec<u8>> {
    let mut out = vec![0u8; HEADER_LEN];
    bincode::serde::encode_into_std_write(snapshot, &mut out, bincode::config::standard())
        .map_err(|e| Error::Codec(e.to_string()))?;
    let body_len = (out.len() - HEADER_LEN) as u64;
    out[0..8].copy_from_slice(&MAGIC);
    out[8..10].copy_from_slice(&VERSION.to_le_bytes());
    out[16..24].copy_from_slice(&position.to_le_bytes());
    out[24..32].copy_from_slice(&body_len.to_le_bytes());
    let c = crc(&out[..HEADER_LEN], &out[HEADER_LEN..]);
    out[12..16].copy_from_slice(&c.to_le_bytes());
    Ok(out)
}

/// Decodes a checkpoint file's bytes; any damage is [`CorruptionKind::BadCheckpoint`].
pub fn decode(bytes: &[u8], path: &Path) -> Result<(u64, Snapshot)> {
    if bytes.len() < HEADER_LEN || bytes[0..8] != MAGIC {
        return Err(bad(path, 0));
    }
    let version = u16::from_le_bytes([bytes[8], bytes[9]]);
    let stored = u32::from_le_bytes(bytes[12..16].try_into().map_err(|_| bad(path, 12))?);
    let position = u64::from_le_bytes(bytes[16..24].try_into().map_err(|_| bad(path, 16))?);
    let body_len = u64::from_le_bytes(bytes[24..32].try_into().map_err(|_| bad(path, 24))?);
    if version != VERSION || body_len != (bytes.len() - HEADER_LEN) as u64 {
        return Err(bad(path, 8));
    }
    let body = &bytes[HEADER_LEN..];
    if crc(bytes, body) != stored {
        return Err(bad(path, 12));
    }
    let (snapshot, used): (Snapshot, usize) =
        bincode::serde::decode_from_slice(body, bincode::config::standard())
            .map_err(|_| bad(path, HEADER_LEN as u64))?;
    if used != body.len() {
        return Err(bad(path, (HEADER_LEN + used) as u64));
    }
    Ok((position, snapshot))
}

/// Writes `bytes` (from [`encode`]) into slot `slot` atomically.
pub fn write(fs: &dyn Vfs, dir: &Path, slot: usize, bytes: &[u8]) -> Result<()> {
    let temp = dir.join(TEMP);
    let target = dir.join(SLOTS[slot % 2]);
    let file = fs
        .create(&temp)
        .map_err(|e| Error::io("create", &temp, e))?;
    file.write_at(bytes, 0)
        .map_err(|e| Error::io("write", &temp, e))?;
    file.sync().map_err(|e| Error::io("fsync", &temp, e))?;
    drop(file);
    failpoint("checkpoint-temp-written");
    fs.rename(&temp, &target)
        .map_err(|e| Error::io("rename", &temp, e))?;
    failpoint("checkpoint-renamed");
    fs.sync_dir(dir).map_err(|e| Error::io("fsync dir", dir, e))
}

/// What a slot holds.
#[derive(Debug)]
pub enum SlotState {
    /// No file.
    Missing,
    /// A valid checkpoint at a position.
    Valid(u64, Box<Snapshot>),
    /// A file that does not verify (the error says where).
    Damaged(Error),
}

/// Reads slot `slot`.
pub fn read(fs: &dyn Vfs, dir: &Path, slot: usize) -> Result<SlotState> {
    let path = dir.join(SLOTS[slot % 2]);
    let file = match fs.open(&path, true) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(SlotState::Missing),
        Err(e) => return Err(Error::io("open", &path, e)),
    };
    let len = file.len().map_err(|e| Error::io("stat", &path, e))?;
    let mut bytes = vec![0u8; len as usize];
    let mut at = 0usize;
    while at < bytes.len() {
        let n = file
            .read_at(&mut bytes[at..], at as u64)
            .map_err(|e| Error::io("read", &path, e))?;
        if n == 0 {
            break;
        }
        at += n;
    }
    bytes.truncate(at);
    Ok(match decode(&bytes, &path) {
        Ok((pos, snap)) => SlotState::Valid(pos, Box::new(snap)),
        Err(e) => SlotState::Damaged(e),
    })
}

/// Which checkpoint slots hold which positions, and which one is written next.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct CheckpointSlots {
    /// The position each slot covers, if it holds a valid checkpoint.
    pub positions: [Option<u64>; 2],
    /// The slot the next checkpoint goes to (the older one).
    pub next: usize,
}

/// Loads the newest usable checkpoint: the state it holds, the position to replay from,
/// and the slots. Without one, replays from the start of the log, which is only possible
/// while the log still starts at position 0.
///
/// A checkpoint is usable when its position lies within the log. One past the log's end
/// covers records the log no longer has (compaction makes its position durable before
/// writing it, so the log lost durable records): under strict recovery that is
/// [`CorruptionKind::BadCheckpoint`]; otherwise the file is removed, since once the log grew
/// past its position again it would describe records it never saw. One before the log's
/// start is ignored (the next checkpoint overwrites it).
pub(crate) fn load_newest(
    fs: &dyn Vfs,
    dir: &Path,
    log: &Log,
    strict: bool,
) -> Result<(State, u64, CheckpointSlots)> {
    let mut slots = CheckpointSlots::default();
    let mut candidates = Vec::new();
    let mut damage = None;
    let (first, end) = (log.first_position(), log.end_position());
    for (slot, name) in SLOTS.iter().enumerate() {
        match read(fs, dir, slot)? {
            SlotState::Valid(pos, _) if pos > end => {
                let path = dir.join(name);
                let err = Error::corrupt_file(CorruptionKind::BadCheckpoint, &path, 16);
                if strict {
                    return Err(err);
                }
                fs.remove(&path)
                    .map_err(|e| Error::io("remove", &path, e))?;
                fs.sync_dir(dir)
                    .map_err(|e| Error::io("fsync dir", dir, e))?;
                damage = Some(err);
            }
            SlotState::Valid(pos, _) if pos < first => {}
            SlotState::Valid(pos, snap) => {
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
        return Ok((State::restore(*snap), pos, slots));
    }
    if first == 0 {
        return Ok((State::default(), 0, slots));
    }
    Err(damage.unwrap_or(Error::corrupt_file(
        CorruptionKind::BadCheckpoint,
        dir.join(SLOTS[0]),
        0,
    )))
}
