//! The storage layer: files, the byte layout, segments and the segmented log.

pub mod format;
pub mod log;
#[allow(unsafe_code)]
mod mmap;
pub mod segment;
pub mod vfs;
