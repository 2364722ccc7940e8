//! Public data types shared by the queue, DLQ and worker APIs: failures, attempts, the
//! dead-letter envelope and its parts.
//!
//! These are plain serde types (their serde form is for users: JSON exports and the like;
//! what the log stores is the engine's wire format). The parts of an envelope that the log
//! stores ([`FailureInfo`], [`Attempt`], [`DlqMetadata`]) are defined with the records, in
//! the engine. The envelope types are `#[non_exhaustive]` and built with `new` and chained
//! setters, so that they can grow. Times are milliseconds since the Unix epoch.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use crate::engine::envelope::{Attempt, DlqMetadata, FailureInfo, MessageId};
use crate::engine::fingerprint::{fnv1a, Fingerprint, FNV128};

/// Whether a failure is worth retrying.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum FailureClass {
    /// May succeed later (a timeout, a busy dependency): retried with backoff.
    Transient,
    /// Will never succeed as is (invalid data): dead-lettered at once.
    Permanent,
}

/// Why a handler failed on a message.
///
/// A [`permanent`](Failure::permanent) failure (bad data, which no retry can fix) sends the
/// message to its DLQ at once; a [`transient`](Failure::transient) one (a timeout, a busy
/// dependency) is retried with backoff until the last attempt. Any error converts to a
/// transient failure whose kind is the error's type name, so `?` works in a handler. The
/// kind, message, details and context end up in the DLQ entry's [`FailureInfo`].
///
/// Kept small (the optional parts are boxed) so that `Result<(), Failure>` stays cheap to
/// return from every handler call.
///
/// ```
/// use std::time::Duration;
/// use deadletter::{Config, Failure, Filter, Message, Page, Store, WorkerPool};
/// use deadletter::pool::Retry;
///
/// #[derive(Debug)]
/// struct BankTimeout;
/// impl std::fmt::Display for BankTimeout {
///     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
///         f.write_str("the bank did not answer")
///     }
/// }
/// impl std::error::Error for BankTimeout {}
///
/// fn charge(cents: u32) -> Result<(), BankTimeout> {
///     if cents > 10_000 { Err(BankTimeout) } else { Ok(()) }
/// }
///
/// fn handle(msg: &Message) -> Result<(), Failure> {
///     let text = msg.text().unwrap_or_default();
///     let cents: u32 = text.parse().map_err(|e| {
///         Failure::permanent("InvalidAmount", format!("{text:?} is not an amount"))
///             .with_details(format!("{e}"))
///             .with_context("field", "cents")
///     })?;
///     charge(cents)?; // BankTimeout: a transient failure of kind "BankTimeout"
///     Ok(())
/// }
///
/// # let dir = tempfile::tempdir().unwrap();
/// let store = Store::open(&dir, Config::fast())?;
/// let payments = store.queue("payments")?;
/// payments.enqueue_batch(&["2000", "twenty", "50000"])?;
/// let pool = WorkerPool::new(&payments)
///     .retry(Retry::fixed(Duration::from_millis(1)).max_attempts(3))
///     .start(handle)?;
/// pool.run_until_idle()?;
/// drop(pool);
///
/// let dlq = payments.dlq();
/// let invalid = &dlq.list(&Filter::error_kind("InvalidAmount"), Page::first(10))?[0];
/// assert_eq!(invalid.failure.attempts.len(), 1); // permanent: no retry
/// assert_eq!(invalid.failure.context["field"], "cents");
/// let timeout = &dlq.list(&Filter::error_kind("BankTimeout"), Page::first(10))?[0];
/// assert_eq!(timeout.failure.attempts.len(), 3); // transient: every attempt, then the DLQ
/// assert_eq!(timeout.failure.error_message, "the bank did not answer");
/// # Ok::<(), deadletter::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    /// Transient or permanent.
    pub class: FailureClass,
    /// A short machine-friendly error kind, such as `"ValidationError"`.
    pub kind: String,
    /// A human-readable message.
    pub message: String,
    /// Details, stack trace and context, when given.
    extra: Option<Box<FailureExtra>>,
    /// The full type name of the error this failure was converted from (with `?`), or
    /// `None` when the handler built it and chose its class itself. A worker pool's
    /// [`Classifier`](crate::pool::Classifier) reclassifies converted failures only.
    #[serde(skip)]
    source_type: Option<&'static str>,
}

/// The optional parts of a [`Failure`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
struct FailureExtra {
    details: Option<String>,
    stack_trace: Option<String>,
    context: BTreeMap<String, String>,
}

static NO_CONTEXT: BTreeMap<String, String> = BTreeMap::new();

impl Failure {
    fn new(class: FailureClass, kind: impl Into<String>, message: impl Into<String>) -> Self {
        Failure {
            class,
            kind: kind.into(),
            message: message.into(),
            extra: None,
            source_type: None,
        }
    }

    /// A failure worth retrying.
    pub fn transient(kind: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(FailureClass::Transient, kind, message)
    }

    /// A failure that retrying cannot fix: the message goes to the DLQ at once.
    pub fn permanent(kind: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(FailureClass::Permanent, kind, message)
    }

    fn extra_mut(&mut self) -> &mut FailureExtra {
        self.extra.get_or_insert_with(Box::default)
    }

    /// Adds details.
    pub fn with_details(mut self, details: impl Into<String>) -> Self {
        self.extra_mut().details = Some(details.into());
        self
    }

    /// Adds a stack trace.
    pub fn with_stack_trace(mut self, trace: impl Into<String>) -> Self {
        self.extra_mut().stack_trace = Some(trace.into());
        self
    }

    /// Adds one context entry.
    pub fn with_context(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.extra_mut().context.insert(key.into(), value.into());
        self
    }

    /// The details, if given.
    pub fn details(&self) -> Option<&str> {
        self.extra.as_ref()?.details.as_deref()
    }

    /// The stack trace, if given.
    pub fn stack_trace(&self) -> Option<&str> {
        self.extra.as_ref()?.stack_trace.as_deref()
    }

    /// The processing context.
    pub fn context(&self) -> &BTreeMap<String, String> {
        self.extra.as_ref().map_or(&NO_CONTEXT, |e| &e.context)
    }

    /// True for [`FailureClass::Permanent`].
    pub fn is_permanent(&self) -> bool {
        self.class == FailureClass::Permanent
    }

    /// The full type name of the error this failure was converted from with `?`
    /// (`std::any::type_name`), or `None` when it was built with
    /// [`transient`](Failure::transient) or [`permanent`](Failure::permanent).
    pub fn source_type(&self) -> Option<&'static str> {
        self.source_type
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.kind, self.message)
    }
}

/// Any error converts to a failure whose kind is the error's type name. It is transient,
/// with one exception: an [`Error::Codec`](crate::Error::Codec) (a payload that does not
/// decode, as from [`Message::decode`](crate::Message::decode)) is permanent, of kind
/// `DecodeError`, because no retry changes the bytes. A worker pool's
/// [`Classifier`](crate::pool::Classifier) can map other error types to permanent.
impl<E: std::error::Error + 'static> From<E> for Failure {
    fn from(e: E) -> Self {
        let full = std::any::type_name::<E>();
        let any: &dyn std::any::Any = &e;
        let mut failure = match any.downcast_ref::<crate::Error>() {
            Some(crate::Error::Codec(reason)) => Failure::permanent(DECODE_ERROR_KIND, reason),
            _ => Failure::transient(short_type_name(full), e.to_string()),
        };
        failure.source_type = Some(full);
        failure
    }
}

/// The kind of the permanent failure a payload that does not decode becomes.
pub const DECODE_ERROR_KIND: &str = "DecodeError";

/// The last path segment of a type name, generics included: `my::Error<T>` -> `Error<T>`.
pub(crate) fn short_type_name(full: &'static str) -> &'static str {
    let head = full.split('<').next().unwrap_or(full);
    let start = head.rfind("::").map_or(0, |i| i + 2);
    &full[start..]
}

/// The metadata a message had when it was enqueued (and delivered).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct OriginalMetadata {
    /// The message id.
    pub id: MessageId,
    /// The queue it was enqueued to (or last replayed to).
    pub queue: String,
    /// When it was enqueued.
    pub enqueued_at_ms: u64,
    /// When it was first delivered, if it was.
    pub first_received_at_ms: Option<u64>,
    /// Deliveries counted.
    pub delivery_count: u32,
    /// The caller's attributes.
    pub attributes: BTreeMap<String, String>,
}

/// Whether an entry has been dealt with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum EntryStatus {
    /// Waiting for a person or a replay.
    Pending,
    /// Reprocessed outside the queue, with its outcome.
    Reprocessed {
        /// True when reprocessing succeeded.
        success: bool,
        /// When it was marked.
        at_ms: u64,
    },
}

/// A dead-letter entry: the original payload byte for byte and everything known about its
/// failure.
///
/// Entries come from a DLQ ([`crate::Dlq::get`], [`crate::Dlq::list`]) or are built to be
/// imported into one ([`crate::Dlq::import`]):
///
/// ```
/// use deadletter::dlq::{Attempt, DeadLetter, DlqMetadata, FailureInfo, OriginalMetadata};
///
/// let failed_at = 1_700_000_060_000;
/// let failure = FailureInfo::new("Timeout", "upstream timed out", failed_at)
///     .attempts(vec![Attempt::new(1, failed_at, "Timeout", "upstream timed out")
///         .duration_ms(1_500)
///         .worker("worker-1")]);
/// let entry = DeadLetter::new(
///     br#"{"orderId":"ORD-1"}"#.to_vec(),
///     OriginalMetadata::new(7, "orders", 1_700_000_000_000).delivery_count(1),
///     failure,
///     DlqMetadata::new(failed_at).environment("staging"),
/// );
/// assert_eq!(entry.id(), 7);
/// assert_eq!(entry.failure.attempts[0].duration_ms, 1_500);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct DeadLetter {
    /// The original payload.
    pub payload: Vec<u8>,
    /// The payload before a corrected replay replaced it, if one did.
    pub replaced_payload: Option<Vec<u8>>,
    /// Metadata of the original message.
    pub metadata: OriginalMetadata,
    /// The failure and its history.
    pub failure: FailureInfo,
    /// DLQ metadata.
    pub dlq: DlqMetadata,
    /// How many times the message was replayed from a DLQ before this failure.
    pub generation: u32,
    /// Pending or reprocessed.
    pub status: EntryStatus,
    /// The DLQ's name.
    pub dlq_name: String,
    /// For an entry imported from an export: its id in the store it was first
    /// dead-lettered in (kept through any number of exports and imports). `None` for an
    /// entry dead-lettered in this store.
    #[serde(default)]
    pub original_id: Option<MessageId>,
    /// Its failure fingerprint, when the DLQ it was read from keeps them (the embedded
    /// store does); `None` in an entry built to be imported. Derived from the failure, so
    /// an import ignores it and its JSON form may leave it out. Always encoded otherwise:
    /// the control socket's bincode form has no optional fields.
    #[serde(default)]
    pub fingerprint: Option<Fingerprint>,
}

impl OriginalMetadata {
    /// The metadata of message `id` enqueued to `queue` at `enqueued_at_ms`, never
    /// delivered, without attributes (set them with the setters of the same names).
    pub fn new(id: MessageId, queue: impl Into<String>, enqueued_at_ms: u64) -> Self {
        OriginalMetadata {
            id,
            queue: queue.into(),
            enqueued_at_ms,
            first_received_at_ms: None,
            delivery_count: 0,
            attributes: BTreeMap::new(),
        }
    }

    setters! {
        /// Sets when it was first delivered.
        first_received_at_ms(at_ms: u64) => first_received_at_ms = Some(at_ms);
        /// Sets the deliveries counted.
        delivery_count(count: u32) => delivery_count = count;
        /// Sets the caller's attributes.
        attributes(attributes: BTreeMap<String, String>) => attributes = attributes;
    }
}

impl DeadLetter {
    /// An entry with this payload, metadata, failure and DLQ metadata: pending, never
    /// replayed, no replaced payload, no DLQ name (set them with the setters of the same
    /// names). [`crate::Dlq::import`] gives it the DLQ it is imported into.
    pub fn new(
        payload: Vec<u8>,
        metadata: OriginalMetadata,
        failure: FailureInfo,
        dlq: DlqMetadata,
    ) -> Self {
        DeadLetter {
            payload,
            replaced_payload: None,
            metadata,
            failure,
            dlq,
            generation: 0,
            status: EntryStatus::Pending,
            dlq_name: String::new(),
            original_id: None,
            fingerprint: None,
        }
    }

    setters! {
        /// Sets the id it had in the store it was first dead-lettered in.
        original_id(id: MessageId) => original_id = Some(id);
        /// Sets the payload a corrected replay replaced.
        replaced_payload(payload: Vec<u8>) => replaced_payload = Some(payload);
        /// Sets how many times it was replayed before this failure.
        generation(generation: u32) => generation = generation;
        /// Sets its status.
        status(status: EntryStatus) => status = status;
        /// Sets the DLQ's name.
        dlq_name(name: impl Into<String>) => dlq_name = name.into();
    }

    /// The message id.
    pub fn id(&self) -> MessageId {
        self.metadata.id
    }

    /// The entry's identity: the same for an entry and for every copy of it exported and
    /// imported into other stores, and different for different failures. It is a 128-bit
    /// FNV-1a hash of the id the entry had where it was first dead-lettered
    /// ([`DeadLetter::original_id`], or its id), its enqueue and dead-letter times, and its
    /// payload: fields every store keeps for an entry, so a store needs nothing more on
    /// disk to know which identities it holds. An import skips entries whose identity the
    /// store already holds (see [`crate::dlq::Importer`]).
    pub fn identity(&self) -> u128 {
        let id = self.original_id.unwrap_or(self.metadata.id).to_le_bytes();
        let enqueued = self.metadata.enqueued_at_ms.to_le_bytes();
        let dead = self.dlq.dead_lettered_at_ms.to_le_bytes();
        let len = (self.payload.len() as u64).to_le_bytes();
        fnv1a(FNV128, &[&id, &enqueued, &dead, &len, &self.payload])
    }
}
