//! Opening a store for a command, and finding its DLQs.
//!
//! Commands that only read or change existing entries refuse a directory that holds no
//! segment file, so a mistyped path is reported instead of becoming a new, empty store.
//! `enqueue` and `import` create the store. A store held by another process is reported
//! by the library as locked before anything in the directory is touched.

use std::path::Path;

use deadletter::{Config, Dlq, Store};

use crate::error::CliError;

/// Whether a command may create the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Open {
    /// The store must exist.
    Existing,
    /// The store is created if missing.
    Create,
}

/// Checks that `dir` holds a store (at least one segment file).
pub fn check_is_store(dir: &Path) -> Result<(), CliError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(CliError::NotAStore(dir.to_path_buf(), "no such directory"));
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => {
            return Err(CliError::NotAStore(dir.to_path_buf(), "not a directory"));
        }
        Err(e) => return Err(CliError::io(format!("read {}", dir.display()), e)),
    };
    for entry in entries {
        let entry = entry.map_err(|e| CliError::io(format!("read {}", dir.display()), e))?;
        let name = entry.file_name();
        if deadletter::segment::parse_segment_name(&name.to_string_lossy()).is_some() {
            return Ok(());
        }
    }
    Err(CliError::NotAStore(
        dir.to_path_buf(),
        "it holds no segment file (*.seg)",
    ))
}

/// Room a record needs beyond its payload, as the store reserves it (see `Store::open`).
const RECORD_OVERHEAD: u64 = 64 << 10;

/// The configuration to open `dir` with: the defaults, except that the segment size is the
/// one the store's files show. A store's settings are not stored in it; without this, an
/// open with another segment size would grow the active segment to the default size.
pub fn config_for(dir: &Path) -> Config {
    let mut config = Config::default();
    let largest = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            deadletter::segment::parse_segment_name(&e.file_name().to_string_lossy()).is_some()
        })
        .filter_map(|e| e.metadata().ok().map(|m| m.len()))
        .max();
    let header =
        deadletter::format::SEGMENT_HEADER_LEN as u64 + deadletter::format::FRAME_HEADER_LEN as u64;
    if let Some(len) = largest {
        // Too small a file cannot tell a size (a cut file): keep the defaults then.
        if len > 2 * RECORD_OVERHEAD + header && len != config.segment_size {
            config.segment_size = len;
            let room = len - RECORD_OVERHEAD - header;
            config.max_message_size = config.max_message_size.min(room as usize);
        }
    }
    config
}

/// Opens the store in `dir`.
pub fn open(dir: &Path, mode: Open) -> Result<Store, CliError> {
    if mode == Open::Existing {
        check_is_store(dir)?;
    }
    Ok(Store::open(dir, config_for(dir))?)
}

/// The DLQs a command works on: the one of `queue` (a queue or DLQ name), or all of them.
pub fn select_dlqs(store: &Store, queue: Option<&str>) -> Result<Vec<Dlq>, CliError> {
    match queue {
        Some(name) => Ok(vec![store.dlq(name)?]),
        None => store
            .queue_names()
            .iter()
            .map(|n| Ok(store.existing_queue(n)?.dlq()))
            .collect(),
    }
}
