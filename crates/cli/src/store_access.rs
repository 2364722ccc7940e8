//! Opening a store for a command, with the actor its changes are recorded as, and finding
//! its DLQs and the entries a command selects in them.
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
//! `enqueue` and `import` create the store only when asked (`--create`, [`open_target`]),
//! and say that they did.

use std::path::Path;

use deadletter::audit::Actor;
use deadletter::control::Client;
use deadletter::queue::MessageId;
use deadletter::{Config, DeadLetterQueue, Error, Filter, Store};
use deadletter_dashboard::api;
use deadletter_dashboard::Source;

use crate::error::CliError;
use crate::live::Live;
use crate::names;

/// Whether a command may create the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Open {
    /// The store must exist.
    Existing,
    /// The store is created if missing.
    Create,
}

/// The store `enqueue` or `import` writes into: an existing one, or, with `create`, a new
/// one, and whether it was created. Without `create`, a directory that holds no store is
/// [`CliError::NoStore`] and nothing is created.
pub fn open_target(dir: &Path, create: bool) -> Result<(Writable, bool), CliError> {
    let missing = match check_is_store(dir) {
        Ok(()) => false,
        Err(CliError::NotAStore(path, why)) if why != NOT_A_DIRECTORY => {
            if !create {
                return Err(CliError::NoStore { path, why });
            }
            true
        }
        // A path that is a file: the store reports it (`not_a_directory`).
        Err(CliError::NotAStore(..)) => false,
        Err(e) => return Err(e),
    };
    let store = open_write(dir, Open::Create, false)?;
    Ok((store, missing))
}

/// What [`check_is_store`] says of a path that is a file.
const NOT_A_DIRECTORY: &str = "not a directory";

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
            Err(CliError::NotAStore(dir.to_path_buf(), NOT_A_DIRECTORY))
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

/// Who this tool's changes are recorded as: `$USER@host`; without `$USER` (and `$LOGNAME`),
/// the name of the process's user id in `/etc/passwd`, or `uid<N>` when it has none there;
/// `unknown` for a host it cannot find.
pub fn cli_actor() -> Actor {
    let user = std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .ok()
        .filter(|name| !name.is_empty())
        .or_else(user_of_this_process)
        .unwrap_or_else(|| "unknown".to_string());
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default();
    let host = if host.is_empty() { "unknown" } else { &host };
    // An environment that makes a name no actor may have (a control character in $USER)
    // is recorded without its user.
    Actor::new(format!("{user}@{host}"))
        .or_else(|_| Actor::new(format!("unknown@{host}")))
        .unwrap_or_else(|_| Actor::library())
}

/// The user this process runs as: its uid (the owner of `/proc/self`) looked up in
/// `/etc/passwd`, or `uid<N>` for a uid that file does not name (a container, NSS users).
fn user_of_this_process() -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let uid = std::fs::metadata("/proc/self").ok()?.uid();
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    let named = passwd.lines().find_map(|line| {
        let mut fields = line.split(':');
        let name = fields.next()?;
        let id = fields.nth(1)?.parse::<u32>().ok()?;
        (id == uid && !name.is_empty()).then(|| name.to_string())
    });
    Some(named.unwrap_or_else(|| format!("uid{uid}")))
}

/// Takes the store in `dir` to change it, or, when another process holds it, connects to
/// that process's control socket. With `serve`, the store (if this process takes it)
/// serves a control socket itself, so that commands run while it is served work too.
pub fn open_write(dir: &Path, mode: Open, serve: bool) -> Result<Writable, CliError> {
    if mode == Open::Existing {
        check_is_store(dir)?;
    }
    // Changes are recorded in the audit trail as made by user@host, here or by the owner.
    let actor = cli_actor();
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
        Some(name) => Ok(vec![names::dlq(source, name)?]),
        None => source
            .queue_names()?
            .iter()
            .map(|n| Ok(source.dlq(n)?))
            .collect(),
    }
}

/// A DLQ and the ids of the entries selected in it.
pub(crate) type Selected<D> = (D, Vec<MessageId>);

/// The entries a replay or delete works on, per DLQ.
pub(crate) fn selected<S: Source>(
    store: &S,
    id: Option<MessageId>,
    queue: Option<&str>,
    filter: &Filter,
    limit: Option<usize>,
) -> Result<Vec<Selected<S::Dlq>>, CliError> {
    if let Some(id) = id {
        let (dlq, _) = api::find_entry(store, id)?;
        if let Some(q) = queue {
            let wanted = names::dlq(store, q)?;
            if wanted.name() != dlq.name() {
                return Err(CliError::Input(format!(
                    "entry {id} is in {}, not in {}",
                    dlq.name(),
                    wanted.name()
                )));
            }
        }
        return Ok(vec![(dlq, vec![id])]);
    }
    let mut out = Vec::new();
    let mut left = limit.unwrap_or(usize::MAX);
    for dlq in select_dlqs(store, queue)? {
        if left == 0 {
            break;
        }
        let ids = dlq.ids(filter, Some(left))?;
        left -= ids.len();
        out.push((dlq, ids));
    }
    Ok(out)
}
