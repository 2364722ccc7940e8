//! The writes that change where a message is: the attempt history, the counted events,
//! and the move to the DLQ, with the retries that let them survive a server restart.
//!
//! **The move to the DLQ** (`move_to_dlq`) is the one place two streams change for one
//! message. JetStream has no transaction across streams, so the move is ordered and made
//! idempotent instead:
//!
//! 1. publish the whole envelope to the entry's subject `{ns}.dlq.{queue}.{id}` with the
//!    deduplication id `dl-{id}-{generation}` and the condition that the subject is empty
//!    (`Nats-Expected-Last-Subject-Sequence: 0`), retrying while the server cannot be
//!    reached, and wait for the publish acknowledgement;
//! 2. count the events (deduplicated the same way);
//! 3. terminate the original delivery (`+TERM`, confirmed), which removes it from the
//!    work-queue stream.
//!
//! A crash or an outage between 1 and 3 leaves the entry in the DLQ and the message
//! unacknowledged; its next delivery finds the entry (same id, same generation) and only
//! terminates it (see `queue`). The same happens when a server that crashed forgot the
//! termination (nats-server 2.9 writes acknowledgements to disk lazily). A second move of the same delivery (another worker after
//! a lost lease) is refused by the server in step 1, so an entry is never written twice,
//! and never replaced by a later, different failure.

use std::time::{Duration, Instant};

use async_nats::jetstream::context::PublishErrorKind;
use async_nats::jetstream::message::PublishMessage;
use async_nats::jetstream::publish::PublishAck;
use async_nats::jetstream::stream::{LastRawMessageErrorKind, RawMessageErrorKind};
use async_nats::HeaderMap;
use deadletter::dlq::{Attempt, DeadLetter, DlqMetadata, FailureInfo, OriginalMetadata};
use deadletter::queue::{FailureReport, MessageId};
use deadletter::{Failure, Result};

use crate::client::{acks, backend};
use crate::message::JetStreamMessage;
use crate::names::Event;
use crate::namespace::JetStream;
use crate::wire::{self, HistoryV1};

/// A DLQ entry as found on the server, with its sequence in the DLQ stream.
pub(crate) struct Found {
    pub(crate) sequence: u64,
    pub(crate) entry: DeadLetter,
}

impl JetStream {
    /// Publishes to `subject` and waits for the acknowledgement, retrying while the
    /// server cannot be reached, for up to the move patience. A refusal (a failed
    /// condition, a message too large) is returned at once.
    pub(crate) async fn publish_retrying(
        &self,
        subject: &str,
        message: PublishMessage,
    ) -> std::result::Result<PublishAck, async_nats::jetstream::context::PublishError> {
        let give_up = Instant::now() + self.inner.options.move_patience;
        let mut pause = Duration::from_millis(50);
        loop {
            let sent = self
                .inner
                .conn
                .js
                .send_publish(subject.to_string(), message.clone())
                .await;
            let result = match sent {
                Ok(ack) => ack.await,
                Err(e) => Err(e),
            };
            match result {
                Ok(ack) => return Ok(ack),
                Err(e)
                    if matches!(
                        e.kind(),
                        PublishErrorKind::TimedOut
                            | PublishErrorKind::BrokenPipe
                            | PublishErrorKind::StreamNotFound
                    ) && Instant::now() < give_up =>
                {
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(1));
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Sends an acknowledgement of a delivery received over connection `delivered_in` (see
    /// `Conn::epoch`) and waits for its confirmation, retrying while the server cannot be
    /// reached, for up to the move patience. An `+ACK` or `+TERM` whose confirmation did
    /// not come is done once its message is gone from the work-queue stream (the first
    /// one was applied, only its answer was lost). Once the client has reconnected since
    /// the delivery, an unanswered acknowledgement fails at once: a server that restarted
    /// may no longer hold the delivery, and then answers nothing for it; the message's
    /// next delivery settles it.
    pub(crate) async fn ack_retrying(
        &self,
        reply: &str,
        delivered_in: u64,
        kind: bytes::Bytes,
    ) -> Result<()> {
        let give_up = Instant::now() + self.inner.options.move_patience;
        let mut pause = Duration::from_millis(50);
        let removes = kind.starts_with(b"+ACK") || kind.starts_with(b"+TERM");
        loop {
            match self.inner.conn.ack_confirmed(reply, kind.clone()).await {
                Ok(()) => return Ok(()),
                Err(_) if removes && self.delivery_gone(reply).await => return Ok(()),
                Err(e) if self.inner.conn.epoch() != delivered_in => return Err(e),
                Err(_) if Instant::now() < give_up => {
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(1));
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// True when the stream message a delivery's reply subject names is no longer in its
    /// stream (false when that cannot be told: the server is away, or the subject is not
    /// an ack subject).
    async fn delivery_gone(&self, reply: &str) -> bool {
        let Some((stream, sequence)) = ack_target(reply) else {
            return false;
        };
        let Ok(stream) = self.stream(stream).await else {
            return false;
        };
        match stream.get_raw_message(sequence).await {
            Err(e) => e.kind() == RawMessageErrorKind::NoMessageFound,
            Ok(_) => false,
        }
    }

    /// Counts one `event` of `queue`; `dedupe` makes a repeated count (after a crash, a
    /// retried move) count once within the duplicate window.
    pub(crate) async fn count_event(
        &self,
        queue: &str,
        event: Event,
        dedupe: Option<String>,
    ) -> Result<()> {
        let mut message = PublishMessage::build().payload(bytes::Bytes::new());
        if let Some(id) = dedupe {
            message = message.message_id(id);
        }
        let subject = self.inner.names.event(queue, event);
        self.publish_retrying(&subject, message)
            .await
            .map(|_| ())
            .map_err(|e| backend("count an event", e))
    }

    /// The attempt history of message `id` in `generation` (empty if none was written).
    /// Retries while the server cannot be reached, for up to the move patience: a
    /// failure report that cannot read the history is not written, and a delivery whose
    /// failure is not written may be counted again by nothing.
    pub(crate) async fn read_history(&self, id: MessageId, generation: u32) -> Result<HistoryV1> {
        let names = &self.inner.names;
        let stream = self.stream(&names.history_stream()).await?;
        let give_up = Instant::now() + self.inner.options.move_patience;
        let mut pause = Duration::from_millis(50);
        let read = loop {
            match stream
                .get_last_raw_message_by_subject(&names.history(id))
                .await
            {
                Err(e)
                    if e.kind() != LastRawMessageErrorKind::NoMessageFound
                        && Instant::now() < give_up =>
                {
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(1));
                }
                read => break read,
            }
        };
        match read {
            Ok(msg) => {
                let h = HistoryV1::decode(&msg.payload)?;
                Ok(if h.generation == generation {
                    h
                } else {
                    HistoryV1::new(generation)
                })
            }
            Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => {
                Ok(HistoryV1::new(generation))
            }
            Err(e) => Err(backend("read an attempt history", e)),
        }
    }

    /// Writes the attempt history of message `id` (replacing the previous record).
    pub(crate) async fn write_history(&self, id: MessageId, h: &HistoryV1) -> Result<()> {
        let subject = self.inner.names.history(id);
        let message = PublishMessage::build().payload(h.encode()?.into());
        self.publish_retrying(&subject, message)
            .await
            .map(|_| ())
            .map_err(|e| backend("write an attempt history", e))
    }

    /// Removes the history record of message `id` (its content is in a DLQ entry now).
    /// Best effort: a leftover record is of an older generation and never read.
    pub(crate) async fn forget_history(&self, id: MessageId) {
        if let Ok(stream) = self.stream(&self.inner.names.history_stream()).await {
            let _ = stream.purge().filter(self.inner.names.history(id)).await;
        }
    }

    /// The DLQ entry of message `id` in `queue`'s DLQ, if there is one.
    pub(crate) async fn find_entry(&self, queue: &str, id: MessageId) -> Result<Option<Found>> {
        let names = &self.inner.names;
        let stream = self.stream(&names.dlq_stream()).await?;
        match stream
            .get_last_raw_message_by_subject(&names.dlq_entry(queue, id))
            .await
        {
            Ok(msg) => {
                let entry = wire::decode_entry(&msg.payload, &msg.subject)?;
                Ok(Some(Found {
                    sequence: msg.sequence,
                    entry,
                }))
            }
            Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => Ok(None),
            Err(e) => Err(backend("read a DLQ entry", e)),
        }
    }

    /// Writes `entry` as the DLQ entry of its message: a new entry (`expected` 0) or a
    /// replacement of the one at sequence `expected`. Returns false when the condition
    /// failed (the subject holds something else).
    pub(crate) async fn put_entry(
        &self,
        queue: &str,
        entry: &DeadLetter,
        expected: u64,
        dedupe: Option<String>,
    ) -> Result<bool> {
        let (headers, data) = wire::encode_entry(entry)?;
        let mut message = PublishMessage::build()
            .headers(headers)
            .payload(data.into())
            .expected_last_subject_sequence(expected);
        if let Some(id) = dedupe {
            message = message.message_id(id);
        }
        let subject = self.inner.names.dlq_entry(queue, entry.id());
        match self.publish_retrying(&subject, message).await {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == PublishErrorKind::WrongLastSequence => Ok(false),
            Err(e) => Err(backend("write a DLQ entry", e)),
        }
    }

    /// Moves a delivered message to its queue's DLQ (see the module documentation).
    /// `attempt` is the failed delivery to add to its history, if any; `delivery_count`
    /// the deliveries the entry reports.
    pub(crate) async fn move_to_dlq(
        &self,
        msg: &JetStreamMessage,
        failure: &Failure,
        report: &FailureReport<'_>,
        attempt: Option<Attempt>,
        delivery_count: u32,
        now: u64,
    ) -> Result<()> {
        let o = &self.inner.options;
        let queue = &*msg.queue;
        // A trusted first delivery has no history to read (see `queue`'s `admit`).
        let fresh = msg.trusted && msg.deferred == 0;
        let mut history = if fresh {
            HistoryV1::new(msg.generation)
        } else {
            self.read_history(msg.id, msg.generation).await?
        };
        if history.first_received_at_ms.is_none() && msg.delivered == 1 {
            history.first_received_at_ms = Some(msg.leased_at_ms);
        }
        if let Some(a) = attempt {
            history.push(a, o.max_history);
        }
        let replaced_payload = history.replaced()?;
        let mut metadata = OriginalMetadata::new(msg.id, queue, msg.enqueued_at_ms)
            .delivery_count(delivery_count)
            .attributes(msg.attributes.clone());
        metadata.first_received_at_ms = history.first_received_at_ms;
        let mut info = FailureInfo::new(failure.kind.clone(), failure.message.clone(), now)
            .attempts(history.attempts)
            .attempts_dropped(history.dropped)
            .context(failure.context().clone());
        info.details = failure.details().map(str::to_string);
        let mut dlq = DlqMetadata::new(now).tags(report.tags.clone());
        dlq.worker = report.worker.map(str::to_string);
        dlq.environment = o.environment.clone();
        dlq.code_version = o.code_version.clone();
        dlq.expires_at_ms = o.retention.map(|r| now + r.as_millis() as u64);
        let mut entry = DeadLetter::new(msg.payload.to_vec(), metadata, info, dlq)
            .generation(msg.generation)
            .dlq_name(self.dlq_name(queue));
        entry.replaced_payload = replaced_payload;
        let dedupe = format!("dl-{}-{}", msg.id, msg.generation);
        if !self
            .put_entry(queue, &entry, 0, Some(dedupe.clone()))
            .await?
        {
            // The subject holds an entry already: this delivery's own earlier move (done),
            // or an entry of an earlier generation whose replay did not finish removing it.
            match self.find_entry(queue, msg.id).await? {
                Some(found) if found.entry.generation < msg.generation => {
                    self.delete_entry_at(found.sequence).await?;
                    if !self.put_entry(queue, &entry, 0, Some(dedupe)).await? {
                        return Err(deadletter::Error::InvalidState {
                            id: msg.id,
                            expected: "free to move to the DLQ",
                        });
                    }
                }
                _ => {}
            }
        }
        let key = format!("{}-{}", msg.id, msg.generation);
        self.count_event(queue, Event::DeadLettered, Some(format!("ev-dl-{key}")))
            .await?;
        if let Some(origin) = &msg.replayed_from {
            self.count_event(
                origin,
                Event::ReprocessedFailed,
                Some(format!("ev-rf-{key}")),
            )
            .await?;
        }
        self.ack_retrying(&msg.reply, msg.epoch, acks::term())
            .await?;
        if !fresh {
            self.forget_history(msg.id).await;
        }
        self.check_alerts(queue).await
    }

    /// Deletes the DLQ stream's message at `sequence`.
    pub(crate) async fn delete_entry_at(&self, sequence: u64) -> Result<()> {
        let stream = self.stream(&self.inner.names.dlq_stream()).await?;
        stream
            .delete_message(sequence)
            .await
            .map(|_| ())
            .map_err(|e| backend("delete a DLQ entry", e))
    }
}

/// The stream and stream sequence an ack subject names: `$JS.ACK.<stream>.<consumer>.
/// <delivered>.<stream seq>...` (9 tokens), or with a domain and account hash before the
/// stream (12 tokens).
fn ack_target(reply: &str) -> Option<(&str, u64)> {
    let t: Vec<&str> = reply.split('.').collect();
    if t.len() < 9 || t[0] != "$JS" || t[1] != "ACK" {
        return None;
    }
    let (stream, seq) = if t.len() == 9 {
        (t[2], t[5])
    } else {
        (t[4], t[7])
    };
    Some((stream, seq.parse().ok()?))
}

/// Headers of a queue message, from its parts.
pub(crate) fn message_headers(
    attributes: &std::collections::BTreeMap<String, String>,
    expires_at: Option<u64>,
) -> Result<Option<HeaderMap>> {
    if attributes.is_empty() && expires_at.is_none() {
        return Ok(None);
    }
    let mut h = HeaderMap::new();
    if !attributes.is_empty() {
        let json = serde_json::to_string(attributes)
            .map_err(|e| deadletter::Error::Codec(e.to_string()))?;
        h.insert(wire::headers::ATTRIBUTES, json.as_str());
    }
    if let Some(t) = expires_at {
        h.insert(wire::headers::EXPIRES_AT, t.to_string().as_str());
    }
    Ok(Some(h))
}

#[cfg(test)]
mod tests {
    use super::ack_target;

    #[test]
    fn ack_subjects_name_their_stream_message() {
        assert_eq!(
            ack_target("$JS.ACK.ns-q-orders.workers.1.42.42.1700000000000000000.0"),
            Some(("ns-q-orders", 42))
        );
        assert_eq!(
            ack_target("$JS.ACK.hub.ACCHASH.ns-q-orders.workers.3.7.9.1700000000000000000.0.tok"),
            Some(("ns-q-orders", 7))
        );
        assert_eq!(ack_target("_INBOX.abc"), None);
        assert_eq!(ack_target("$JS.ACK.s.c.1.x.1.1.0"), None);
    }
}
