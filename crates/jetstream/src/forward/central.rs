//! The central DLQ of a fleet: the DLQ entries that forwarders of many stores sent to a
//! namespace's edge stream, browsed and filtered by origin, and replayed back to the queue
//! they failed in on their own device, through the server.
//!
//! An entry is read where the forwarder put it (`{ns}.edge.{origin}.dlq.{queue}` in
//! `{ns}-edge`), so browsing changes nothing. A replay publishes the envelope to
//! `{ns}.edge-return.{origin}` in the stream `{ns}-edge-return` (work-queue retention,
//! deduplication id `return-{sequence}`), then deletes the entry from the edge stream.
//! The device's forwarder reads its own subject with a durable consumer, enqueues the
//! payload into the entry's queue with the idempotency key `edge-return-{sequence}`, and
//! only then acknowledges: a crash between the two enqueues nothing twice (within the
//! store's idempotency window).

use std::time::Duration;

use async_nats::jetstream::context::GetStreamErrorKind;
use async_nats::jetstream::message::PublishMessage;
use async_nats::jetstream::stream::{self, RetentionPolicy};
use async_nats::jetstream::ErrorCode;
use deadletter::dlq::DeadLetter;
use deadletter::{Error, Filter, Result};

use crate::client::backend;
use crate::names::Names;
use crate::namespace::JetStream;
use crate::scan::scan_stream;
use crate::wire::{self, headers};

/// One forwarded DLQ entry, with where it came from.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct FleetEntry {
    /// The store (device) that forwarded it.
    pub origin: String,
    /// The queue it failed in, on that store.
    pub queue: String,
    /// Its sequence in the edge stream: what [`FleetDlq::replay`] takes.
    pub sequence: u64,
    /// The whole envelope, as the device's DLQ held it.
    pub entry: DeadLetter,
}

/// The DLQ entries forwarded to a namespace by a fleet's stores (see
/// [`JetStream::fleet_dlq`]).
#[derive(Debug, Clone)]
pub struct FleetDlq {
    js: JetStream,
}

impl JetStream {
    /// The DLQ entries forwarders sent to this namespace, from every origin.
    pub fn fleet_dlq(&self) -> FleetDlq {
        FleetDlq { js: self.clone() }
    }
}

impl FleetDlq {
    /// Entries forwarded from `origin` (every origin with `None`) that match `filter`, in
    /// the order they arrived, at most `limit`. Changes nothing.
    pub fn list(
        &self,
        origin: Option<&str>,
        filter: &Filter,
        limit: usize,
    ) -> Result<Vec<FleetEntry>> {
        if let Some(o) = origin {
            crate::names::validate_origin(o)?;
        }
        let names = &self.js.inner.names;
        let timeout = self.js.inner.options.request_timeout;
        let mut out = Vec::new();
        self.js.inner.conn.run(async {
            let stream = match self.js.inner.conn.js.get_stream(names.edge_stream()).await {
                Ok(s) => s,
                // No forwarder has sent anything yet.
                Err(e)
                    if matches!(e.kind(), GetStreamErrorKind::JetStream(ref j)
                        if j.error_code() == ErrorCode::STREAM_NOT_FOUND) =>
                {
                    return Ok(())
                }
                Err(e) => return Err(backend("browse the fleet DLQ", e)),
            };
            scan_stream(
                &stream,
                names.edge_dlq_filter(origin),
                1,
                timeout,
                "browse the fleet DLQ",
                |sequence, m| {
                    let Some((o, q)) = names.edge_dlq_parts(m.subject.as_str()) else {
                        return Ok(true);
                    };
                    let entry = wire::decode_entry(&m.payload, m.subject.as_str())?;
                    if filter.matches(&entry) {
                        out.push(FleetEntry {
                            origin: o.to_string(),
                            queue: q.to_string(),
                            sequence,
                            entry,
                        });
                    }
                    Ok(out.len() < limit)
                },
            )
            .await
        })?;
        Ok(out)
    }

    /// Sends the entry at `sequence` back to its device: the device's forwarder enqueues
    /// its payload into the queue it failed in. The entry leaves the fleet DLQ once the
    /// return is stored. `Error::NotFound` if no forwarded entry has that sequence.
    pub fn replay(&self, sequence: u64) -> Result<()> {
        let names = &self.js.inner.names;
        let conn = &self.js.inner.conn;
        conn.run(async {
            let o = &self.js.inner.options;
            let returns = return_stream_config(names, o.replicas, o.duplicate_window);
            conn.js
                .get_or_create_stream(returns)
                .await
                .map_err(|e| backend("create the returns stream", e))?;
            let edge = self.js.stream(&names.edge_stream()).await?;
            let raw = edge
                .get_raw_message(sequence)
                .await
                .map_err(|_| Error::NotFound(sequence))?;
            let Some((origin, queue)) = names.edge_dlq_parts(&raw.subject) else {
                return Err(Error::NotFound(sequence));
            };
            let mut h = async_nats::HeaderMap::new();
            h.insert(headers::QUEUE, queue);
            h.insert(headers::ENCODING, wire::ENVELOPE_ENCODING);
            let message = PublishMessage::build()
                .payload(raw.payload.clone())
                .headers(h)
                .message_id(format!("return-{sequence}"));
            conn.js
                .send_publish(names.edge_returns(origin), message)
                .await
                .map_err(|e| backend("replay a fleet DLQ entry", e))?
                .await
                .map_err(|e| backend("replay a fleet DLQ entry", e))?;
            edge.delete_message(sequence)
                .await
                .map_err(|e| backend("replay a fleet DLQ entry", e))?;
            Ok(())
        })
    }
}

/// The returns stream: work-queue retention (a return leaves once its device's forwarder
/// acknowledged it), one subject per origin.
pub(crate) fn return_stream_config(
    names: &Names,
    replicas: usize,
    duplicate_window: Duration,
) -> stream::Config {
    stream::Config {
        name: names.edge_returns_stream(),
        subjects: vec![names.edge_returns_subjects()],
        retention: RetentionPolicy::WorkQueue,
        num_replicas: replicas,
        duplicate_window,
        ..Default::default()
    }
}
