//! What a producer sends and a consumer gets: [`EnqueueOptions`] and [`Message`], a
//! delivery whose payload is borrowed from the log's memory map.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde::de::DeserializeOwned;

use crate::api::core::types::MessageId;
use crate::api::trace::{TraceParent, TRACEPARENT_ATTRIBUTE};
use crate::error::{Error, Result};
use crate::storage::log::Record;

/// Options of one enqueue ([`Queue::enqueue_with`](crate::Queue::enqueue_with)):
/// attributes, a time to live, a delay, an idempotency key.
///
/// ```
/// use std::time::Duration;
/// use deadletter::{Config, Store};
/// use deadletter::clock::ManualClock;
/// use deadletter::queue::EnqueueOptions;
///
/// # let dir = tempfile::tempdir().unwrap();
/// let clock = ManualClock::new(1_700_000_000_000);
/// let store = Store::open(&dir, Config::fast().clock(clock.clone()))?;
/// let payments = store.queue("payments")?;
///
/// // Attributes travel with the message and into its DLQ envelope; the key makes a repeat
/// // within the store's idempotency window (an hour by default) a no-op.
/// let charge = EnqueueOptions::new()
///     .attribute("tenant", "acme")
///     .idempotency_key("charge-42");
/// let id = payments.enqueue_with(b"charge 42", &charge)?;
/// assert_eq!(payments.enqueue_with(b"charge 42", &charge)?, id);
///
/// // Not visible for a minute, and expired (to the DLQ, by default) after a day.
/// let later = EnqueueOptions::new()
///     .delay(Duration::from_secs(60))
///     .ttl(Duration::from_secs(24 * 3600));
/// payments.enqueue_with(b"reminder", &later)?;
///
/// let now = payments.lease(10)?;
/// assert_eq!(now.len(), 1);
/// assert_eq!(now[0].attributes()["tenant"], "acme");
/// payments.ack_all(&now)?;
/// clock.advance(60_000);
/// assert_eq!(payments.lease(10)?[0].payload(), b"reminder");
/// # Ok::<(), deadletter::Error>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct EnqueueOptions {
    /// Caller's attributes, kept with the message and in its DLQ envelope.
    pub attributes: BTreeMap<String, String>,
    /// Time to live.
    pub ttl: Option<Duration>,
    /// Not visible before this delay has passed.
    pub delay: Option<Duration>,
    /// A repeated enqueue with the same key within the store's idempotency window returns
    /// the first message's id and enqueues nothing.
    pub idempotency_key: Option<String>,
}

impl EnqueueOptions {
    /// No options.
    pub fn new() -> Self {
        Self::default()
    }
    /// Adds an attribute.
    pub fn attribute(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.attributes.insert(key.into(), value.into());
        self
    }
    /// Carries `trace` in the attribute [`TRACEPARENT_ATTRIBUTE`]: the message's spans
    /// and events (feature `tracing`) then belong to that trace, through its retries, the
    /// DLQ and replays (see [`crate::trace`]).
    pub fn traceparent(self, trace: &TraceParent) -> Self {
        self.attribute(TRACEPARENT_ATTRIBUTE, trace.to_string())
    }
    setters! {
        /// Sets a time to live.
        ttl(ttl: Duration) => ttl = Some(ttl);
        /// Sets a delay.
        delay(delay: Duration) => delay = Some(delay);
        /// Sets an idempotency key.
        idempotency_key(key: impl Into<String>) => idempotency_key = Some(key.into());
    }
}

/// A delivered message. Its payload is borrowed from the log's memory map (no copy); the
/// message is reported on with [`Queue::ack`](crate::Queue::ack),
/// [`Queue::retry`](crate::Queue::retry) or [`Queue::dead_letter`](crate::Queue::dead_letter),
/// or by returning from a [`WorkerPool`](crate::WorkerPool) handler.
///
/// ```
/// use serde::{Deserialize, Serialize};
/// use deadletter::{Config, Store};
/// use deadletter::clock::ManualClock;
///
/// #[derive(Serialize, Deserialize, Debug, PartialEq)]
/// struct Order {
///     id: String,
///     quantity: u32,
/// }
///
/// # let dir = tempfile::tempdir().unwrap();
/// let clock = ManualClock::new(1_700_000_000_000);
/// let store = Store::open(&dir, Config::fast().clock(clock.clone()))?;
/// let orders = store.queue("orders")?;
/// orders.enqueue_typed(&Order { id: "ORD-1".into(), quantity: 2 })?;
/// orders.enqueue("plain text")?;
///
/// clock.advance(5_000);
/// let batch = orders.lease(2)?;
/// let typed = &batch[0];
/// assert_eq!(typed.queue(), "orders");
/// assert_eq!(typed.attempt(), 1); // the first delivery
/// assert_eq!(typed.leased_at_ms() - typed.enqueued_at_ms(), 5_000);
/// assert_eq!(typed.decode::<Order>()?, Order { id: "ORD-1".into(), quantity: 2 });
/// assert_eq!(batch[1].text(), Some("plain text"));
/// assert!(batch[1].decode::<Order>().is_err()); // Error::Codec: not an encoded Order
/// orders.ack_all(&batch)?;
/// # Ok::<(), deadletter::Error>(())
/// ```
#[derive(Clone)]
pub struct Message {
    pub(super) id: MessageId,
    pub(super) queue: Arc<str>,
    pub(super) attempt: u32,
    /// The message's replay generation at this delivery: with `attempt`, it names the
    /// delivery (a replay that resets the attempt count hands attempt numbers out again).
    pub(super) generation: u32,
    pub(super) record: Record,
    pub(super) payload: std::ops::Range<usize>,
    pub(super) enqueued_at_ms: u64,
    pub(super) leased_at_ms: u64,
    pub(super) attributes: BTreeMap<String, String>,
}

impl std::fmt::Debug for Message {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Message")
            .field("id", &self.id)
            .field("queue", &self.queue)
            .field("attempt", &self.attempt)
            .field("payload_len", &self.payload.len())
            .finish()
    }
}

impl Message {
    /// The id.
    pub fn id(&self) -> MessageId {
        self.id
    }
    /// The queue's name.
    pub fn queue(&self) -> &str {
        &self.queue
    }
    /// This delivery's number: 1 for the first.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }
    /// The message's replay generation: 0 until it is first replayed from the DLQ, then
    /// one more at each replay. With the id, it names this life of the message.
    pub fn generation(&self) -> u32 {
        self.generation
    }
    /// The payload bytes.
    pub fn payload(&self) -> &[u8] {
        &self.record[self.payload.clone()]
    }
    /// The payload as UTF-8 text, if it is.
    pub fn text(&self) -> Option<&str> {
        std::str::from_utf8(self.payload()).ok()
    }
    /// Decodes a payload enqueued with [`Queue::enqueue_typed`](crate::Queue::enqueue_typed).
    pub fn decode<T: DeserializeOwned>(&self) -> Result<T> {
        bincode::serde::decode_from_slice(self.payload(), bincode::config::standard())
            .map(|(v, _)| v)
            .map_err(|e| Error::Codec(e.to_string()))
    }
    /// When it was enqueued (ms since the epoch).
    pub fn enqueued_at_ms(&self) -> u64 {
        self.enqueued_at_ms
    }
    /// When this delivery began.
    pub fn leased_at_ms(&self) -> u64 {
        self.leased_at_ms
    }
    /// The caller's attributes.
    pub fn attributes(&self) -> &BTreeMap<String, String> {
        &self.attributes
    }
    /// The trace context it carries (its `traceparent` attribute), if a valid one.
    pub fn traceparent(&self) -> Option<TraceParent> {
        TraceParent::from_attributes(self.attributes())
    }
}
