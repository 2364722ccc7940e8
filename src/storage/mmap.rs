//! Read-only memory maps of segment files: with `allocate` (one `fallocate` call), the
//! crate's only `unsafe` code.
//!
//! The crate denies `unsafe_code`; this module allows it for the one call that maps
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

    /// The map's length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    /// The bytes `[start, end)`, or `None` when the range is not inside the map (the
    /// storage seam's `MappedView::range`, which `vfs` implements with it).
    pub(crate) fn range(&self, start: usize, end: usize) -> Option<&[u8]> {
        // SAFETY: the map's `len` bytes at `as_ptr` stay mapped while `self` lives, which the
        // returned slice's lifetime (that of `&self`) cannot outlive. The slice covers only
        // the bytes asked for, never the whole map: callers ask only for bytes below the
        // log's written end, which nothing writes while the map lives (module
        // documentation), so the bytes a reference covers do not change under it.
        unsafe { sub_slice(self.map.as_ptr(), self.map.len(), start, end) }
    }
}

/// The bytes `start..end` of the `len` bytes at `base`, or `None` when that range is not
/// inside them. The module's one piece of pointer arithmetic, on its own so that Miri can
/// run it (over ordinary memory: Miri cannot map files).
///
/// # Safety
///
/// `base` must point to `len` readable bytes that stay valid, and are not written, for as
/// long as the returned slice lives (`'a`).
unsafe fn sub_slice<'a>(base: *const u8, len: usize, start: usize, end: usize) -> Option<&'a [u8]> {
    if start > end || end > len {
        return None;
    }
    // SAFETY: `start <= end <= len`, so `base + start` and the `end - start` bytes after it
    // lie inside the `len` readable bytes the caller vouches for, for `'a`.
    Some(unsafe { std::slice::from_raw_parts(base.add(start), end - start) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sub_slice_is_exactly_the_range_asked_for_or_none() {
        let bytes: Vec<u8> = (0..=255).collect();
        let len = bytes.len();
        let cases = [
            (0, 0),
            (0, 1),
            (3, 17),
            (0, len),
            (len, len),
            (len - 1, len),
            (5, 4),
            (0, len + 1),
            (len + 1, len + 1),
            (usize::MAX, usize::MAX),
            (1, usize::MAX),
        ];
        for (start, end) in cases {
            // SAFETY: `bytes` is alive and unwritten while the slice is used.
            let got = unsafe { sub_slice(bytes.as_ptr(), len, start, end) };
            assert_eq!(got, bytes.get(start..end), "{start}..{end}");
        }
    }

    /// The log's reads and appends over one buffer, as Miri sees memory: readers hold
    /// slices of records below the written end while a writer fills the bytes past it
    /// through a raw pointer, in another thread. Handing out only the record's bytes is what
    /// makes this sound: a slice that also covered the bytes being written would race with
    /// the writer (Miri's race detector reports such a read), and a live shared reference
    /// whose bytes change is undefined behaviour.
    #[test]
    fn slices_below_the_written_end_stay_valid_while_bytes_past_it_are_written() {
        /// A pointer that may cross threads: the test, not the type, keeps the accesses
        /// disjoint.
        #[derive(Clone, Copy)]
        struct Shared(*mut u8);
        // SAFETY: the threads below touch disjoint bytes through it (see each use).
        unsafe impl Send for Shared {}
        impl Shared {
            fn get(self) -> *mut u8 {
                self.0
            }
        }
        const LEN: usize = 4096;
        let mut buf = vec![0u8; LEN];
        buf[..100].fill(7);
        let base = Shared(buf.as_mut_ptr());
        // SAFETY: bytes 0..100 stay allocated (`buf` outlives every use) and nothing writes
        // them while the slices live: the writer touches only 100.. (disjoint).
        let record = unsafe { sub_slice(base.get(), LEN, 10, 60) }.expect("in range");
        std::thread::scope(|s| {
            s.spawn(move || {
                for i in 100..LEN {
                    // SAFETY: inside `buf`, past every slice handed out.
                    unsafe { base.get().add(i).write((i % 251) as u8 + 1) };
                }
            });
            s.spawn(move || {
                // SAFETY: as for `record`.
                let again = unsafe { sub_slice(base.get(), LEN, 0, 100) }.expect("in range");
                assert!(again.iter().all(|&b| b == 7));
            });
            assert!(record.iter().all(|&b| b == 7));
        });
        assert!(record.iter().all(|&b| b == 7));
        assert_eq!(buf[LEN - 1], ((LEN - 1) % 251) as u8 + 1);
    }
}
