//! The tail hint: how far into the active segment bytes were ever written, so that an open
//! need not read the preallocated zeros behind the records to prove them zeros.
//!
//! Recovery must know that every byte after the last record of the active segment is zero
//! (`docs/FORMAT.md`, "Recovery at open"): a torn write, or a frame left over past a torn
//! one, must be found and zeroed before appends resume, and damage followed by frames that
//! prove it durable must be reported. Without more knowledge that means reading the whole
//! segment. The hint is that knowledge: a 32-byte file saying "no byte of segment `base` at
//! data offset `bound` or later has been written since it was zero". Recovery then reads
//! only `[0, bound)`.
//!
//! Invariants (what makes the claim true whenever it can be read):
//! - the log writes data into the active segment only below the bound of a hint that is
//!   durable (written and `fdatasync`ed) before the write is issued ([`HintKeeper::make_room`]);
//! - a hint is written only for a segment whose bytes past the bound are zero: a segment
//!   created allocated and never written (it reads as zeros), or the active segment after recovery (which zeroed and synced a
//!   torn tail, and proved the rest zero by reading it or by the previous hint);
//! - bounds only grow while a segment is active; when raising one fails, the hint file is
//!   removed and the removal made durable before any write past the old bound (the log then
//!   writes without a hint until it is reopened: the next open reads the whole segment);
//! - a hint that is missing, damaged (its CRC fails), torn, or names another base is not
//!   used. Nothing else about it is trusted, so losing it (its name was never made durable,
//!   a power cut) only costs the next open a full read.
//!
//! Name: the active segment's *temporary* name, `{base:020}.tmp`. Every build of every
//! format version treats such a file as a leftover of an interrupted segment creation and
//! removes it at open, and makes the removal durable (directory sync) before it appends
//! anything. So a build that does not know the hint (an older one) can never append past a
//! hint it leaves behind: the format is unchanged, and a hint is only ever read by a build
//! that follows one that kept it. This build keeps the hint of the segment that stays
//! active and removes every other.
//!
//! Layout (little-endian):
//!
//! ```text
//!  0        8        16        24        28     32
//!  | magic  |  base  |  bound  | reserved | crc |
//! ```
//!
//! `magic` = `"DLTRTAIL"`, `bound` a data offset (from the end of the segment header),
//! `reserved` zero, `crc` the CRC-32 of bytes 0..28.

use std::path::Path;
use std::sync::Arc;

use crate::error::{Error, IoContext, Result};
use crate::storage::format::FRAME_HEADER_LEN;
use crate::storage::segment::{self, read_exact_at};
use crate::storage::vfs::{Vfs, VfsFile};

/// Length of a hint file.
pub const HINT_LEN: usize = 32;
/// Magic number at the start of a hint.
const HINT_MAGIC: [u8; 8] = *b"DLTRTAIL";
/// The smallest step a bound is raised by (an eighth of a smaller segment). A bound is
/// raised to twice the data end (or the data end plus the step, if more), so that a
/// segment takes only a few raises while it fills (seven for 64 MiB), and an open after a
/// crash reads at most as many zeros as there are records, plus the step.
pub const MAX_STEP: u64 = 1 << 20;

/// How far into the data of a segment whose hint states `bound` recovery reads: past the
/// bound by one frame header (a frame that starts at the bound shows the hint is wrong), then
/// up to the next multiple of 4 KiB of the file, so that a write that damaged its whole
/// sector at a power cut (more than the bytes it was writing) is still seen. At most 4 KiB
/// and 16 bytes more than the bound; never past `data_len`. `header` is the segment's
/// header length (its version's): the data starts there.
pub fn read_limit(header: u64, bound: u64, data_len: u64) -> u64 {
    const PAGE: u64 = 4096;
    let file_end = header
        .saturating_add(bound)
        .saturating_add(FRAME_HEADER_LEN as u64)
        .saturating_add(PAGE - 1)
        / PAGE
        * PAGE;
    file_end.saturating_sub(header).min(data_len)
}

/// The file name of the hint for the segment at `base` (its temporary name).
pub fn hint_name(base: u64) -> String {
    segment::temp_name(base)
}

/// The bytes of a hint.
pub fn encode(base: u64, bound: u64) -> [u8; HINT_LEN] {
    let mut b = [0u8; HINT_LEN];
    b[0..8].copy_from_slice(&HINT_MAGIC);
    b[8..16].copy_from_slice(&base.to_le_bytes());
    b[16..24].copy_from_slice(&bound.to_le_bytes());
    let crc = crc32fast::hash(&b[..28]);
    b[28..32].copy_from_slice(&crc.to_le_bytes());
    b
}

/// The bound a hint for segment `base` states, if `bytes` are such a hint, intact.
pub fn decode(bytes: &[u8], base: u64) -> Option<u64> {
    let b: &[u8; HINT_LEN] = bytes.get(..HINT_LEN)?.try_into().ok()?;
    let word = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap_or([0; 8]));
    let crc = u32::from_le_bytes([b[28], b[29], b[30], b[31]]);
    (b[0..8] == HINT_MAGIC
        && crc == crc32fast::hash(&b[..28])
        && b[24..28] == [0; 4]
        && word(8) == base)
        .then(|| word(16))
}

/// Reads the hint of the segment at `base` in `dir`: its bound, or `None` when there is no
/// usable one (missing, unreadable, damaged, for another base). Opens it read-only.
pub fn read(fs: &dyn Vfs, dir: &Path, base: u64) -> Option<u64> {
    let file = fs.open(&dir.join(hint_name(base)), true).ok()?;
    if file.len().ok()? != HINT_LEN as u64 {
        return None;
    }
    let mut bytes = [0u8; HINT_LEN];
    read_exact_at(file.as_ref(), &mut bytes, 0).ok()?;
    decode(&bytes, base)
}

/// The bound to raise to so that data up to `end` may be written: twice `end`, at least
/// `end` plus the step ([`MAX_STEP`], or an eighth of a smaller segment), at most
/// `capacity` (but never below `end`).
pub fn next_bound(end: u64, capacity: u64) -> u64 {
    let step = (capacity / 8).clamp(1, MAX_STEP);
    end.saturating_mul(2)
        .max(end.saturating_add(step))
        .min(capacity)
        .max(end)
}

/// The log's side of the hint: what the durable hint of the active segment says, and
/// raising it before a write would pass it. Used under the writer's lock.
pub struct HintKeeper {
    /// The segment the state below is about.
    base: u64,
    /// The bound of its durable hint (`None`: it has none, or none is known).
    bound: Option<u64>,
    /// The hint file, once opened or created.
    file: Option<Arc<dyn VfsFile>>,
    /// True when raising failed and the hint was removed: the segment is written without a
    /// hint until the log is reopened.
    off: bool,
}

impl HintKeeper {
    /// The state at open: segment `base` is active, with a durable hint at `bound` if any.
    pub fn new(base: u64, bound: Option<u64>) -> HintKeeper {
        HintKeeper {
            base,
            bound,
            file: None,
            off: false,
        }
    }

    /// Makes sure that the active segment (at `base`, `capacity` bytes of data) may be
    /// written up to data offset `end`: raises its hint first if `end` passes it. For a new
    /// active segment, writes its first hint and removes the previous segment's (best
    /// effort: a hint of a segment that is not the last is never used). An error means
    /// nothing may be written past the old bound: the caller poisons the log.
    pub fn make_room(
        &mut self,
        fs: &dyn Vfs,
        dir: &Path,
        base: u64,
        end: u64,
        capacity: u64,
    ) -> Result<()> {
        if base != self.base {
            let old = std::mem::replace(self, HintKeeper::new(base, None));
            if old.bound.is_some() || old.file.is_some() {
                let _ = fs.remove(&dir.join(hint_name(old.base)));
            }
        }
        if self.off || self.bound.is_some_and(|b| end <= b) {
            return Ok(());
        }
        let bound = next_bound(end, capacity);
        let path = dir.join(hint_name(base));
        let written = (|| -> std::io::Result<()> {
            let file = match &self.file {
                Some(f) => Arc::clone(f),
                None => {
                    let f = if self.bound.is_some() {
                        fs.open(&path, false)?
                    } else {
                        fs.create(&path)?
                    };
                    self.file = Some(Arc::clone(&f));
                    f
                }
            };
            file.write_at(&encode(base, bound), 0)?;
            file.sync()
        })();
        match written {
            Ok(()) => {
                self.bound = Some(bound);
                Ok(())
            }
            Err(_) => self.give_up(fs, dir),
        }
    }

    /// After a failed raise: the hint file may hold the old bound, the new one, or torn
    /// bytes. Removes it, durably, so that writing past the old bound is safe; from then
    /// on the segment has no hint (the next open reads all of it).
    fn give_up(&mut self, fs: &dyn Vfs, dir: &Path) -> Result<()> {
        let path = dir.join(hint_name(self.base));
        self.file = None;
        match fs.remove(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io("remove", &path, e)),
        }
        fs.sync_dir(dir).io("fsync dir", dir)?;
        self.bound = None;
        self.off = true;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hint_decodes_only_intact_and_for_its_base() {
        let h = encode(4096, 77);
        assert_eq!(decode(&h, 4096), Some(77));
        assert_eq!(decode(&h, 0), None, "another base");
        assert_eq!(decode(&h[..31], 4096), None, "short");
        for i in 0..HINT_LEN {
            for bit in 0..8 {
                let mut d = h;
                d[i] ^= 1 << bit;
                assert_eq!(decode(&d, 4096), None, "byte {i} bit {bit}");
            }
        }
    }

    #[test]
    fn the_read_limit_covers_the_next_frame_header_and_its_page() {
        // File offsets: header 32 + bound + 16, rounded up to 4 KiB.
        assert_eq!(read_limit(32, 0, 1 << 20), 4096 - 32);
        assert_eq!(read_limit(32, 4096 - 48, 1 << 20), 4096 - 32);
        assert_eq!(read_limit(32, 4096 - 47, 1 << 20), 8192 - 32);
        assert_eq!(read_limit(32, 1 << 20, 1 << 30), (1 << 20) + 4096 - 32);
        assert_eq!(read_limit(32, 5000, 6000), 6000, "never past the data");
        assert_eq!(read_limit(32, u64::MAX, 6000), 6000);
    }

    #[test]
    fn bounds_grow_geometrically_within_the_segment() {
        assert_eq!(next_bound(0, 64 << 20), MAX_STEP);
        assert_eq!(next_bound(100, 64 << 20), MAX_STEP + 100);
        assert_eq!(next_bound(3 << 20, 64 << 20), 6 << 20);
        assert_eq!(next_bound(40 << 20, 64 << 20), 64 << 20);
        assert_eq!(next_bound(100, 4000), 600, "an eighth of a small segment");
        assert_eq!(next_bound(3000, 4000), 4000);
        assert_eq!(next_bound(5000, 4000), 5000, "never below the end");
    }
}
