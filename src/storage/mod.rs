//! The storage layer: files and bytes. A record here is an opaque byte string with a
//! checksum; this layer knows nothing of queues or messages.
//!
//! Bottom up: [`vfs`] (every file operation behind one trait; [`mmap`] makes the read-only
//! maps and [`allocate`] allocates blocks without writing them, the crate's only `unsafe`
//! code), [`format`](mod@format) (the segment header and record frame,
//! no I/O), [`segment`] (one segment file and its recovery scan) and [`log`] (the
//! directory of segments: append, group commit, read by position, recovery at open).
//! [`tail_hint`] bounds where the active segment was ever written, so that an open reads
//! only that far.
//!
//! Invariants the layers above rely on: a record's position never changes and is never
//! reused; nothing that fails its checksum is returned as data; a write acknowledged under
//! an fsync survives a crash; after a failed write or fsync the log refuses writes until it
//! is reopened.

#[allow(unsafe_code)]
mod allocate;
pub mod format;
pub mod log;
#[allow(unsafe_code)]
mod mmap;
pub mod segment;
pub(crate) mod tail_hint;
pub mod vfs;
