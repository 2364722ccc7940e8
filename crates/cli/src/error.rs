//! The binary's error type and its exit codes: 2 for bad usage found after parsing, 1 for
//! everything else (clap itself exits 2 on usage errors it finds).

use std::fmt;
use std::path::PathBuf;

use deadletter::queue::NameProblem;

/// Why a command failed.
#[derive(Debug)]
pub enum CliError {
    /// The arguments make no sense together (exit 2).
    Usage(String),
    /// `replay --transform`: the jq expression does not compile (exit 2; nothing was read
    /// or changed).
    Expression(crate::jq::ExprError),
    /// Another process (or handle) holds the store and cannot be asked to make the change
    /// (it serves no control socket): nothing was touched.
    Locked {
        /// The store.
        path: PathBuf,
        /// The holder's process id, if the lock file says.
        pid: Option<u32>,
        /// The holder's host, if the lock file says.
        host: Option<String>,
        /// Why the holder could not be asked, when that was tried.
        why: Option<String>,
    },
    /// The directory is not a store.
    NotAStore(PathBuf, &'static str),
    /// `enqueue` or `import` without `--create` found no store to write to: a missing
    /// directory, or one that holds no segment file (nothing was created).
    NoStore {
        /// The directory given.
        path: PathBuf,
        /// What is there instead, such as "no such directory".
        why: &'static str,
    },
    /// A queue or DLQ name the store (or namespace) does not know, with the nearest known
    /// name and every known one (see [`crate::names`]).
    UnknownQueue(Box<Unknown>),
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
    /// `trace`: the store knows nothing of this message.
    UnknownMessage(u64),
    /// The dashboard could not start.
    Dashboard(deadletter_dashboard::DashboardError),
    /// The command needs JetStream, and this binary was built without its `jetstream`
    /// feature (exit 2): what was asked, such as "nats://h:4222/ns is a JetStream namespace".
    #[cfg_attr(feature = "jetstream", allow(dead_code))]
    NotBuilt(String),
}

impl CliError {
    /// The process exit code.
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Usage(_) | CliError::Expression(_) | CliError::NotBuilt(_) => 2,
            _ => 1,
        }
    }

    /// A stable name of the error's kind, for `--json` errors.
    pub fn kind(&self) -> &'static str {
        use deadletter::Error as E;
        match self {
            CliError::Usage(_) => "usage",
            CliError::Expression(_) => "bad_expression",
            CliError::Locked { .. } => "locked",
            CliError::NotAStore(..) => "not_a_store",
            CliError::NoStore { .. } => "store_not_found",
            CliError::UnknownQueue(_) => "unknown_queue",
            CliError::Io { .. } => "io",
            CliError::Input(_) => "input",
            CliError::Incomplete(_) => "incomplete",
            CliError::UnknownMessage(_) => "not_found",
            CliError::Dashboard(_) => "dashboard",
            CliError::NotBuilt(_) => "not_built",
            CliError::Store(e) => match e {
                E::NotFound(_) => "not_found",
                E::UnknownQueue(_) => "unknown_queue",
                E::InvalidQueueName { problem, .. } => name_problem_kind(problem),
                E::NameClash { .. } => "name_clash",
                E::Remote { kind, .. } if kind == "NameClash" => "name_clash",
                E::NotADirectory { .. } => "not_a_directory",
                E::Corruption { .. } => "corruption",
                E::UnsupportedFormat { .. } => "unsupported_format",
                E::DiskFull { .. } => "disk_full",
                E::TooLarge { .. } => "too_large",
                E::AlreadyReprocessed(_) => "already_reprocessed",
                E::InvalidState { .. } => "invalid_state",
                E::ReadOnly { .. } => "read_only",
                E::NoOwner { .. } => "no_owner",
                E::Remote { .. } => "remote",
                E::Io { .. } => "io",
                E::Backend { .. } => "backend",
                E::BeforeHorizon { .. } => "before_horizon",
                E::NotKept(_) => "not_kept",
                _ => "store",
            },
        }
    }

    /// The error as the JSON object `--json` prints: its kind and message, and for an
    /// unknown queue the name, the nearest known one (`suggestion`, or null) and every
    /// known one (`known`); for a missing store its `path`.
    pub fn to_json(&self) -> serde_json::Value {
        let mut error = serde_json::json!({ "kind": self.kind(), "message": self.to_string() });
        match self {
            CliError::UnknownQueue(u) => {
                error["queue"] = u.name.clone().into();
                error["suggestion"] = u.suggestion.clone().into();
                error["known"] = u.known.clone().into();
            }
            CliError::NoStore { path, .. } => {
                error["path"] = path.display().to_string().into();
            }
            CliError::Expression(e) => {
                error["expression"] = e.expr.clone().into();
                error["problems"] = e.problems.clone().into();
            }
            _ => {}
        }
        serde_json::json!({ "error": error })
    }

    /// An I/O error with what was being done.
    pub fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        CliError::Io {
            what: what.into(),
            source,
        }
    }
}

/// The `--json` error kind of a refused queue name: one per [`NameProblem`].
fn name_problem_kind(problem: &NameProblem) -> &'static str {
    match problem {
        NameProblem::Empty => "queue_name_empty",
        NameProblem::TooLong { .. } => "queue_name_too_long",
        NameProblem::Blank => "queue_name_blank",
        NameProblem::EdgeWhitespace => "queue_name_edge_whitespace",
        NameProblem::DotName => "queue_name_dot",
        NameProblem::PathSeparator(_) => "queue_name_path_separator",
        NameProblem::ControlCharacter(_) => "queue_name_control_character",
        NameProblem::InvisibleCharacter(_) => "queue_name_invisible_character",
        NameProblem::NotAllowed { .. } => "queue_name_not_allowed",
        _ => "queue_name_invalid",
    }
}

impl From<deadletter::Error> for CliError {
    fn from(e: deadletter::Error) -> Self {
        match e {
            deadletter::Error::Locked { path, pid, host } => CliError::Locked {
                path,
                pid,
                host,
                why: None,
            },
            e => CliError::Store(e),
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Usage(m) => write!(f, "{m}"),
            CliError::Expression(e) => write!(f, "{e}"),
            CliError::Locked {
                path,
                pid,
                host,
                why,
            } => {
                write!(f, "store {} is held by ", path.display())?;
                match (pid, host) {
                    (Some(pid), Some(host)) => write!(f, "process {pid} on {host}")?,
                    (Some(pid), None) => write!(f, "process {pid}")?,
                    _ => f.write_str("another process (or another open handle)")?,
                }
                f.write_str("; nothing was changed")?;
                if let Some(why) = why {
                    write!(f, ". It cannot be asked to make the change: {why}")?;
                }
                f.write_str(
                    ". Reads (stats, list, show, analyze, export, verify, serve --read-only) \
                     work while it runs",
                )
            }
            CliError::NotAStore(path, why) => {
                write!(f, "{} is not a deadletter store: {why}", path.display())
            }
            CliError::NoStore { path, why } => write!(
                f,
                "there is no store at {} ({why}); check the path, or pass --create to create \
                 one there",
                path.display()
            ),
            CliError::UnknownQueue(u) => write!(f, "{u}"),
            CliError::Store(deadletter::Error::NotFound(id)) => {
                write!(f, "no DLQ entry with id {id}")
            }
            CliError::Store(e) => write!(f, "{e}"),
            CliError::Io { what, source } => write!(f, "cannot {what}: {source}"),
            CliError::Input(m) => write!(f, "{m}"),
            CliError::Incomplete(m) => write!(f, "{m}"),
            CliError::UnknownMessage(id) => write!(
                f,
                "the store knows nothing of message {id}: never enqueued, or gone without \
                 passing through a DLQ and past what its audit trail keeps"
            ),
            CliError::Dashboard(e) => write!(f, "{e}"),
            CliError::NotBuilt(what) => write!(
                f,
                "{what}, and this deadletter was built without its `jetstream` feature; \
                 install it with the feature (`cargo install deadletter-cli`: it is on by \
                 default) to work on NATS JetStream"
            ),
        }
    }
}

impl std::error::Error for CliError {}

/// A name the store does not know, what it was for, and what it does know.
#[derive(Debug, Clone)]
pub struct Unknown {
    /// The name typed.
    pub name: String,
    /// The nearest known queue or DLQ name, if one is near enough.
    pub suggestion: Option<String>,
    /// Every known queue, in the store's order.
    pub known: Vec<String>,
    /// The sentence, whole: what was refused, the suggestion and what to do.
    message: String,
}

impl Unknown {
    /// The refusal of `name`, with the nearest known name, every known queue, and the
    /// whole sentence to show.
    pub fn new(
        name: String,
        suggestion: Option<String>,
        known: Vec<String>,
        message: String,
    ) -> Unknown {
        Unknown {
            name,
            suggestion,
            known,
            message,
        }
    }

    /// Puts `prefix` before the sentence (such as "orders.ndjson line 3: ").
    pub fn prefixed(mut self, prefix: &str) -> Unknown {
        self.message = format!("{prefix}{}", self.message);
        self
    }

    /// Adds `suffix` after the sentence.
    pub fn then(mut self, suffix: &str) -> Unknown {
        self.message.push_str(suffix);
        self
    }
}

impl fmt::Display for Unknown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<Unknown> for CliError {
    fn from(u: Unknown) -> Self {
        CliError::UnknownQueue(Box::new(u))
    }
}
