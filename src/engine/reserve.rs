//! The checkpoint reserve: room on disk kept for compaction's next checkpoint, so that a
//! full disk can be recovered by compaction alone.
//!
//! Compaction frees space only after it has written a checkpoint (segments below it are
//! then no longer needed), and a checkpoint needs space. So between checkpoints the
//! checkpoint's temporary file, `checkpoint.tmp`, is kept on disk with its blocks allocated
//! (`fallocate`: they are the file's, not a sparse length, and read as zeros; zeros are
//! written only where the platform cannot allocate) and synced: the *reserve*. The next
//! checkpoint is written over it in place (see [`super::checkpoint::write`]), needing no
//! new space while it fits, then cut to its length and renamed over its slot as before. Once compaction has freed what it can,
//! the reserve is made again.
//!
//! It is no change to the format: `checkpoint.tmp` always was a name a checkpoint is
//! written under and that may be left behind (by a crash); nothing reads it, recovery leaves
//! it alone, and a build that does not keep a reserve truncates it at its next checkpoint.
//!
//! Invariants:
//! - the reserve holds at least [`size_for`] of the last checkpoint written (two such
//!   checkpoints: on a full disk compaction writes the same one into both slots before it
//!   reclaims, see [`super::compaction`]), and never less than [`MIN_RESERVE`], whenever
//!   the disk had the room;
//! - making it never fails for want of space: a full disk leaves the reserve as large as it
//!   got ([`Reserve::Short`]), and the next compaction or open tries again;
//! - only a store that owns the directory makes one (never a read-only snapshot).

use std::path::Path;

use super::checkpoint;
use crate::error::{Error, Result};
use crate::storage::vfs::{write_zeros, Vfs};

/// The smallest reserve kept, in bytes.
pub(crate) const MIN_RESERVE: u64 = 16 << 10;

/// The reserve kept for checkpoints of `checkpoint_len` bytes: room for two of them.
pub(crate) fn size_for(checkpoint_len: u64) -> u64 {
    checkpoint_len.saturating_mul(2).max(MIN_RESERVE)
}

/// What [`keep`] achieved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reserve {
    /// The reserve holds at least the size asked for.
    Full,
    /// The disk had no room for all of it: the disk is full.
    Short,
}

/// Makes the reserve in `dir` at least `size` bytes: what the file already holds is kept,
/// and blocks are allocated after it (never written, where the file system allocates).
/// ENOSPC, from the allocation or the sync, is [`Reserve::Short`]; other I/O errors are
/// returned. An allocation the disk has no room for is all or nothing on some file systems,
/// so on ENOSPC zeros are written after it instead, as far as they go: the reserve keeps
/// whatever room the disk had.
pub(crate) fn keep(fs: &dyn Vfs, dir: &Path, size: u64) -> Result<Reserve> {
    let path = dir.join(checkpoint::TEMP);
    let io = |op, e| Error::io(op, &path, e);
    let opened = match fs.open(&path, false) {
        Ok(file) => Ok(file),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => fs.create(&path),
        Err(e) => Err(e),
    };
    let file = match opened {
        Ok(file) => file,
        Err(e) if crate::error::is_disk_full(&e) => return Ok(Reserve::Short),
        Err(e) => return Err(io("create", e)),
    };
    let len = file.len().map_err(|e| io("stat", e))?;
    if len >= size {
        return Ok(Reserve::Full);
    }
    let filled = match file.allocate(size) {
        Err(e) if crate::error::is_disk_full(&e) => {
            let now = file.len().map_err(|e| io("stat", e))?;
            write_zeros(file.as_ref(), now, size).map_err(|e| ("write", e))
        }
        allocated => allocated.map_err(|e| ("allocate", e)),
    }
    .and_then(|()| file.sync().map_err(|e| ("fsync", e)));
    match filled {
        Ok(()) => Ok(Reserve::Full),
        Err((_, e)) if crate::error::is_disk_full(&e) => Ok(Reserve::Short),
        Err((op, e)) => Err(io(op, e)),
    }
}

/// The reserve a store needs at open: for checkpoints as large as the larger slot file.
pub(crate) fn size_at_open(fs: &dyn Vfs, dir: &Path) -> u64 {
    let largest = checkpoint::SLOTS
        .iter()
        .filter_map(|name| fs.open(&dir.join(name), true).ok()?.len().ok())
        .max()
        .unwrap_or(0);
    size_for(largest)
}
