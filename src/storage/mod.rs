//! The storage layer: files, the byte layout, segments and the segmented log.

pub mod format;
pub mod log;
pub mod segment;
pub mod vfs;
