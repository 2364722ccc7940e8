//! Read-only memory maps of segment files: the crate's only `unsafe` code.
//!
//! The crate denies `unsafe_code`; this module alone allows it, for the one call that maps
//! a file ([`memmap2::Mmap::map`]). Mapping is unsafe because the bytes can change, or the
//! pages vanish, if the file is modified or truncated while mapped. The invariants that
//! make the maps here sound are those of the log:
//! - a map is read-only, and the file belongs to a store directory that this process holds
//!   an exclusive lock on, so no other deadletter process writes or truncates it (a
//!   read-only snapshot is the exception, below);
//! - a map never hands out a reference to all its bytes: [`MappedFile::range`] makes a
//!   slice of exactly the range asked for, and the log asks only for bytes below the
//!   segment's written end (a record, a frame header), which are never written again. The
//!   appender's `pwrite`s into the same file land at or past that end, in bytes no
//!   reference covers, so no `&[u8]` ever sees its bytes change;
//! - recovery writes to a segment (zeroing a torn tail) before the log maps it for reads,
//!   and no reference into a map it made for its own scan outlives that scan; files are
//!   never truncated while mapped (deleted files keep their pages until the map drops).
//!
//! A read-only snapshot (`Store::open_read_only`) maps files another process may hold. That
//! process only appends past the bytes the snapshot reads (the snapshot's end is fixed at
//! open, below what was written), deletes whole files (the map keeps their pages), grows
//! files, and never shrinks one: a torn tail is zeroed in place at its open, not cut, so no
//! page a snapshot mapped goes away. The snapshot's own recovery scan never maps: it reads
//! with `pread` (into a private copy when the scan needs the whole segment), since the owner
//! may be writing past the last record while it looks.

use std::fs::File;
use std::io;

use super::vfs::MappedView;

/// A read-only map of a whole file.
pub(crate) struct MappedFile {
    map: memmap2::Mmap,
}

impl MappedFile {
    /// Maps `file` read-only (the file must not be empty).
    pub(crate) fn map(file: &File) -> io::Result<MappedFile> {
        // SAFETY: read-only map of a segment file; the log (this process's, or the owner's
        // when this is a snapshot) never rewrites below a reader's end or shrinks the file
        // while the map lives (see the module documentation for the invariants).
        let map = unsafe { memmap2::Mmap::map(file)? };
        Ok(MappedFile { map })
    }
}

impl MappedView for MappedFile {
    fn len(&self) -> usize {
        self.map.len()
    }
    fn range(&self, start: usize, end: usize) -> Option<&[u8]> {
        if start > end || end > self.map.len() {
            return None;
        }
        // SAFETY: `start <= end <= len`, so the range lies inside the live mapping, which
        // `self` keeps alive for the slice's lifetime. The slice covers only the bytes asked
        // for, never the whole map: callers ask only for bytes below the log's written end,
        // which nothing writes while the map lives (module documentation), so the bytes a
        // reference covers do not change under it.
        Some(unsafe { std::slice::from_raw_parts(self.map.as_ptr().add(start), end - start) })
    }
    fn is_live(&self) -> bool {
        true
    }
}
