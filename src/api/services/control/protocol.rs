//! The control socket's messages and their framing (`docs/CONTROL.md`).
//!
//! A frame is a 4-byte little-endian length `n`, then `n` bytes: a 2-byte little-endian
//! protocol version and the bincode 2 (standard configuration) encoding of a [`Request`] or
//! a [`Reply`]. One request, one reply, in turn, any number per connection. A server that
//! does not speak the request's version replies, in its own version, with
//! [`RemoteError::Unsupported`]. Adding a request or a reply means a new protocol version;
//! one that only appends variants keeps the older versions' encoding, so both sides also
//! speak those back to [`OLDEST_COMPATIBLE`].

use std::collections::BTreeMap;
use std::io::{self, Read, Write};

use serde::{Deserialize, Serialize};

use crate::api::activity::Workers;
use crate::api::core::types::{DeadLetter, MessageId};
use crate::api::dlq::{Correction, Filter, ImportReport, ReplayOptions, ReplayReport};
use crate::api::guarded::{GuardedReplay, GuardedReplayOptions};
use crate::api::queue::{ActionReport, MessageAction, MessageCounts, QueuedMessage, QueuedState};
use crate::error::{Error, NameProblem};

/// The control protocol version this build speaks (8: corrected payloads in batches, after
/// 7's requests on a queue's own messages and 6's worker pools and rates; see
/// docs/CONTROL.md).
pub const PROTOCOL_VERSION: u16 = 8;

/// The oldest version this build also speaks: every message of it is a message of
/// [`PROTOCOL_VERSION`] with the same encoding (later versions only appended requests and
/// replies), so a server answers its frames in their own version and a client greeted by an
/// owner of that version speaks it, asking nothing the owner does not know.
pub const OLDEST_COMPATIBLE: u16 = 5;

/// The version that added [`Request::Workers`].
pub(crate) const WORKERS_SINCE: u16 = 6;

/// The version that added the requests on a queue's own messages ([`Request::Messages`],
/// [`Request::Message`], [`Request::MessageCounts`], [`Request::MessageAction`]).
pub(crate) const QUEUE_MESSAGES_SINCE: u16 = 7;

/// The version that added [`Request::ReplayCorrectedBatch`].
pub(crate) const CORRECTED_BATCH_SINCE: u16 = 8;

/// The largest frame either side accepts (a batch of imported entries is the largest).
pub(crate) const MAX_FRAME: usize = 256 << 20;

/// What a client asks. A replay carries its options as the API takes them, so the owner
/// applies exactly what the client was given.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum Request {
    /// Who are you? (Answered by [`Reply::Hello`].) Names who the connection's changes
    /// are made by (`None`: the owner's own actor).
    Hello { actor: Option<String> },
    /// Enqueue one message on a queue (created if missing).
    Enqueue(EnqueueRequest),
    /// Replay entries of a DLQ (`Dlq::replay_ids`); a target queue that does not exist is
    /// refused unless `create_target`.
    Replay {
        dlq: String,
        ids: Vec<MessageId>,
        options: ReplayOptions,
        create_target: bool,
    },
    /// Replay one entry with a corrected payload (`Dlq::replay_corrected`).
    ReplayCorrected {
        dlq: String,
        id: MessageId,
        payload: Vec<u8>,
        options: ReplayOptions,
    },
    /// Delete entries of a DLQ (those still there).
    Delete { dlq: String, ids: Vec<MessageId> },
    /// Purge a DLQ (`Dlq::purge`).
    Purge {
        dlq: String,
        older_than_ms: u64,
        include_pending: bool,
    },
    /// Mark entries of a DLQ reprocessed.
    Mark {
        dlq: String,
        ids: Vec<MessageId>,
        success: bool,
    },
    /// Import exported entries, each into `queue`'s DLQ or its own queue's.
    Import {
        queue: Option<String>,
        entries: Vec<DeadLetter>,
    },
    /// Start a guarded replay of entries of a DLQ (`Dlq::replay_guarded_ids`; version 4),
    /// its target as for [`Request::Replay`].
    GuardedReplay {
        dlq: String,
        ids: Vec<MessageId>,
        options: GuardedReplayOptions,
        create_target: bool,
    },
    /// Pause, resume or cancel a guarded replay (version 4).
    GuardedStep { id: u64, step: GuardedStep },
    /// The owner's attached worker pools and its queues' rates (`Store::workers`; version
    /// 6), answered by [`Reply::Workers`].
    Workers,
    /// List a queue's own messages (`Queue::messages`; version 7): the owner names the
    /// worker holding each in-flight one, which a snapshot cannot.
    Messages {
        queue: String,
        state: Option<QueuedState>,
        filter: Filter,
        after: Option<MessageId>,
        before: Option<MessageId>,
        limit: u64,
    },
    /// One message of a queue (`Queue::message`; version 7).
    Message { queue: String, id: MessageId },
    /// A queue's messages counted per state (`Queue::message_counts`; version 7).
    MessageCounts { queue: String },
    /// An operator's change to waiting messages of a queue (`Queue::apply_action`;
    /// version 7).
    MessageAction {
        queue: String,
        action: MessageAction,
        ids: Vec<MessageId>,
        strict: bool,
    },
    /// Replay entries of a DLQ, each with its corrected payload, in one batch
    /// (`Dlq::replay_corrected_batch`; version 8), the audit trail's detail beside the
    /// options (`ReplayOptions::detail` is not part of their serde form, so that the
    /// replays of versions 5 to 7 keep their encoding). Answered by [`Reply::Replayed`].
    ReplayCorrectedBatch {
        dlq: String,
        corrections: Vec<Correction>,
        options: ReplayOptions,
        detail: Option<String>,
    },
}

/// The fields of [`Request::Enqueue`], in their order on the wire (bincode encodes a
/// variant holding a struct exactly as a variant with those fields).
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct EnqueueRequest {
    pub(crate) queue: String,
    pub(crate) payload: Vec<u8>,
    pub(crate) attributes: BTreeMap<String, String>,
    pub(crate) delay_ms: Option<u64>,
    pub(crate) ttl_ms: Option<u64>,
    pub(crate) idempotency_key: Option<String>,
}

/// What the operator asks of a guarded replay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum GuardedStep {
    /// `Store::pause_guarded_replay`.
    Pause,
    /// `Store::resume_guarded_replay`.
    Resume,
    /// `Store::cancel_guarded_replay`.
    Cancel,
}

/// What the owner answers.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum Reply {
    Hello {
        protocol: u16,
        pid: u32,
    },
    Enqueued {
        id: MessageId,
    },
    Replayed(ReplayReport),
    Done,
    Deleted {
        deleted: Vec<MessageId>,
    },
    Purged {
        deleted: u64,
    },
    Marked {
        marked: Vec<MessageId>,
        failed: Vec<(MessageId, String)>,
    },
    Imported(ImportReport),
    Failed(RemoteError),
    /// A guarded replay's report (version 4; boxed, as it is the largest reply).
    Guarded(Box<GuardedReplay>),
    /// The answer to [`Request::Workers`] (version 6).
    Workers(Workers),
    /// A page of a queue's messages, or the one asked for (version 7).
    Messages(Vec<QueuedMessage>),
    /// What an operator's change did (version 7).
    Action(ActionReport),
    /// A queue's messages per state (version 7).
    Counts(MessageCounts),
}

/// An error the owner met, in a form that crosses the socket; the client turns it back
/// into the [`Error`] variant it came from.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum RemoteError {
    NotFound(MessageId),
    UnknownQueue(String),
    InvalidQueueName(String),
    AlreadyReprocessed(MessageId),
    TooLarge {
        size: u64,
        max: u64,
    },
    InvalidConfig(String),
    /// A `Hello` named an actor that is not one (version 3).
    InvalidActor(String),
    /// The server does not speak this protocol version.
    Unsupported {
        version: u16,
        supported: u16,
    },
    /// The request could not be decoded.
    BadRequest(String),
    /// Any other error: its kind (the variant's name) and message.
    Other {
        kind: String,
        message: String,
    },
    /// No guarded replay with this id (version 4).
    UnknownGuardedReplay(u64),
    /// A guarded replay cannot do what was asked (version 4).
    GuardedReplayConflict {
        id: u64,
        reason: String,
    },
}

impl From<&Error> for RemoteError {
    fn from(e: &Error) -> Self {
        match e {
            Error::NotFound(id) => RemoteError::NotFound(*id),
            Error::UnknownQueue(q) => RemoteError::UnknownQueue(q.clone()),
            // The problem is not sent: it is a function of the name (`NameProblem::of`).
            Error::InvalidQueueName { name, .. } => RemoteError::InvalidQueueName(name.clone()),
            Error::AlreadyReprocessed(id) => RemoteError::AlreadyReprocessed(*id),
            Error::TooLarge { size, max } => RemoteError::TooLarge {
                size: *size as u64,
                max: *max as u64,
            },
            Error::InvalidConfig(m) => RemoteError::InvalidConfig(m.clone()),
            Error::InvalidActor(a) => RemoteError::InvalidActor(a.clone()),
            Error::UnknownGuardedReplay(id) => RemoteError::UnknownGuardedReplay(*id),
            Error::GuardedReplayConflict { id, reason } => RemoteError::GuardedReplayConflict {
                id: *id,
                reason: reason.clone(),
            },
            other => RemoteError::Other {
                kind: error_kind(other),
                message: other.to_string(),
            },
        }
    }
}

impl From<RemoteError> for Error {
    fn from(e: RemoteError) -> Self {
        match e {
            RemoteError::NotFound(id) => Error::NotFound(id),
            RemoteError::UnknownQueue(q) => Error::UnknownQueue(q),
            RemoteError::InvalidQueueName(name) => Error::InvalidQueueName {
                problem: NameProblem::of(&name).unwrap_or(NameProblem::NotAllowed {
                    allowed: "the store's owner refuses it",
                }),
                name,
            },
            RemoteError::AlreadyReprocessed(id) => Error::AlreadyReprocessed(id),
            RemoteError::TooLarge { size, max } => Error::TooLarge {
                size: size as usize,
                max: max as usize,
            },
            RemoteError::InvalidConfig(m) => Error::InvalidConfig(m),
            RemoteError::InvalidActor(a) => Error::InvalidActor(a),
            RemoteError::Unsupported { version, supported } => Error::Remote {
                kind: "Unsupported".into(),
                message: format!(
                    "the owner speaks control protocol version {supported}, not {version}"
                ),
            },
            RemoteError::BadRequest(m) => Error::Remote {
                kind: "BadRequest".into(),
                message: m,
            },
            RemoteError::Other { kind, message } => Error::Remote { kind, message },
            RemoteError::UnknownGuardedReplay(id) => Error::UnknownGuardedReplay(id),
            RemoteError::GuardedReplayConflict { id, reason } => {
                Error::GuardedReplayConflict { id, reason }
            }
        }
    }
}

/// The name of an error's variant, for [`RemoteError::Other`]: where its derived `Debug`
/// form starts (`Io { .. }`, `Closed`).
fn error_kind(e: &Error) -> String {
    let debug = format!("{e:?}");
    let end = debug.find(|c: char| !c.is_alphanumeric());
    debug[..end.unwrap_or(debug.len())].to_string()
}

/// Writes one frame holding `message`, marked as of protocol `version` (this build's, or
/// an older compatible one the other side speaks).
pub(crate) fn write_frame<T: Serialize>(
    out: &mut impl Write,
    version: u16,
    message: &T,
) -> io::Result<()> {
    let body = bincode::serde::encode_to_vec(message, bincode::config::standard())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
    let len = body.len() + 2;
    if len > MAX_FRAME {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("a control message of {len} bytes is over the limit of {MAX_FRAME}"),
        ));
    }
    let mut frame = Vec::with_capacity(len + 4);
    frame.extend_from_slice(&(len as u32).to_le_bytes());
    frame.extend_from_slice(&version.to_le_bytes());
    frame.extend_from_slice(&body);
    out.write_all(&frame)?;
    out.flush()
}

/// A frame read: its protocol version and its body. `None` at a clean end of stream.
pub(crate) fn read_frame(input: &mut impl Read) -> io::Result<Option<(u16, Vec<u8>)>> {
    let mut head = [0u8; 4];
    match input.read_exact(&mut head) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let len = u32::from_le_bytes(head) as usize;
    if !(2..=MAX_FRAME).contains(&len) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("a control frame of {len} bytes"),
        ));
    }
    let mut frame = vec![0u8; len];
    input.read_exact(&mut frame)?;
    let version = u16::from_le_bytes([frame[0], frame[1]]);
    frame.drain(..2);
    Ok(Some((version, frame)))
}

/// Decodes a frame's body.
pub(crate) fn decode<T: for<'de> Deserialize<'de>>(body: &[u8]) -> Result<T, String> {
    bincode::serde::decode_from_slice(body, bincode::config::standard())
        .map(|(v, _)| v)
        .map_err(|e| e.to_string())
}
