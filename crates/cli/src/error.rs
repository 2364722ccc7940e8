//! The binary's error type and its exit codes: 2 for bad usage found after parsing, 1 for
//! everything else (clap itself exits 2 on usage errors it finds).

use std::fmt;
use std::path::PathBuf;

/// Why a command failed.
#[derive(Debug)]
pub enum CliError {
    /// The arguments make no sense together (exit 2).
    Usage(String),
    /// Another process (or handle) holds the store: nothing was touched.
    Locked(PathBuf),
    /// The directory is not a store.
    NotAStore(PathBuf, &'static str),
    /// The library failed.
    Store(deadletter::Error),
    /// Reading or writing a file or stream failed.
    Io {
        /// What was being done, such as "write /tmp/x.ndjson".
        what: String,
        /// The error.
        source: std::io::Error,
    },
    /// Input (an import file) is not valid.
    Input(String),
    /// The command ran but did not do all it was asked (such as refused replays).
    Incomplete(String),
    /// The dashboard could not start.
    Dashboard(deadletter_dashboard::DashboardError),
}

impl CliError {
    /// The process exit code.
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Usage(_) => 2,
            _ => 1,
        }
    }

    /// An I/O error with what was being done.
    pub fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        CliError::Io {
            what: what.into(),
            source,
        }
    }
}

impl From<deadletter::Error> for CliError {
    fn from(e: deadletter::Error) -> Self {
        match e {
            deadletter::Error::Locked { path, .. } => CliError::Locked(path),
            e => CliError::Store(e),
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Usage(m) => write!(f, "{m}"),
            CliError::Locked(path) => write!(
                f,
                "store {} is locked by another process (or another open handle); nothing was \
                 changed. Stop that process first, or use `deadletter verify`, which reads \
                 without the lock",
                path.display()
            ),
            CliError::NotAStore(path, why) => {
                write!(f, "{} is not a deadletter store: {why}", path.display())
            }
            CliError::Store(deadletter::Error::NotFound(id)) => {
                write!(f, "no DLQ entry with id {id}")
            }
            CliError::Store(e) => write!(f, "{e}"),
            CliError::Io { what, source } => write!(f, "cannot {what}: {source}"),
            CliError::Input(m) => write!(f, "{m}"),
            CliError::Incomplete(m) => write!(f, "{m}"),
            CliError::Dashboard(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for CliError {}
