//! What the forwarder publishes: a local queue message or DLQ entry as a JetStream message
//! on the edge stream, with its deduplication id.
//!
//! A queue message keeps its payload as the message's data, and its id, replay generation,
//! enqueue time, attributes, queue and origin in headers. A DLQ entry is the whole envelope
//! (JSON, as in the namespace's own DLQ: `wire::encode_entry`) with the origin, queue and
//! id in headers.
//!
//! The deduplication id (`Nats-Msg-Id`) names one life of one message of one store:
//! origin, queue, id and replay generation (a replayed message keeps its id and must be
//! forwarded again), with `dlq` for an entry. The server keeps it for its duplicate window,
//! so a message published again after a lost acknowledgement or a restart is not stored
//! twice.

use async_nats::jetstream::message::PublishMessage;
use async_nats::HeaderMap;
use bytes::Bytes;
use deadletter::dlq::DeadLetter;
use deadletter::{Message, Result};

use crate::moves::message_headers;
use crate::names::Names;
use crate::wire::{self, headers};

use super::link::Publication;

/// The publish of queue message `m`, forwarded from `origin`.
pub(crate) fn of_message(names: &Names, origin: &str, m: &Message) -> Result<Publication> {
    let mut h = message_headers(m.attributes(), None)?.unwrap_or_default();
    h.insert(headers::ORIGIN, origin);
    h.insert(headers::QUEUE, m.queue());
    h.insert(headers::ID, m.id().to_string().as_str());
    h.insert(headers::GENERATION, m.generation().to_string().as_str());
    h.insert(
        headers::ENQUEUED_AT,
        m.enqueued_at_ms().to_string().as_str(),
    );
    Ok(publication(
        names.edge_queue(origin, m.queue()),
        message_dedup_id(origin, m.queue(), m.id(), m.generation()),
        h,
        Bytes::copy_from_slice(m.payload()),
    ))
}

/// The publish of DLQ entry `e` (of the DLQ of `queue`), forwarded from `origin`.
pub(crate) fn of_entry(
    names: &Names,
    origin: &str,
    queue: &str,
    e: &DeadLetter,
) -> Result<Publication> {
    let (mut h, data) = wire::encode_entry(e)?;
    h.insert(headers::ORIGIN, origin);
    h.insert(headers::QUEUE, queue);
    h.insert(headers::ID, e.metadata.id.to_string().as_str());
    Ok(publication(
        names.edge_dlq(origin, queue),
        format!("{origin}:{queue}:dlq:{}:{}", e.metadata.id, e.generation),
        h,
        data.into(),
    ))
}

/// The deduplication id of one life of a queue message.
pub(crate) fn message_dedup_id(origin: &str, queue: &str, id: u64, generation: u32) -> String {
    format!("{origin}:{queue}:{id}:{generation}")
}

fn publication(subject: String, dedup_id: String, h: HeaderMap, data: Bytes) -> Publication {
    Publication {
        subject,
        message: PublishMessage::build()
            .payload(data)
            .headers(h)
            .message_id(dedup_id),
    }
}
