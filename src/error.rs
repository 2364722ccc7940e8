//! The crate's one error type.
//!
//! Every fallible public function returns [`Result<T>`]. Variants name what went wrong and
//! where, so a caller (or an operator reading a log line) can act on it without guessing:
//! corruption carries where the damage is ([`CorruptionLocation`]: a file and byte offset,
//! or a record's log position), I/O errors carry the operation and path.
//!
//! This module is shared by every layer (the storage layer's errors are the store's).

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

mod name;

/// Result alias used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What kind of damage a [`Error::Corruption`] describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CorruptionKind {
    /// A record failed its checksum, and valid records written after it prove it was durable.
    BadRecord,
    /// A segment header has a wrong magic number or checksum, or a version or header length
    /// no version of deadletter writes. (A header of a newer version is not damage:
    /// [`Error::UnsupportedFormat`].)
    BadHeader,
    /// The records of a segment run past the next segment's base: the two overlap (a gap
    /// between them, a segment missing there, is [`CorruptionKind::MissingRange`]).
    MissingSegment,
    /// An entry named like a segment is not a regular file (a directory, say).
    NotASegment,
    /// A segment file is shorter than the size its header declares: it was cut (a segment
    /// is created at its full size, and nothing shortens it but recovery cutting a torn
    /// tail, which grows it back). Sizes in bytes, header included.
    ShortSegment {
        /// The size its header declares.
        expected: u64,
        /// The size it has.
        actual: u64,
    },
    /// The log ends before a position it had made durable (a checkpoint covers records up
    /// to there): its tail was lost. Log positions.
    LostTail {
        /// The durable high-water mark.
        expected: u64,
        /// Where the log's records end.
        actual: u64,
    },
    /// Log positions `[start, end)` that the store needs lie in no segment: the segments
    /// that held them are gone. Below the first segment (a first segment deleted, say):
    /// the store's state (its newest checkpoint) refers to records there, or, without a
    /// checkpoint, the log no longer starts at position 0. Between two segments (a middle
    /// one deleted): the earlier one's records end before the later one begins. Log
    /// positions.
    MissingRange {
        /// The lowest position needed.
        start: u64,
        /// The first position the log still holds.
        end: u64,
    },
    /// A segment or checkpoint of another store: its header names a store id other than
    /// this store's (the id a store gets at creation, in every segment header and
    /// checkpoint from format version 2 on). It is never read as this store's: a strict
    /// open and `verify` name the file, quarantine skips it whole.
    Foreign {
        /// This store's id.
        expected: u128,
        /// The id the file names.
        found: u128,
    },
    /// The log's last segments are gone: a checkpoint was written while the segment
    /// numbered `last` was the active one (format version 2 on: each segment header holds
    /// its sequence number), and the highest-numbered segment left is `first - 1` (or none
    /// of version 2 is left). Sequence numbers. (A loss the positions show, a log ending
    /// before a checkpoint's position, is [`CorruptionKind::LostTail`].)
    MissingSegments {
        /// The first segment number missing.
        first: u64,
        /// The last segment number missing.
        last: u64,
    },
    /// A record decoded with a valid checksum but its content is not a valid record.
    BadContent,
    /// A checkpoint file failed its checksum or could not be decoded.
    BadCheckpoint,
}

impl fmt::Display for CorruptionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            CorruptionKind::BadRecord => "record fails its checksum",
            CorruptionKind::BadHeader => "bad segment header",
            CorruptionKind::MissingSegment => "segment overlaps the next one in the sequence",
            CorruptionKind::NotASegment => "named like a segment but not a file",
            CorruptionKind::ShortSegment { expected, actual } => {
                return write!(
                    f,
                    "segment file is {actual} bytes, shorter than the {expected} bytes its \
                     header declares (it was cut)"
                );
            }
            CorruptionKind::LostTail { expected, actual } => {
                return write!(
                    f,
                    "the log ends at position {actual}, before position {expected}, which \
                     it had made durable (its tail was lost)"
                );
            }
            CorruptionKind::MissingRange { start, end } => {
                return write!(
                    f,
                    "log positions {start} to {end} are in no segment: the segments that \
                     held them are missing"
                );
            }
            CorruptionKind::Foreign { expected, found } => {
                return write!(
                    f,
                    "the file belongs to another store (store id {found:032x}; this store's \
                     is {expected:032x})"
                );
            }
            CorruptionKind::MissingSegments { first, last } => {
                return write!(
                    f,
                    "segments numbered {first} to {last} are missing: a checkpoint was \
                     written while segment {last} existed (the log lost its last segments)"
                );
            }
            CorruptionKind::BadContent => "record content cannot be decoded",
            CorruptionKind::BadCheckpoint => "checkpoint is damaged",
        };
        f.write_str(s)
    }
}

pub use name::NameProblem;

/// Where damaged data was found.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CorruptionLocation {
    /// A byte offset in a file: a segment (its header, or a record frame that fails its
    /// checksum) or a checkpoint.
    File {
        /// The segment or checkpoint file.
        path: PathBuf,
        /// Byte offset inside that file.
        offset: u64,
    },
    /// A record's position in the store's log: its frame passed its checksum, but its
    /// content is not a valid record (or not the record its reader expected).
    LogPosition(u64),
}

impl fmt::Display for CorruptionLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CorruptionLocation::File { path, offset } => {
                write!(f, "{} at byte {offset}", path.display())
            }
            CorruptionLocation::LogPosition(pos) => write!(f, "the record at log position {pos}"),
        }
    }
}

/// Every error deadletter returns. The enum is `#[non_exhaustive]`: a `match` needs a last
/// arm for the variants it does not name (and for those added later).
///
/// ```
/// use deadletter::{Config, Error, Store};
/// use deadletter::recovery::CorruptionLocation;
///
/// /// What to tell an operator.
/// fn advice(e: &Error) -> String {
///     match e {
///         Error::Locked { path, .. } => format!("{} is open in another process", path.display()),
///         Error::DiskFull { path } => format!("free disk space for {}", path.display()),
///         Error::Corruption { kind, location: CorruptionLocation::File { path, offset } } => {
///             format!("{kind} in {} at byte {offset}: run `deadletter verify`", path.display())
///         }
///         Error::TooLarge { size, max } => format!("a message of {size} bytes is over {max}"),
///         Error::UnknownQueue(name) => format!("there is no queue {name:?}"),
///         // Another consumer has the message now: its lease ran out.
///         Error::InvalidState { .. } | Error::NotFound(_) => "stale delivery".to_string(),
///         other => other.to_string(),
///     }
/// }
///
/// # fn main() -> deadletter::Result<()> {
/// # let dir = std::env::temp_dir().join(format!("deadletter-doc-error-{}", std::process::id()));
/// # let _ = std::fs::remove_dir_all(&dir);
/// let store = Store::open(&dir, Config::fast().max_message_size(1024))?;
/// let err = store.queue("orders")?.enqueue(vec![0u8; 2000]).unwrap_err();
/// assert!(matches!(err, Error::TooLarge { size: 2000, max: 1024 }));
/// assert_eq!(advice(&err), "a message of 2000 bytes is over 1024");
///
/// let err = Store::open(&dir, Config::fast()).unwrap_err(); // this process holds it
/// assert!(matches!(err, Error::Locked { .. }));
/// let err = store.existing_queue("payments").unwrap_err();
/// assert_eq!(advice(&err), r#"there is no queue "payments""#);
/// # drop(store);
/// # std::fs::remove_dir_all(&dir).ok();
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// An operating-system I/O call failed.
    Io {
        /// The operation that failed, such as `"write"` or `"fsync"`.
        op: &'static str,
        /// The file or directory it was applied to.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// The disk is full (ENOSPC). The store stays readable; acks and deletes may still free
    /// space, and appends resume once space is available.
    DiskFull {
        /// The file that could not grow.
        path: PathBuf,
    },
    /// Another handle, in this process or another one, holds the store directory.
    Locked {
        /// The directory that is locked.
        path: PathBuf,
        /// The process id of the holder, as it wrote it into the lock file (`None` when the
        /// file does not say, such as a store held by an older deadletter).
        pid: Option<u32>,
        /// The host name of the holder, as it wrote it into the lock file.
        host: Option<String>,
    },
    /// A change was asked of a store opened read-only ([`crate::Store::open_read_only`]):
    /// a snapshot reads, its owner writes (see [`crate::control`]).
    ReadOnly {
        /// The store directory.
        path: PathBuf,
    },
    /// The process that holds a store could not be asked to make a change: no control
    /// socket answers in its directory, or the exchange failed (see [`crate::control`]).
    NoOwner {
        /// The store directory.
        path: PathBuf,
        /// Why, in words.
        reason: String,
    },
    /// The process that holds a store refused or failed a change asked through its control
    /// socket, with an error this build has no variant for.
    Remote {
        /// The owner's error kind (see `docs/CONTROL.md`).
        kind: String,
        /// The owner's error message.
        message: String,
    },
    /// Stored data failed verification. Nothing from the damaged range is returned as data.
    Corruption {
        /// What is wrong.
        kind: CorruptionKind,
        /// Where: a file and byte offset, or a record's log position.
        location: CorruptionLocation,
    },
    /// The store (a segment or a checkpoint) is in an on-disk format this build does not
    /// read: a newer release's (the data is intact, this reader is too old for it: open it
    /// with a newer deadletter), or, with `pre_release`, a development build's from before
    /// release 0.1.0, which no release reads. Nothing in the directory was changed.
    UnsupportedFormat {
        /// The segment or checkpoint file that says so.
        path: PathBuf,
        /// The format version it was written in (with `pre_release`, in the numbering of
        /// the development builds, which is not the releases').
        found: u16,
        /// The newest format version this build reads ([`crate::store::FORMAT_VERSION`]).
        supported: u16,
        /// Written by a development build before release 0.1.0 (its magic number says so).
        pre_release: bool,
    },
    /// An fsync failed earlier: the page cache may have dropped the data, so the log refuses
    /// writes until the store is reopened (retrying fsync would report success falsely).
    Poisoned,
    /// A record or message is larger than the configured maximum.
    TooLarge {
        /// Its size in bytes.
        size: usize,
        /// The configured maximum.
        max: usize,
    },
    /// An empty record was appended (records carry at least one byte).
    EmptyRecord,
    /// A log position that does not start a record, or lies outside the log.
    InvalidPosition(u64),
    /// A new queue's name is refused: `problem` says what is wrong with it (see
    /// [`NameProblem`] for the rules). Nothing was written.
    InvalidQueueName {
        /// The name asked for.
        name: String,
        /// What is wrong with it.
        problem: NameProblem,
    },
    /// A new queue's name, or the name its DLQ would get, is already taken by an existing
    /// queue or that queue's DLQ: queues and DLQs share one namespace. Nothing was written.
    NameClash {
        /// The queue name asked for.
        name: String,
        /// The existing queue whose name, or whose DLQ's name, it collides with.
        existing: String,
    },
    /// The queue does not exist.
    UnknownQueue(String),
    /// No message with this id exists in the place the operation expected.
    NotFound(u64),
    /// The message exists but is not in a state that allows the operation.
    InvalidState {
        /// The message id.
        id: u64,
        /// What was expected, in words.
        expected: &'static str,
    },
    /// A DLQ entry that was already reprocessed is replayed again without `force`.
    AlreadyReprocessed(u64),
    /// An enqueue was refused: the queue holds its limit of pending messages
    /// (`QueueOptions::max_pending`). Nothing was written; retry once consumers (or a
    /// forwarder) have taken messages out.
    QueueFull {
        /// The queue.
        queue: String,
        /// Its limit: messages waiting or in flight.
        limit: u64,
    },
    /// A new queue was refused: the store holds as many queues as it can (its limit, more
    /// than a billion, comes from how the index packs a queue id). Nothing was written.
    TooManyQueues {
        /// The most queues a store holds.
        limit: u32,
    },
    /// A configuration value is out of range.
    InvalidConfig(String),
    /// The store path names something that is not a directory (a regular file, say), or
    /// one of its parents does: a store is a directory. Nothing was created.
    NotADirectory {
        /// The store path given.
        path: PathBuf,
    },
    /// An actor name (who makes a change, for the audit trail) that is empty, longer
    /// than 256 bytes or holds control characters.
    InvalidActor(String),
    /// A DLQ asked about a time before the earliest one the store still answers for: the
    /// evidence of what left it earlier was dropped (tombstone and lineage limits).
    BeforeHorizon {
        /// The time asked about (ms since the epoch).
        asked_ms: u64,
        /// The earliest time answered.
        earliest_ms: u64,
    },
    /// A filter of a DLQ's past ([`crate::Dlq::as_of`]) on what the store does not keep of
    /// past entries (their payloads, tags, attributes); names what was asked for.
    NotKept(String),
    /// No guarded replay with this id exists in the store.
    UnknownGuardedReplay(u64),
    /// A guarded replay cannot do what was asked: it is not in a state that allows it, or
    /// another one is active on the same DLQ. Nothing was written.
    GuardedReplayConflict {
        /// The guarded replay (the active one, for a second start).
        id: u64,
        /// Why, in words.
        reason: String,
    },
    /// Encoding or decoding a typed payload failed.
    Codec(String),
    /// The store or log was closed.
    Closed,
    /// A backend other than the embedded store (a server, a client library) failed an
    /// operation: a lost connection, a timeout, a refusal. The operation may be retried.
    Backend {
        /// The backend, such as `"jetstream"`.
        backend: &'static str,
        /// The operation that failed, such as `"publish"`.
        op: &'static str,
        /// The backend's own error.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl Error {
    /// Wraps an I/O error, turning ENOSPC into [`Error::DiskFull`].
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        let path = path.into();
        if is_disk_full(&source) {
            return Error::DiskFull { path };
        }
        Error::Io { op, path, source }
    }

    /// Corruption at a byte offset in a file.
    pub(crate) fn corrupt_file(
        kind: CorruptionKind,
        path: impl Into<PathBuf>,
        offset: u64,
    ) -> Self {
        Error::Corruption {
            kind,
            location: CorruptionLocation::File {
                path: path.into(),
                offset,
            },
        }
    }

    /// A backend's failure of operation `op` (see [`Error::Backend`]).
    pub fn backend(
        backend: &'static str,
        op: &'static str,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Error::Backend {
            backend,
            op,
            source: source.into(),
        }
    }

    /// True when the error reports stored data failing verification.
    pub fn is_corruption(&self) -> bool {
        matches!(self, Error::Corruption { .. })
    }
}

/// [`Error::InvalidConfig`] saying `why` unless `ok`: one check of a setting or an
/// argument (`why` is formatted only when it fails: pass `format_args!` for a message
/// with values).
pub(crate) fn require(ok: bool, why: impl fmt::Display) -> Result<()> {
    ok.then_some(())
        .ok_or_else(|| Error::InvalidConfig(why.to_string()))
}

/// [`Error::io`] on the error of an I/O result: `file.sync().io("fsync", &path)?`. The
/// path is copied only when there is an error.
pub(crate) trait IoContext<T> {
    /// The result, its error wrapped with the operation and the file it was on.
    fn io(self, op: &'static str, path: impl AsRef<Path>) -> Result<T>;
}

impl<T> IoContext<T> for io::Result<T> {
    fn io(self, op: &'static str, path: impl AsRef<Path>) -> Result<T> {
        self.map_err(|e| Error::io(op, path.as_ref(), e))
    }
}

/// True for ENOSPC (and EDQUOT, a quota that is full).
pub(crate) fn is_disk_full(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded
    )
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { op, path, source } => {
                write!(f, "{op} failed on {}: {source}", path.display())
            }
            Error::DiskFull { path } => write!(f, "disk full while writing {}", path.display()),
            Error::Locked { path, pid, host } => {
                write!(f, "store {} is locked by ", path.display())?;
                match (pid, host) {
                    (Some(pid), Some(host)) => write!(f, "process {pid} on host {host}"),
                    (Some(pid), None) => write!(f, "process {pid}"),
                    _ => f.write_str("another handle (another process or an open Store)"),
                }
            }
            Error::ReadOnly { path } => write!(
                f,
                "store {} is open read-only (a snapshot); changes go through the process \
                 that holds it",
                path.display()
            ),
            Error::NoOwner { path, reason } => write!(
                f,
                "cannot ask the process holding store {} to make the change: {reason}",
                path.display()
            ),
            Error::Remote { kind, message } => {
                write!(f, "the store's owner refused: {message} ({kind})")
            }
            Error::Corruption { kind, location } => write!(f, "corruption in {location}: {kind}"),
            Error::UnsupportedFormat {
                path,
                found,
                supported,
                pre_release: false,
            } => write!(
                f,
                "{} is in on-disk format version {found}, newer than this build of deadletter \
                 reads (versions up to {supported}); open the store with a newer deadletter",
                path.display()
            ),
            Error::UnsupportedFormat {
                path,
                found,
                supported,
                pre_release: true,
            } => write!(
                f,
                "{} was written by a development build of deadletter from before release \
                 0.1.0 (its development format {found}), which no release reads (this build \
                 reads format versions 1 to {supported}); drain it, or export its DLQ entries \
                 with the build that wrote it and import them into a new store",
                path.display()
            ),
            Error::Poisoned => f.write_str(
                "an earlier fsync failed; the log refuses writes until the store is reopened",
            ),
            Error::TooLarge { size, max } => {
                write!(f, "{size} bytes exceeds the maximum of {max} bytes")
            }
            Error::EmptyRecord => f.write_str("a log record cannot be empty"),
            Error::InvalidPosition(p) => write!(f, "no record starts at log position {p}"),
            Error::InvalidQueueName { name, problem } => {
                write!(f, "invalid queue name {name:?}: it {problem}")?;
                if matches!(problem, NameProblem::NotAllowed { .. }) {
                    return Ok(());
                }
                write!(
                    f,
                    " (a queue name is 1 to {} bytes, not blank, without leading or trailing \
                     whitespace, '/', '\\', control or invisible characters, and not \".\" \
                     or \"..\")",
                    NameProblem::MAX_LEN
                )
            }
            Error::NameClash { name, existing } => write!(
                f,
                "queue name {name:?} clashes with queue {existing:?} or its DLQ \
                 (queues and DLQs share one namespace)"
            ),
            Error::UnknownQueue(n) => write!(f, "unknown queue {n:?}"),
            Error::NotFound(id) => write!(f, "message {id} not found"),
            Error::InvalidState { id, expected } => {
                write!(f, "message {id} is not {expected}")
            }
            Error::AlreadyReprocessed(id) => write!(
                f,
                "DLQ entry {id} was already reprocessed; replay it with force to do it again"
            ),
            Error::QueueFull { queue, limit } => write!(
                f,
                "queue {queue:?} is full: it holds its limit of {limit} pending messages"
            ),
            Error::TooManyQueues { limit } => {
                write!(f, "the store holds its limit of {limit} queues")
            }
            Error::InvalidConfig(s) => write!(f, "invalid configuration: {s}"),
            Error::NotADirectory { path } => write!(
                f,
                "{} is not a directory (a store is a directory): it, or one of its parents, \
                 is a file",
                path.display()
            ),
            Error::InvalidActor(s) => write!(
                f,
                "invalid actor {s:?}: 1 to 256 bytes without control characters"
            ),
            Error::BeforeHorizon {
                asked_ms,
                earliest_ms,
            } => write!(
                f,
                "the store no longer knows its DLQs as of {asked_ms} ms: the earliest time it \
                 answers for is {earliest_ms} ms"
            ),
            Error::NotKept(what) => write!(
                f,
                "a DLQ's past cannot be filtered by {what}: the store keeps no payload, tags \
                 or attributes of past entries (filter by error kind, message, worker, time, \
                 attempts, status or fingerprint)"
            ),
            Error::UnknownGuardedReplay(id) => write!(f, "no guarded replay {id}"),
            Error::GuardedReplayConflict { id, reason } => {
                write!(f, "guarded replay {id}: {reason}")
            }
            Error::Codec(s) => write!(f, "payload codec error: {s}"),
            Error::Closed => f.write_str("the store is closed"),
            Error::Backend {
                backend,
                op,
                source,
            } => write!(f, "{backend}: {op} failed: {source}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            Error::Backend { source, .. } => Some(source.as_ref()),
            _ => None,
        }
    }
}
