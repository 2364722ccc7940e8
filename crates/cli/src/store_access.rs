//! Opening a store for a command, and finding its DLQs.
//!
//! Commands that only read (stats, list, show, analyze, export; verify reads the files
//! itself) open a read-only snapshot (`Store::open_read_only`): no lock, nothing written,
//! so they work while another process holds the store, and on a read-only directory or
//! copy. Commands that change the store take it ([`open_write`]); when another process
//! holds it they ask that process through its control socket ([`Writable::Owner`]), and
//! say so clearly when it serves none.
//!
//! Commands that only read or change existing entries refuse a directory that holds no
//! segment file, so a mistyped path is reported instead of becoming a new, empty store.
//! `enqueue` and `import` create the store.

use std::path::Path;

use deadletter::control::Client;
use deadletter::{Config, Error, Store};
use deadletter_dashboard::Source;

use crate::error::CliError;
use crate::live::Live;

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

/// A read-only snapshot of the store in `dir`, whoever holds it.
pub fn open_read(dir: &Path) -> Result<Store, CliError> {
    check_is_store(dir)?;
    Ok(Store::open_read_only(dir, config_for(dir))?)
}

/// A store a command changes: held by this process, or by another one that carries the
/// changes out.
pub enum Writable {
    /// This process holds the store.
    Local(Store),
    /// Another process holds it and serves its control socket.
    Owner(Live),
}

/// Takes the store in `dir` to change it, or, when another process holds it, connects to
/// that process's control socket. With `serve`, the store (if this process takes it)
/// serves a control socket itself, so that commands run while it is served work too.
pub fn open_write(dir: &Path, mode: Open, serve: bool) -> Result<Writable, CliError> {
    if mode == Open::Existing {
        check_is_store(dir)?;
    }
    // Changes are recorded in the audit trail as made by user@host, here or by the owner.
    let actor = crate::trace::cli_actor();
    match Store::open(dir, config_for(dir).control_socket(serve)) {
        Ok(store) => Ok(Writable::Local(store.with_actor(actor))),
        Err(Error::Locked { path, pid, host }) if !serve => match Client::connect_as(dir, &actor) {
            Ok(client) => {
                let snapshot = Store::open_read_only(dir, config_for(dir))?;
                Ok(Writable::Owner(Live::new(snapshot, client)))
            }
            Err(Error::NoOwner { reason, .. }) => Err(CliError::Locked {
                path,
                pid,
                host,
                why: Some(reason),
            }),
            Err(e) => Err(e.into()),
        },
        Err(e) => Err(e.into()),
    }
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
