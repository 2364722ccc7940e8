//! [`JetStreamMessage`]: one delivery of a queue message, with what its headers and the
//! server's delivery information say.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use deadletter::queue::MessageId;
use deadletter::Delivery;

/// A delivered message of a JetStream queue. Its payload is the client's buffer (no copy).
#[derive(Clone)]
pub struct JetStreamMessage {
    pub(crate) id: MessageId,
    pub(crate) queue: Arc<str>,
    pub(crate) attempt: u32,
    /// Deliveries of this copy (1 for the first), not counting those of a delayed
    /// message given back before its time.
    pub(crate) delivered: u32,
    /// Deliveries of a delayed message given back before its time.
    pub(crate) deferred: u32,
    pub(crate) generation: u32,
    pub(crate) payload: Bytes,
    pub(crate) enqueued_at_ms: u64,
    pub(crate) leased_at_ms: u64,
    pub(crate) attributes: BTreeMap<String, String>,
    /// The queue whose DLQ this message was replayed from, if it was.
    pub(crate) replayed_from: Option<Arc<str>>,
    /// The delivery's reply subject: where its acknowledgement goes.
    pub(crate) reply: Arc<str>,
    /// Its sequence in the queue's stream.
    pub(crate) sequence: u64,
    /// A first delivery of a message stored since the last server restart: it has no
    /// history and no DLQ entry (see `queue`'s `admit`).
    pub(crate) trusted: bool,
    /// The connection's count of (re)connections when it was fetched (`Conn::epoch`).
    pub(crate) epoch: u64,
}

impl std::fmt::Debug for JetStreamMessage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JetStreamMessage")
            .field("id", &self.id)
            .field("queue", &self.queue)
            .field("attempt", &self.attempt)
            .field("payload_len", &self.payload.len())
            .finish()
    }
}

impl JetStreamMessage {
    /// When this delivery began (ms since the epoch).
    pub fn leased_at_ms(&self) -> u64 {
        self.leased_at_ms
    }
    /// How many times the message was replayed from a DLQ.
    pub fn generation(&self) -> u32 {
        self.generation
    }
    /// Its sequence in the queue's stream.
    pub fn stream_sequence(&self) -> u64 {
        self.sequence
    }
}

impl Delivery for JetStreamMessage {
    fn id(&self) -> MessageId {
        self.id
    }
    fn queue(&self) -> &str {
        &self.queue
    }
    fn attempt(&self) -> u32 {
        self.attempt
    }
    fn payload(&self) -> &[u8] {
        &self.payload
    }
    fn enqueued_at_ms(&self) -> u64 {
        self.enqueued_at_ms
    }
    fn attributes(&self) -> &BTreeMap<String, String> {
        &self.attributes
    }
}
