//! Read-only memory maps of segment files: the crate's only `unsafe` code.
//!
//! The crate denies `unsafe_code`; this module alone allows it, for the one call that maps
//! a file ([`memmap2::Mmap::map`]). Mapping is unsafe because the bytes can change, or the
//! pages vanish, if the file is modified or truncated while mapped. The invariants that
//! make the maps here sound are those of the log:
//! - a map is read-only, and the file belongs to a store directory that this process holds
//!   an exclusive lock on, so no other deadletter process writes or truncates it;
//! - within the process, readers look only below the log's written end, and bytes below it
//!   are never rewritten;
//! - truncation happens during recovery (before any map of the file exists) or to files
//!   being deleted, whose maps keep their pages alive until dropped.
//!
//! A read-only snapshot (`Store::open_read_only`) maps files another process may hold. That
//! process only appends past the bytes the snapshot reads (the snapshot's end is fixed at
//! open, below what was written), deletes whole files (the map keeps their pages), grows
//! files, and never shrinks one: a torn tail is zeroed in place at its open, not cut, so no
//! page a snapshot mapped goes away.

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
    fn bytes(&self) -> &[u8] {
        &self.map
    }
    fn is_live(&self) -> bool {
        true
    }
}
