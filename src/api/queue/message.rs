//! What a producer sends and a consumer gets: [`EnqueueOptions`] and [`Message`], a
//! delivery whose payload is borrowed from the log's memory map.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde::de::DeserializeOwned;

use crate::api::types::MessageId;
use crate::error::{Error, Result};
use crate::storage::log::Record;

/// Options of one enqueue.
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
    /// Sets a time to live.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }
    /// Sets a delay.
    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay = Some(delay);
        self
    }
    /// Sets an idempotency key.
    pub fn idempotency_key(mut self, key: impl Into<String>) -> Self {
        self.idempotency_key = Some(key.into());
        self
    }
}

/// A delivered message. Its payload is borrowed from the log's memory map.
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
}
