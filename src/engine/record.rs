//! The queue-level records, as the engine sees them: what each record says.
//!
//! Every state change of a message is exactly one record, so a move between a queue and
//! its DLQ is atomic: the log holds the record or it does not. These types are the
//! engine's model and carry no encoding: how each one is written on disk, in each format
//! version, is the business of [`crate::engine::wire`] alone, so they (and the public
//! envelope types they hold) can change without changing what a store means.

use std::collections::BTreeMap;

use crate::engine::envelope::{Attempt, DlqMetadata, FailureInfo, MessageId};
use crate::engine::state::AuditEntry;

pub use crate::engine::envelope::QueueId;

/// Room a record needs beyond its payload (the record's metadata, or a dead-letter
/// envelope): a store accepts log records of up to its largest message size plus this.
pub(crate) const RECORD_OVERHEAD: usize = 64 << 10;

/// Metadata stored with a payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PutMeta {
    /// Message id.
    pub id: MessageId,
    /// Queue it is put in.
    pub queue: QueueId,
    /// When the message was first enqueued.
    pub enqueued_at: u64,
    /// Not delivered before this time.
    pub visible_at: u64,
    /// Expires (TTL) at this time, if set.
    pub expires_at: Option<u64>,
    /// Caller's attributes.
    pub attributes: BTreeMap<String, String>,
    /// Caller's idempotency key.
    pub idempotency_key: Option<String>,
    /// Why this payload record was written.
    pub cause: PutCause,
}

/// Why a [`Put`] record was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PutCause {
    /// A new message.
    Enqueue,
    /// A DLQ entry replayed with a corrected payload; the old payload is kept here.
    CorrectedReplay {
        /// The payload that failed.
        previous_payload: Vec<u8>,
        /// Attempts after the replay.
        attempts: u32,
        /// Replay generation after the replay.
        generation: u32,
        /// The DLQ it came from.
        from_dlq: QueueId,
    },
    /// A DLQ entry imported from an export: the message arrives in the DLQ directly, in
    /// one record.
    Imported(Box<ImportedEntry>),
}

/// The dead-letter part of an imported DLQ entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportedEntry {
    /// Failure and history.
    pub failure: FailureInfo,
    /// DLQ metadata.
    pub dlq: DlqMetadata,
    /// First delivery time.
    pub first_received_at: Option<u64>,
    /// Deliveries counted.
    pub attempts: u32,
    /// Replay generation.
    pub generation: u32,
    /// The payload a corrected replay replaced, if any.
    pub replaced_payload: Option<Vec<u8>>,
    /// The id it had in the store it was exported from.
    pub original_id: MessageId,
}

/// A payload-carrying record: metadata plus the payload bytes after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Put<'a> {
    /// Metadata.
    pub meta: PutMeta,
    /// Payload bytes (borrowed from the log when decoded).
    pub payload: &'a [u8],
}

/// Failure history carried by retry records (cumulative: the latest one holds it all).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct History {
    /// When the message was first delivered.
    pub first_received_at: Option<u64>,
    /// The newest attempts, oldest first.
    pub attempts: Vec<Attempt>,
    /// Attempts dropped from the front to respect the bound.
    pub dropped: u32,
}

impl History {
    /// Adds `attempt`, keeping the newest `max` attempts and counting the dropped ones.
    pub(crate) fn push(&mut self, attempt: Attempt, max: usize) {
        self.attempts.push(attempt);
        while self.attempts.len() > max {
            self.attempts.remove(0);
            self.dropped += 1;
        }
    }
}

/// Every record other than [`Put`].
// A dead-letter record carries its whole envelope. Records are built to be encoded, or
// decoded to be applied, one at a time: boxing the large variants would only add an
// allocation to each.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Names a queue id.
    DeclareQueue {
        /// Its id.
        queue: QueueId,
        /// Its name.
        name: String,
    },
    /// Messages delivered: each delivery is counted here before the handler runs.
    Lease {
        /// When.
        at: u64,
        /// Lease deadline.
        deadline: u64,
        /// The messages.
        ids: Vec<MessageId>,
    },
    /// Messages reserved for a worker pool: delivered and counted like
    /// [`Op::Lease`], but each one's handler has not started yet. A reservation that ends
    /// before its [`Op::Start`] (a restart, an expiry, a release) was no delivery: its
    /// count is taken back and it is not a suspect.
    Reserve {
        /// When.
        at: u64,
        /// Lease deadline.
        deadline: u64,
        /// The messages.
        ids: Vec<MessageId>,
    },
    /// The handlers of reserved messages start: from here the delivery
    /// stands, as one made by [`Op::Lease`].
    Start {
        /// When.
        at: u64,
        /// The messages.
        ids: Vec<MessageId>,
    },
    /// Leases extended (heartbeat).
    Extend {
        /// New deadline.
        deadline: u64,
        /// The messages.
        ids: Vec<MessageId>,
    },
    /// Messages processed successfully and removed.
    Ack {
        /// When.
        at: u64,
        /// The messages.
        ids: Vec<MessageId>,
    },
    /// A failed delivery; the message becomes visible again at `visible_at`.
    Retry {
        /// The message.
        id: MessageId,
        /// Next visible time.
        visible_at: u64,
        /// The whole (bounded) history including this attempt.
        history: History,
    },
    /// A message leaves a lease without an outcome (nack without error), visible at a time;
    /// or (format version 2) a waiting message is made visible at another time by an
    /// operator (retry now, delay).
    Release {
        /// The message.
        id: MessageId,
        /// Next visible time.
        visible_at: u64,
    },
    /// The move to the DLQ, with the whole envelope (the payload stays where it is).
    DeadLetter {
        /// The message.
        id: MessageId,
        /// Failure and history.
        failure: FailureInfo,
        /// DLQ metadata.
        dlq: DlqMetadata,
        /// First delivery time.
        first_received_at: Option<u64>,
        /// When the message was first enqueued (for its lineage and tombstone).
        enqueued_at: u64,
    },
    /// A DLQ entry moved back to a queue (payload unchanged).
    Replay {
        /// The message.
        id: MessageId,
        /// Target queue.
        queue: QueueId,
        /// When.
        at: u64,
        /// Visible from.
        visible_at: u64,
        /// Attempts after the replay (0 when reset).
        attempts: u32,
        /// Generation after the replay.
        generation: u32,
    },
    /// DLQ entries (or queued messages) deleted.
    Delete {
        /// When.
        at: u64,
        /// The messages.
        ids: Vec<MessageId>,
        /// Why: removed by TTL or retention (true) or by a person or program (false).
        expired: bool,
    },
    /// A DLQ entry's outcome handled outside the queue.
    MarkReprocessed {
        /// The entry.
        id: MessageId,
        /// Outcome.
        success: bool,
        /// When.
        at: u64,
    },
    /// Who made the change the records just before it describe: an operator's replay,
    /// delete, purge, import or mark, for the audit trail.
    Audit(AuditEntry),
    /// A guarded replay's step.
    Guard {
        /// Which guarded replay.
        guard: GuardId,
        /// When.
        at: u64,
        /// What happens.
        event: GuardEvent,
    },
}

/// A guarded replay's number inside one store, given out in order.
pub type GuardId = u64;

/// What a guarded replay is asked to do: which DLQ entries, where to,
/// and the rules of its waves. Written once, in its [`GuardEvent::Start`] record.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GuardPlan {
    /// The DLQ (by the id of the queue whose DLQ it is).
    pub dlq: QueueId,
    /// Target queue; `None`: each entry's own queue.
    pub target: Option<QueueId>,
    /// Attempts start from zero again.
    pub reset_attempts: bool,
    /// Entries already marked reprocessed are replayed too.
    pub force: bool,
    /// Size of the first wave (the canary), at least 1.
    pub canary: u32,
    /// Each wave is this many thousandths of the one before (rounded up), at least 1000.
    pub growth_permille: u32,
    /// A wave whose failed-again share exceeds this many thousandths stops the replay.
    pub max_failure_permille: u32,
    /// At most this many releases per second (`None`: no limit).
    pub rate_per_sec: Option<u32>,
    /// What the operator selected, in words (a filter), for reports.
    pub selection: String,
    /// Who started it: its releases are recorded in the audit trail as this actor's
    /// replays.
    pub actor: String,
    /// The entries selected, in the order they are released.
    pub ids: Vec<MessageId>,
}

/// One entry a guarded replay releases: moved back to a queue exactly as by [`Op::Replay`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GuardRelease {
    /// The entry.
    pub id: MessageId,
    /// Target queue.
    pub queue: QueueId,
    /// Attempts after the replay.
    pub attempts: u32,
    /// Generation after the replay.
    pub generation: u32,
}

/// A step of a guarded replay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GuardEvent {
    /// The replay is created, running, with its plan.
    Start(Box<GuardPlan>),
    /// The next `consumed` selected entries are dealt with: those in `released` move back
    /// to their queue (visible at the record's time), the others were gone or not
    /// replayable any more and are skipped.
    Release {
        /// Selected entries this release passed over, released or skipped.
        consumed: u32,
        /// The entries released.
        released: Vec<GuardRelease>,
    },
    /// The operator pauses it: nothing more is released until it resumes.
    Pause,
    /// The operator resumes a paused replay.
    Resume,
    /// The operator cancels it: nothing more is released, ever.
    Cancel,
}

/// A decoded record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decoded<'a> {
    /// A payload record.
    Put(Put<'a>),
    /// Any other record.
    Op(Op),
    /// A relocated copy of a record (written by compaction): the message's pointer to that
    /// record moves here, and nothing else changes.
    Relocated(Box<Decoded<'a>>),
}
