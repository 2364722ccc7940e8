//! [`JetStreamQueue`]: a queue on JetStream, implementing `deadletter::MessageQueue`.
//!
//! The mapping:
//! - **enqueue**: a publish to the queue's subject; it returns when the server's publish
//!   acknowledgement arrives (the message is stored). The id is computed from the
//!   sequence. An idempotency key is the publish's deduplication id (`Nats-Msg-Id`).
//! - **lease**: a fetch from the queue's durable pull consumer, shared by every worker
//!   of every process; the consumer's ack wait is the visibility timeout. The server
//!   counts the delivery (`num_delivered`) before it sends the message, so a consumer
//!   that dies in its handler has used an attempt.
//! - **ack**: `+ACK`, confirmed by the server (the work-queue stream removes the message).
//! - **retry**: the failed attempt is added to the message's history record, then a
//!   negative acknowledgement with a delay (`-NAK {"delay":...}`) makes the server
//!   redeliver it after the backoff; nothing sleeps and later messages keep flowing.
//! - **dead-letter** (a permanent failure, the last attempt, a lost last lease, an expired
//!   time to live): the move in `moves`.
//!
//! Before a delivery is handed out, `admit` settles what an earlier delivery left
//! unfinished: a move to the DLQ whose final acknowledgement was lost (the entry exists:
//! the delivery is terminated; checked on every delivery, because a server that crashes
//! may forget acknowledgements and delivery counts alike, so one lookup per delivery,
//! overlapped across a fetched batch), a replay that did not remove its DLQ entry (removed now),
//! a delivery past the last attempt (to the DLQ as `LeaseExpired`), an expired time to
//! live, and a delayed message that came too early (given back, not counted).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::message::{Info, PublishMessage};
use async_nats::jetstream::{self, consumer::PullConsumer};
use bytes::Bytes;
use deadletter::queue::{
    EnqueueOptions, FailureOutcome, FailureReport, MessageId, QueueOptions, QueueStats,
};
use deadletter::{Delivery, Error, Failure, MessageQueue, Result};
use futures_util::StreamExt;

use crate::client::{acks, backend, now_ms};
use crate::counts::{count_entries, event_counts};
use crate::dlq::JetStreamDlq;
use crate::holds::Key;
use crate::message::JetStreamMessage;
use crate::moves::message_headers;
use crate::names::{self, Event};
use crate::namespace::{JetStream, QueueInfo};
use crate::repair::REPAIR_EVERY;
use crate::wire::{self, header_u64, headers};

/// The longest a single pull request waits. A request the server never saw (sent while
/// the connection, or the server's JetStream after a restart, was coming back) is
/// answered by nothing at all; waiting in slices bounds what such a request costs the
/// caller to one slice instead of the whole wait.
const PULL_SLICE: Duration = Duration::from_secs(1);

/// How many times `stats` reads the consumer and the stream for counts that agree, and
/// how long it pauses between reads.
const STATS_READS: usize = 5;
const STATS_PAUSE: Duration = Duration::from_millis(10);

/// A queue's stream handed out a sequence it had handed out before (a server that lost
/// part of its stream): the source of the `Error::Backend` an enqueue then returns. The
/// messages it stored under reused sequences were deleted; what was acknowledged before
/// is untouched, and the next enqueue tries again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SequenceWentBackwards {
    /// The queue.
    pub queue: String,
    /// The sequence the stream gave.
    pub sequence: u64,
    /// The highest sequence this process had seen it give before.
    pub seen: u64,
}

impl std::fmt::Display for SequenceWentBackwards {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the stream of queue {:?} gave sequence {} after {}: it went backwards, so its \
             ids would repeat (the server lost part of the stream); the message was not kept",
            self.queue, self.sequence, self.seen
        )
    }
}

impl std::error::Error for SequenceWentBackwards {}

/// A queue on a JetStream server. Cheap to clone; usable from any number of threads and
/// processes (they share the queue's consumer).
#[derive(Clone)]
pub struct JetStreamQueue {
    js: JetStream,
    info: Arc<QueueInfo>,
    options: QueueOptions,
}

impl std::fmt::Debug for JetStreamQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JetStreamQueue")
            .field("name", &self.info.name)
            .finish()
    }
}

impl JetStreamQueue {
    pub(crate) fn new(js: JetStream, info: Arc<QueueInfo>, options: QueueOptions) -> Self {
        JetStreamQueue { js, info, options }
    }

    /// The options of this handle.
    pub fn options(&self) -> &QueueOptions {
        &self.options
    }

    /// The connection.
    pub fn backend(&self) -> &JetStream {
        &self.js
    }

    pub(crate) fn dlq_handle(&self) -> JetStreamDlq {
        JetStreamDlq::new(self.js.clone(), Arc::clone(&self.info.name))
    }

    pub(crate) fn info(&self) -> &QueueInfo {
        &self.info
    }

    fn consumer(&self) -> &PullConsumer {
        &self.info.consumer
    }

    /// Builds the publish of one payload.
    fn publish_of(
        &self,
        payload: &[u8],
        options: &EnqueueOptions,
        now: u64,
    ) -> Result<PublishMessage> {
        let ttl = options.ttl.or(self.options.default_ttl);
        let expires = ttl.map(|t| now + t.as_millis() as u64);
        let mut headers = message_headers(&options.attributes, expires)?;
        if let Some(delay) = options.delay.filter(|d| !d.is_zero()) {
            let h = headers.get_or_insert_with(async_nats::HeaderMap::new);
            h.insert(
                headers::NOT_BEFORE,
                (now + delay.as_millis() as u64).to_string().as_str(),
            );
        }
        let mut m = PublishMessage::build().payload(Bytes::copy_from_slice(payload));
        if let Some(h) = headers {
            m = m.headers(h);
        }
        if let Some(key) = &options.idempotency_key {
            m = m.message_id(key);
        }
        Ok(m)
    }

    pub(crate) async fn publish_all<'p>(
        &self,
        payloads: impl Iterator<Item = &'p [u8]>,
        options: &EnqueueOptions,
    ) -> Result<Vec<MessageId>> {
        let now = now_ms();
        let js = &self.js.inner.conn.js;
        // Every sequence the stream had given before these publishes are sent: a new
        // message gets a sequence above it. (Compared with the highest sequence seen when
        // the acknowledgement arrives instead, a publish of another thread, or the stream's
        // last sequence read after a reconnect, both of which can be above this message's
        // own, would make a good message look reused, and its deletion would lose it.)
        let floor = self.info.seen_sequence.load(Ordering::Acquire);
        // Send every publish first, then wait for the acknowledgements: one round trip
        // for the batch.
        let mut pending = Vec::new();
        for payload in payloads {
            let m = self.publish_of(payload, options, now)?;
            let ack = js
                .send_publish(self.info.subject.clone(), m)
                .await
                .map_err(|e| backend("enqueue", e))?;
            pending.push(ack);
        }
        let mut ids = Vec::with_capacity(pending.len());
        let mut backwards = None;
        for ack in pending {
            let ack = ack.await.map_err(|e| backend("enqueue", e))?;
            // A new message (not a duplicate of a key) always gets a sequence past every
            // one the stream gave before it was sent: if not, the stream went backwards,
            // and the id would be one already given to another message.
            self.info
                .seen_sequence
                .fetch_max(ack.sequence, Ordering::AcqRel);
            if !ack.duplicate && ack.sequence <= floor {
                backwards = Some((ack.sequence, floor));
            }
            ids.push(names::message_id(self.info.number, ack.sequence)?);
        }
        if let Some((sequence, seen)) = backwards {
            return Err(self.went_backwards(sequence, seen).await);
        }
        deadletter::trace::events::enqueued(&self.info.name, &ids, &options.attributes);
        Ok(ids)
    }

    /// The queue's stream gave `sequence` after it had given `seen` before the publish
    /// was sent: its messages from `sequence` to `seen` would reuse ids. They are deleted
    /// (never delivered under a reused id) and the enqueue fails with
    /// [`SequenceWentBackwards`].
    async fn went_backwards(&self, sequence: u64, seen: u64) -> Error {
        if let Ok(stream) = self.js.stream(&self.info.stream).await {
            for s in sequence..=seen {
                let _ = stream.delete_message(s).await;
            }
        }
        backend(
            "enqueue",
            SequenceWentBackwards {
                queue: self.info.name.to_string(),
                sequence,
                seen,
            },
        )
    }

    /// Fetches up to `max` deliveries in one pull request; with `wait`, the request waits
    /// that long (at most `PULL_SLICE`) for the first and returns as soon as no more are
    /// pending (a no-wait pull with an expiry); without, it does not wait at all.
    pub(crate) async fn fetch(
        &self,
        max: usize,
        wait: Option<Duration>,
    ) -> Result<Vec<jetstream::Message>> {
        let mut out = Vec::new();
        let mut request = self.consumer().fetch().max_messages(max);
        let wait = wait.map(|w| w.clamp(Duration::from_millis(10), PULL_SLICE));
        if let Some(w) = wait {
            request = request.expires(w);
        }
        let mut batch = request.messages().await.map_err(|e| backend("lease", e))?;
        // The server ends the request by its expiry at the latest. A request it never saw
        // (sent while the connection, or the server's JetStream after a restart, was
        // coming back), and on 2.9 a no-wait pull it left unanswered when several
        // consumers pulled at once (nats-io/nats-server#7457), is answered by nothing:
        // listening one slice past the expiry bounds what that costs. A message the
        // server still sends to the abandoned request comes back after the visibility
        // timeout.
        let answer = async {
            while let Some(m) = batch.next().await {
                out.push(m.map_err(|e| backend("lease", e))?);
            }
            Ok::<(), Error>(())
        };
        let listen = wait.unwrap_or(Duration::ZERO) + PULL_SLICE;
        if let Ok(answered) = tokio::time::timeout(listen, answer).await {
            answered?;
        }
        Ok(out)
    }

    pub(crate) async fn lease_async(
        &self,
        max: usize,
        wait: Option<Duration>,
    ) -> Result<Vec<JetStreamMessage>> {
        if max == 0 {
            return Ok(Vec::new());
        }
        let give_up = wait.map(|w| std::time::Instant::now() + w);
        loop {
            let left = give_up.map(|t| t.saturating_duration_since(std::time::Instant::now()));
            let epoch = self.js.inner.conn.epoch();
            let raw = self.fetch(max, left).await?;
            // Each fetched delivery that fails to be admitted below was counted by the
            // server but reaches no handler: recorded, so that its next delivery here
            // does not count it as an attempt (see `holds`).
            let keys: Vec<Option<Key>> = raw.iter().map(|m| self.delivery_key(m)).collect();
            let not_admitted = |keys: &mut dyn Iterator<Item = Key>| {
                for key in keys {
                    self.info.holds.not_admitted(key);
                }
            };
            if !raw.is_empty() {
                if let Err(e) = self.renew_trust().await {
                    not_admitted(&mut keys.iter().flatten().copied());
                    return Err(e);
                }
            }
            let trust_from = self.info.trust_from.load(Ordering::Acquire);
            let now = now_ms();
            let fetched = raw.len();
            // Admitted together: their lookups overlap, one round trip for the batch.
            let admitted = futures_util::future::join_all(
                raw.into_iter()
                    .map(|m| self.admit(m, now, trust_from, epoch)),
            )
            .await;
            let mut out = Vec::with_capacity(fetched);
            let mut failed = None;
            let mut unadmitted = Vec::new();
            for (m, key) in admitted.into_iter().zip(keys) {
                match m {
                    Ok(m) => out.extend(m),
                    Err(e) => {
                        failed = failed.or(Some(e));
                        unadmitted.extend(key);
                    }
                }
            }
            if let Some(e) = failed {
                // None of the batch is handed out: none stays held.
                for m in &out {
                    self.release_hold(m);
                    unadmitted.push((m.id, m.generation));
                }
                not_admitted(&mut unadmitted.into_iter());
                return Err(e);
            }
            // Nothing to deliver yet (each pull waits at most `PULL_SLICE`), or everything
            // fetched was settled rather than delivered: look again while the caller is
            // willing to wait.
            let again = out.is_empty()
                && (fetched > 0 || wait.is_some())
                && give_up.is_some_and(|t| std::time::Instant::now() < t);
            if again && fetched == 0 {
                self.repair_when_due().await?;
            }
            if !again {
                return Ok(out);
            }
        }
    }

    /// After the client (re)connected: the server may have restarted, so only messages
    /// stored from now on have first deliveries it cannot have forgotten anything about.
    async fn renew_trust(&self) -> Result<()> {
        let epoch = self.js.inner.conn.epoch();
        if self.info.trusted_epoch.load(Ordering::Acquire) == epoch {
            return Ok(());
        }
        let stream = self.js.stream(&self.info.stream).await?;
        let last = self.stream_state(&stream).await?.last_sequence;
        self.info.seen_sequence.fetch_max(last, Ordering::AcqRel);
        self.info.trust_from.fetch_max(last + 1, Ordering::AcqRel);
        self.info.trusted_epoch.store(epoch, Ordering::Release);
        Ok(())
    }

    /// Turns a delivery into a message for the caller, or settles it (see the module
    /// documentation) and returns `None`. A delivery is trusted when it is the first of a
    /// message stored at or after `trust_from` (not a replay): nothing can have been
    /// recorded about it, so it is handed out with no lookup at all. `epoch` is the
    /// connection's (see `Conn::epoch`) when the delivery was fetched.
    async fn admit(
        &self,
        m: jetstream::Message,
        now: u64,
        trust_from: u64,
        epoch: u64,
    ) -> Result<Option<JetStreamMessage>> {
        let info = m.info().map_err(|e| backend("read a delivery", e))?;
        let key = self.key_of(&m, info.stream_sequence)?;
        // A server that restarted may redeliver a message a worker of this process still
        // holds: that worker's outcome settles it (see `holds`), so it is not handed out.
        let held_from = std::time::Instant::now();
        if !self
            .info
            .holds
            .try_hold(key, held_from, self.hold_until(held_from))
        {
            return Ok(None);
        }
        let admitted = self.admit_held(&m, info, key, now, trust_from, epoch).await;
        if !matches!(admitted, Ok(Some(_))) {
            self.info.holds.release(key);
        }
        admitted
    }

    /// The message (id, generation) a delivery of stream message `sequence` carries.
    fn key_of(&self, m: &jetstream::Message, sequence: u64) -> Result<Key> {
        let h = m.headers.as_ref();
        let id = match header_u64(h, headers::ID) {
            Some(id) => id,
            None => names::message_id(self.info.number, sequence)?,
        };
        let generation = header_u64(h, headers::GENERATION).unwrap_or(0) as u32;
        Ok((id, generation))
    }

    /// The message of a delivery, when it can be read.
    fn delivery_key(&self, m: &jetstream::Message) -> Option<Key> {
        let sequence = m.info().ok()?.stream_sequence;
        self.key_of(m, sequence).ok()
    }

    /// Until when a delivery leased (or extended) at `from` is held (see `holds`): a
    /// tenth of the lease before it ends, so that the server's own redelivery at the end
    /// of the lease (it started the lease a moment before this process did) is never
    /// refused as held.
    fn hold_until(&self, from: std::time::Instant) -> std::time::Instant {
        let lease = self.options.visibility_timeout;
        from + (lease - lease / 10)
    }

    /// Records that the handlers of `msgs` succeeded, before their acks are sent (see
    /// `holds`): a delivery of one of them that comes meanwhile, or after a server that
    /// confirmed an ack forgot it, is only acked.
    pub(crate) fn record_successes(&self, msgs: &[JetStreamMessage]) {
        for m in msgs {
            self.info.holds.succeeded((m.id, m.generation));
        }
    }

    /// Stops holding `msg` (see `holds`).
    pub(crate) fn release_hold(&self, msg: &JetStreamMessage) {
        self.info.holds.release((msg.id, msg.generation));
    }

    /// `admit` of a delivery (`m`, with its `info`) of message `key` (id, generation) that
    /// this process now holds.
    async fn admit_held(
        &self,
        m: &jetstream::Message,
        info: Info<'_>,
        (id, generation): Key,
        now: u64,
        trust_from: u64,
        epoch: u64,
    ) -> Result<Option<JetStreamMessage>> {
        let sequence = info.stream_sequence;
        let delivered = info.delivered.max(1) as u32;
        let published = (info.published.unix_timestamp_nanos() / 1_000_000) as u64;
        let reply: Arc<str> = match &m.reply {
            Some(r) => Arc::from(r.as_str()),
            None => {
                return Err(Error::InvalidState {
                    id: sequence,
                    expected: "a delivery with a reply subject",
                })
            }
        };
        let h = m.headers.as_ref();
        let base = header_u64(h, headers::ATTEMPTS_BASE).unwrap_or(0) as u32;
        let not_before = header_u64(h, headers::NOT_BEFORE);
        let replayed_from = h
            .and_then(|h| h.get(headers::REPLAYED_FROM))
            .map(|v| Arc::from(v.as_str()));
        let trusted = delivered == 1 && sequence >= trust_from && replayed_from.is_none();
        // Deliveries given back uncounted (too early, or unstarted when a pool stopped)
        // and the failed attempts are in the history: a trusted delivery has none. The
        // history also bounds the attempt from below when a restarted server counts
        // deliveries from an older state.
        let mut history = None;
        if !trusted {
            history = Some(self.js.read_history(id, generation).await?);
        }
        let deferred = history.as_ref().map_or(0, |h| h.deferred);
        let recorded = history
            .as_ref()
            .map_or(0, |h| h.attempts.len() as u32 + h.dropped);
        if let Some(nb) = not_before {
            if now < nb {
                // Too early: given back for the rest of the delay, and not counted.
                let mut history = match history {
                    Some(h) => h,
                    None => self.js.read_history(id, generation).await?,
                };
                history.deferred = deferred + 1;
                self.js.write_history(id, &history).await?;
                let wait = Duration::from_millis(nb - now);
                self.js.ack_retrying(&reply, epoch, acks::nak(wait)).await?;
                return Ok(None);
            }
        }
        // The history holds the attempts a replay kept (counted in `base`) and those
        // since: a restarted server's count never takes the attempt below them.
        // Nor do the deliveries this process fetched and could not admit (see `holds`).
        let skipped = deferred + self.info.holds.unadmitted((id, generation));
        let attempt = (base + delivered.saturating_sub(skipped).max(1)).max(recorded + 1);
        let delivered = attempt - base;
        let msg = JetStreamMessage {
            id,
            queue: Arc::clone(&self.info.name),
            attempt,
            delivered,
            deferred,
            generation,
            enqueued_at_ms: header_u64(h, headers::ENQUEUED_AT).unwrap_or(published),
            leased_at_ms: now,
            attributes: wire::attributes(h),
            replayed_from,
            reply,
            sequence,
            payload: m.message.payload.clone(),
            trusted,
            epoch,
        };
        if !trusted {
            // Its handler succeeded here and only the ack was lost (unconfirmed, or
            // confirmed by a server that was killed before it kept it): ack it again.
            let key = (msg.id, msg.generation);
            if self.info.holds.has_succeeded(key) {
                self.js.ack_retrying(&msg.reply, epoch, acks::ack()).await?;
                if self.info.unconfirmed.lock().remove(&key) {
                    self.count_reprocessed(&msg).await?;
                }
                return Ok(None);
            }
            if self.settled_before(&msg).await? {
                return Ok(None);
            }
        }
        if let Some(expires) = header_u64(h, headers::EXPIRES_AT) {
            if expires <= now {
                self.expire(&msg, now).await?;
                return Ok(None);
            }
        }
        // Past the last attempt because an earlier delivery of this copy ended without an
        // outcome (a replay that kept the count may deliver past the limit once).
        if msg.delivered > 1 && msg.attempt > self.options.max_attempts {
            let lost = msg.attempt - 1;
            let failure = Failure::transient(
                "LeaseExpired",
                format!(
                    "delivery {lost} of {} ended without an ack or failure before its lease expired",
                    self.options.max_attempts
                ),
            );
            let report = FailureReport::new(&failure);
            let attempt = report.attempt(lost, now);
            self.js
                .move_to_dlq(&msg, &failure, &report, Some(attempt), lost, now)
                .await?;
            return Ok(None);
        }
        Ok(Some(msg))
    }

    /// What an earlier delivery of an untrusted delivery's message left unfinished: a
    /// move to the DLQ (finished now: the delivery is terminated, and true returned), or
    /// a replay that did not remove its DLQ entry (removed now).
    async fn settled_before(&self, msg: &JetStreamMessage) -> Result<bool> {
        // A move to the DLQ whose final acknowledgement was lost (a crash, or a server
        // restart that forgot it: then even the delivery count starts again) left the
        // message here: finish that move instead of delivering it again.
        let own = self.js.find_entry(&self.info.name, msg.id).await?;
        if let Some(found) = &own {
            if found.entry.generation == msg.generation {
                self.js
                    .ack_retrying(&msg.reply, msg.epoch, acks::term())
                    .await?;
                return Ok(true);
            }
        }
        if let (1, Some(origin)) = (msg.delivered, msg.replayed_from.clone()) {
            // The first delivery of a replayed message: a replay that stopped before
            // removing its DLQ entry is finished here.
            let stale = if *origin == *self.info.name {
                own
            } else {
                self.js.find_entry(&origin, msg.id).await?
            };
            if let Some(found) = stale.filter(|f| f.entry.generation < msg.generation) {
                self.js.delete_entry_at(found.sequence).await?;
                self.js.check_alerts(&origin).await?;
            }
        }
        Ok(false)
    }

    /// A message whose time to live passed: to the DLQ or dropped, per the options.
    async fn expire(&self, msg: &JetStreamMessage, now: u64) -> Result<()> {
        let key = format!("{}-{}", msg.id, msg.generation);
        self.js
            .count_event(
                &self.info.name,
                Event::Expired,
                Some(format!("ev-ex-{key}")),
            )
            .await?;
        if self.options.expired_to_dlq {
            let failure = Failure::permanent(
                deadletter::dlq::EXPIRED_KIND,
                "the message's time to live passed",
            );
            let report = FailureReport::new(&failure);
            let count = msg.attempt - 1;
            self.js
                .move_to_dlq(msg, &failure, &report, None, count, now)
                .await
        } else {
            self.js
                .count_event(
                    &self.info.name,
                    Event::Dropped,
                    Some(format!("ev-dr-{key}")),
                )
                .await?;
            self.js
                .ack_retrying(&msg.reply, msg.epoch, acks::term())
                .await
        }
    }

    async fn retry_async(
        &self,
        msg: &JetStreamMessage,
        report: &FailureReport<'_>,
        retry_at_ms: u64,
    ) -> Result<FailureOutcome> {
        let now = now_ms();
        let attempt = report.attempt(msg.attempt, now);
        if report.failure.is_permanent() || msg.attempt >= self.options.max_attempts {
            self.js
                .move_to_dlq(msg, report.failure, report, Some(attempt), msg.attempt, now)
                .await?;
            return Ok(FailureOutcome::DeadLettered);
        }
        let fresh = msg.trusted && msg.deferred == 0;
        let mut history = if fresh {
            crate::wire::HistoryV1::new(0)
        } else {
            self.js.read_history(msg.id, msg.generation).await?
        };
        history.deferred = history.deferred.max(msg.deferred);
        if history.first_received_at_ms.is_none() && msg.delivered == 1 {
            history.first_received_at_ms = Some(msg.leased_at_ms);
        }
        history.push(attempt, self.js.inner.options.max_history);
        // Both before the NAK, in parallel: one round trip.
        let (written, counted) = futures_util::future::join(
            self.js.write_history(msg.id, &history),
            self.js.count_event(&self.info.name, Event::Retried, None),
        )
        .await;
        written?;
        counted?;
        let visible_at = retry_at_ms.max(now + 1);
        let delay = Duration::from_millis(visible_at - now);
        // Released before the NAK: its redelivery must find it free.
        self.release_hold(msg);
        self.js
            .inner
            .conn
            .ack_confirmed(&msg.reply, acks::nak(delay))
            .await?;
        Ok(FailureOutcome::Retried {
            visible_at_ms: visible_at,
        })
    }

    /// After the ack of a replayed message: counts its reprocessing as a success on the
    /// DLQ it came from (once, whatever repeats it).
    pub(crate) async fn count_reprocessed(&self, m: &JetStreamMessage) -> Result<()> {
        if let Some(origin) = &m.replayed_from {
            let dedupe = format!("ev-ok-{}-{}", m.id, m.generation);
            self.js
                .count_event(origin, Event::ReprocessedOk, Some(dedupe))
                .await?;
        }
        Ok(())
    }

    /// The queue's consumer as the server sees it now.
    async fn consumer_info(&self) -> Result<jetstream::consumer::Info> {
        let mut consumer = self.consumer().clone();
        Ok(consumer
            .info()
            .await
            .map_err(|e| backend("read the queue's consumer", e))?
            .clone())
    }

    async fn stream_state(
        &self,
        stream: &jetstream::stream::Stream<()>,
    ) -> Result<jetstream::stream::State> {
        Ok(stream
            .get_info()
            .await
            .map_err(|e| backend("read the queue's stream", e))?
            .state
            .clone())
    }

    /// Repairs the queue (see `repair`) if no idle lease of this queue did in the last
    /// `REPAIR_EVERY`: a waiting lease that finds nothing may be facing a stalled consumer.
    async fn repair_when_due(&self) -> Result<()> {
        {
            let mut last = self
                .info
                .last_repair
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            let now = std::time::Instant::now();
            if last.is_some_and(|t| now.duration_since(t) < REPAIR_EVERY) {
                return Ok(());
            }
            *last = Some(now);
        }
        let c = self.consumer_info().await?;
        let stream = self.js.stream(&self.info.stream).await?;
        let state = self.stream_state(&stream).await?;
        self.js
            .repair_queue(&stream, &self.info.subject, &c, &state)
            .await?;
        Ok(())
    }

    pub(crate) async fn stats_async(&self) -> Result<QueueStats> {
        let mut c = self.consumer_info().await?;
        let stream = self.js.stream(&self.info.stream).await?;
        let mut state = self.stream_state(&stream).await?;
        // The stream can hold more than the consumer accounts for, for a moment: a
        // message just stored that the consumer has not counted yet, or, in a cluster,
        // one whose acknowledgement the consumer confirmed before the stream's replica
        // removed it. Read again, a few times, for a view in which they agree.
        for _ in 1..STATS_READS {
            if state.messages <= c.num_pending + c.num_ack_pending as u64 {
                break;
            }
            tokio::time::sleep(STATS_PAUSE).await;
            c = self.consumer_info().await?;
            state = self.stream_state(&stream).await?;
        }
        let repaired = self
            .js
            .repair_queue(&stream, &self.info.subject, &c, &state)
            .await?;
        if repaired.changed() {
            c = self.consumer_info().await?;
            state = self.stream_state(&stream).await?;
        }
        let events = event_counts(&self.js, &self.info.name).await?;
        let count = |e: Event| events.get(&e).copied().unwrap_or(0);
        let mut s = QueueStats::new(&*self.info.name, self.js.dlq_name(&self.info.name));
        // The queue's stream (work-queue retention, one consumer) holds exactly the
        // messages not yet delivered plus those delivered and not acknowledged. Either
        // count of the consumer can be off for a moment: `num_pending` may not yet count a
        // message whose publish the stream has just confirmed (the consumer learns of new
        // messages after the stream stores them), and a server that was killed can come
        // back counting as pending deliveries whose acknowledgements it had not yet written
        // to disk. What the stream holds settles both: ready is at least what it holds
        // beyond the deliveries, and what it holds bounds what can be in flight.
        let in_flight_reported = c.num_ack_pending as u64;
        s.counts.ready = c
            .num_pending
            .max(state.messages.saturating_sub(in_flight_reported));
        s.counts.in_flight = in_flight_reported.min(state.messages.saturating_sub(s.counts.ready));
        s.counts.enqueued = state.last_sequence;
        s.counts.retried = count(Event::Retried);
        s.counts.dead_lettered = count(Event::DeadLettered);
        s.counts.expired = count(Event::Expired);
        s.counts.deleted = count(Event::Deleted);
        let removed = state.last_sequence.saturating_sub(state.messages);
        s.counts.acked = removed.saturating_sub(s.counts.dead_lettered + count(Event::Dropped));
        s.dlq_size = count_entries(&self.js, &self.info.name).await?;
        s.oldest_ready_at_ms = (s.counts.ready > 0 && state.messages > 0)
            .then(|| (state.first_timestamp.unix_timestamp_nanos() / 1_000_000) as u64);
        Ok(s)
    }
}

/// The queue's outcomes as futures: what both the blocking handle (each run to
/// completion on the connection's runtime) and the async one
/// ([`crate::AsyncJetStreamQueue`]) call.
impl JetStreamQueue {
    pub(crate) async fn ack_all_async(&self, msgs: &[JetStreamMessage]) -> Result<()> {
        self.record_successes(msgs);
        let conn = &self.js.inner.conn;
        let acks = msgs
            .iter()
            .map(|m| conn.ack_confirmed(&m.reply, acks::ack()));
        for r in futures_util::future::join_all(acks).await {
            r?;
        }
        for m in msgs {
            self.count_reprocessed(m).await?;
        }
        Ok(())
    }

    pub(crate) async fn extend_async(&self, msg: &JetStreamMessage) -> Result<()> {
        let key = (msg.id, msg.generation);
        let until = self.hold_until(std::time::Instant::now());
        self.info.holds.extend(key, until);
        self.js
            .inner
            .conn
            .ack_confirmed(&msg.reply, acks::progress())
            .await
    }

    pub(crate) async fn retry_and_release(
        &self,
        msg: &JetStreamMessage,
        report: &FailureReport<'_>,
        retry_at_ms: u64,
    ) -> Result<FailureOutcome> {
        let outcome = self.retry_async(msg, report, retry_at_ms).await;
        self.release_hold(msg);
        outcome
    }

    pub(crate) async fn dead_letter_async(
        &self,
        msg: &JetStreamMessage,
        report: &FailureReport<'_>,
    ) -> Result<()> {
        let now = now_ms();
        let attempt = report.attempt(msg.attempt(), now);
        let moved = self
            .js
            .move_to_dlq(msg, report.failure, report, Some(attempt), msg.attempt, now)
            .await;
        self.release_hold(msg);
        moved
    }
}

/// The blocking handle: each operation's future run to completion on the connection's
/// runtime.
impl MessageQueue for JetStreamQueue {
    type Message = JetStreamMessage;
    type Dlq = JetStreamDlq;

    fn name(&self) -> &str {
        &self.info.name
    }
    fn dlq(&self) -> JetStreamDlq {
        self.dlq_handle()
    }
    fn with_policy(&self, max_attempts: u32, lease: Duration) -> Result<Self> {
        let options = self
            .options
            .clone()
            .max_attempts(max_attempts)
            .visibility_timeout(lease);
        self.js.queue_with(&self.info.name, options)
    }
    fn now_ms(&self) -> u64 {
        now_ms()
    }
    fn enqueue_with(
        &self,
        payload: impl AsRef<[u8]>,
        options: &EnqueueOptions,
    ) -> Result<MessageId> {
        let ids = self
            .js
            .inner
            .conn
            .run(self.publish_all(std::iter::once(payload.as_ref()), options))?;
        Ok(ids[0])
    }
    fn enqueue_batch<P: AsRef<[u8]>>(&self, payloads: &[P]) -> Result<Vec<MessageId>> {
        let options = EnqueueOptions::default();
        self.js
            .inner
            .conn
            .run(self.publish_all(payloads.iter().map(|p| p.as_ref()), &options))
    }
    fn lease(&self, max: usize) -> Result<Vec<JetStreamMessage>> {
        self.js.inner.conn.run(self.lease_async(max, None))
    }
    fn lease_wait(&self, max: usize, timeout: Duration) -> Result<Vec<JetStreamMessage>> {
        self.js.inner.conn.run(self.lease_async(max, Some(timeout)))
    }
    fn ack_all(&self, msgs: &[JetStreamMessage]) -> Result<()> {
        self.js.inner.conn.run(self.ack_all_async(msgs))
    }
    fn extend(&self, msg: &JetStreamMessage, _visibility: Duration) -> Result<()> {
        self.js.inner.conn.run(self.extend_async(msg))
    }
    fn retry(
        &self,
        msg: &JetStreamMessage,
        report: &FailureReport<'_>,
        retry_at_ms: u64,
    ) -> Result<FailureOutcome> {
        self.js
            .inner
            .conn
            .run(self.retry_and_release(msg, report, retry_at_ms))
    }
    fn dead_letter(&self, msg: &JetStreamMessage, report: &FailureReport<'_>) -> Result<()> {
        self.js.inner.conn.run(self.dead_letter_async(msg, report))
    }
    fn stats(&self) -> Result<QueueStats> {
        self.js.inner.conn.run(self.stats_async())
    }
}
