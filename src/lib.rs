//! deadletter: an embedded, persistent, log-structured queue engine with a first-class dead
//! letter queue.
//!
//! Layers, bottom up (see `docs/ARCHITECTURE.md`):
//! - [`vfs`]: the storage seam, every file operation behind one trait;
//! - [`format`]: the byte layout of segment headers and record frames;
//! - [`segment`]: one segment file and its recovery scan;
//! - [`log`]: the segmented log with group commit and crash recovery.

#![warn(missing_docs)]

pub mod error;
pub mod format;
pub mod log;
pub mod segment;
pub mod vfs;

pub use error::{CorruptionKind, Error, Result};
pub use log::{Durability, Log, LogOptions, RecoveryMode, RecoveryReport};
