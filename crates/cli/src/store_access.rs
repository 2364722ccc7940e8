//! Opening a store for a command, and finding its DLQs.
//!
//! Commands that only read or change existing entries refuse a directory that holds no
//! segment file, so a mistyped path is reported instead of becoming a new, empty store.
//! `enqueue` and `import` create the store. A store held by another process is reported
//! by the library as locked before anything in the directory is touched.

use std::path::Path;

use deadletter::{Config, Store};
use deadletter_dashboard::Source;

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
    match Store::exists(dir) {
        Ok(true) => Ok(()),
        Ok(false) => Err(CliError::NotAStore(
            dir.to_path_buf(),
            "it holds no segment file (*.seg)",
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(CliError::NotAStore(dir.to_path_buf(), "no such directory"))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => {
            Err(CliError::NotAStore(dir.to_path_buf(), "not a directory"))
        }
        Err(e) => Err(CliError::io(format!("read {}", dir.display()), e)),
    }
}

/// The configuration to open `dir` with: the defaults, except that the segment size is the
/// one the store's files show (see `Config::for_existing_store`).
pub fn config_for(dir: &Path) -> Config {
    Config::for_existing_store(dir)
}

/// Opens the store in `dir`.
pub fn open(dir: &Path, mode: Open) -> Result<Store, CliError> {
    if mode == Open::Existing {
        check_is_store(dir)?;
    }
    Ok(Store::open(dir, config_for(dir))?)
}

/// The DLQs a command works on: the one of `queue` (a queue or DLQ name), or all of them.
pub fn select_dlqs<S: Source>(source: &S, queue: Option<&str>) -> Result<Vec<S::Dlq>, CliError> {
    match queue {
        Some(name) => Ok(vec![source.dlq(name)?]),
        None => source
            .queue_names()?
            .iter()
            .map(|n| Ok(source.dlq(n)?))
            .collect(),
    }
}
