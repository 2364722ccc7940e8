//! A queue handle: produce, consume, and report outcomes.
//!
//! Delivery follows the lease model: [`Queue::lease`] counts the delivery in the log before it
//! hands the message out (so a process that dies in a handler still used up an attempt), and
//! the consumer then reports [`Queue::ack`], [`Queue::retry`] or [`Queue::dead_letter`]. A
//! lease not reported before its deadline makes the message visible again. Visible messages
//! are served in (visible-at, enqueue order); a message waiting out a backoff is not visible,
//! so it never blocks the ones behind it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::api::config::QueueOptions;
use crate::api::dlq::Dlq;
use crate::api::store::Store;
use crate::api::types::{Attempt, DlqMetadata, Failure, FailureInfo, MessageId};
use crate::engine::record::{self, Decoded, Op, Put, PutCause, PutMeta, QueueId};
use crate::engine::state::{Msg, Place, State};
use crate::engine::{op_entry, Batch};
use crate::error::{Error, Result};
use crate::storage::log::Record;

/// Options of one enqueue.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
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
    id: MessageId,
    queue: Arc<str>,
    attempt: u32,
    /// The message's replay generation at this delivery: with `attempt`, it names the
    /// delivery (a replay that resets the attempt count hands attempt numbers out again).
    generation: u32,
    record: Record,
    payload: std::ops::Range<usize>,
    enqueued_at_ms: u64,
    leased_at_ms: u64,
    attributes: BTreeMap<String, String>,
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
    /// Decodes a payload enqueued with [`Queue::enqueue_typed`].
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

/// How a failure report moves the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureOutcome {
    /// Retried: visible again at this time (ms).
    Retried {
        /// Next visible time.
        visible_at_ms: u64,
    },
    /// Moved to the DLQ.
    DeadLettered,
}

/// A failure report: what failed, how long the handler ran, and who ran it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailureReport<'a> {
    /// The failure.
    pub failure: &'a Failure,
    /// How long the handler ran.
    pub duration: Duration,
    /// The worker's name.
    pub worker: Option<&'a str>,
    /// Tags to add to the DLQ entry if the message is dead-lettered.
    pub tags: BTreeMap<String, String>,
}

impl<'a> FailureReport<'a> {
    /// A report with no duration or worker.
    pub fn new(failure: &'a Failure) -> Self {
        FailureReport {
            failure,
            duration: Duration::ZERO,
            worker: None,
            tags: BTreeMap::new(),
        }
    }
    /// Sets the duration.
    pub fn duration(mut self, d: Duration) -> Self {
        self.duration = d;
        self
    }
    /// Sets the worker.
    pub fn worker(mut self, w: &'a str) -> Self {
        self.worker = Some(w);
        self
    }
}

/// Counts of a queue and its DLQ.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct QueueStats {
    /// Queue name.
    pub name: String,
    /// DLQ name.
    pub dlq_name: String,
    /// Messages waiting (visible now or later).
    pub ready: u64,
    /// Messages leased.
    pub in_flight: u64,
    /// Enqueued (since the oldest record in the log).
    pub enqueued: u64,
    /// Acked.
    pub acked: u64,
    /// Failed deliveries retried.
    pub retried: u64,
    /// Moved to the DLQ.
    pub dead_lettered: u64,
    /// Expired by TTL.
    pub expired: u64,
    /// Deleted.
    pub deleted: u64,
    /// Entries in the DLQ.
    pub dlq_size: u64,
    /// Enqueue time of the oldest waiting message.
    pub oldest_ready_at_ms: Option<u64>,
}

/// A handle on one queue. Cheap to clone; usable from any number of threads.
#[derive(Clone)]
pub struct Queue {
    store: Store,
    id: QueueId,
    name: Arc<str>,
}

impl std::fmt::Debug for Queue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queue").field("name", &self.name).finish()
    }
}

impl Queue {
    pub(crate) fn new(store: Store, id: QueueId, name: String) -> Self {
        Queue {
            store,
            id,
            name: name.into(),
        }
    }

    /// The queue's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The options in force for this queue: those it was opened with (see
    /// [`Store::queue_with`]), or the store's defaults.
    pub fn options(&self) -> QueueOptions {
        self.store.queue_options(self.id)
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// This queue's DLQ.
    pub fn dlq(&self) -> Dlq {
        Dlq::new(self.store.clone(), self.id, self.name.to_string())
    }

    /// Enqueues one message; returns its id.
    pub fn enqueue(&self, payload: impl AsRef<[u8]>) -> Result<MessageId> {
        self.enqueue_with(payload, &EnqueueOptions::default())
    }

    /// Enqueues one message with options.
    pub fn enqueue_with(
        &self,
        payload: impl AsRef<[u8]>,
        options: &EnqueueOptions,
    ) -> Result<MessageId> {
        let ids = self.enqueue_many(std::iter::once(payload.as_ref()), options)?;
        Ok(ids[0])
    }

    /// Enqueues a batch with one write and one fsync; returns the ids in order.
    pub fn enqueue_batch<P: AsRef<[u8]>>(&self, payloads: &[P]) -> Result<Vec<MessageId>> {
        self.enqueue_many(
            payloads.iter().map(|p| p.as_ref()),
            &EnqueueOptions::default(),
        )
    }

    /// Enqueues a serde value, encoded with bincode; read it back with [`Message::decode`].
    pub fn enqueue_typed<T: Serialize>(&self, value: &T) -> Result<MessageId> {
        let bytes = bincode::serde::encode_to_vec(value, bincode::config::standard())
            .map_err(|e| Error::Codec(e.to_string()))?;
        self.enqueue(bytes)
    }

    fn enqueue_many<'p>(
        &self,
        payloads: impl Iterator<Item = &'p [u8]>,
        options: &EnqueueOptions,
    ) -> Result<Vec<MessageId>> {
        let max = self.store.config().max_message_size;
        let now = self.store.now();
        let defaults = self.store.queue_options(self.id);
        let ttl = options.ttl.or(defaults.default_ttl);
        let visible_at = now + options.delay.map(|d| d.as_millis() as u64).unwrap_or(0);
        let key = options
            .idempotency_key
            .as_ref()
            .map(|k| format!("{}:{k}", self.id));
        let mut st = self.store.engine().lock();
        if let Some(k) = &key {
            let window = self.store.config().idempotency_window.as_millis() as u64;
            st.expire_idempotency(now.saturating_sub(window));
            if let Some(&(id, _)) = st.idempotency.get(k) {
                return Ok(vec![id]);
            }
        }
        let hint = payloads.size_hint().0;
        let mut batch: Batch<'p> = Vec::with_capacity(hint);
        let mut ids = Vec::with_capacity(hint);
        // Room for the record header and metadata, so that encoding does not reallocate.
        let meta_room = 64
            + key.as_ref().map_or(0, |k| k.len())
            + options
                .attributes
                .iter()
                .map(|(k, v)| k.len() + v.len() + 2)
                .sum::<usize>();
        for (next, payload) in (st.next_id..).zip(payloads) {
            if payload.len() > max {
                return Err(Error::TooLarge {
                    size: payload.len(),
                    max,
                });
            }
            let meta = PutMeta {
                id: next,
                queue: self.id,
                enqueued_at: now,
                visible_at,
                expires_at: ttl.map(|t| now + t.as_millis() as u64),
                attributes: options.attributes.clone(),
                idempotency_key: key.clone(),
                cause: PutCause::Enqueue,
            };
            let mut body = Vec::with_capacity(payload.len() + meta_room);
            record::encode_put(&mut body, &meta, payload)?;
            batch.push((body, Decoded::Put(Put { meta, payload })));
            ids.push(next);
        }
        let effects = self.store.engine().write_locked(&mut st, batch)?;
        drop(st);
        self.store.finish(effects)?;
        Ok(ids)
    }

    /// Leases up to `max` visible messages for the queue's visibility timeout.
    pub fn lease(&self, max: usize) -> Result<Vec<Message>> {
        let vis = self.store.queue_options(self.id).visibility_timeout;
        self.lease_for(max, vis)
    }

    /// Leases up to `max` visible messages for `visibility`. Each delivery is counted in the
    /// log before this returns. A message whose earlier delivery ended without an outcome
    /// and that has used all its attempts goes to the DLQ instead of being delivered.
    pub fn lease_for(&self, max: usize, visibility: Duration) -> Result<Vec<Message>> {
        self.lease_inner(max, visibility, None)
    }

    /// Acknowledges `done` and leases up to `max` more messages in one write sharing one
    /// fsync: a consumer's loop at half the durable cost of [`Queue::ack`] then
    /// [`Queue::lease`]. If the ack is refused (the lease was lost), nothing is leased.
    pub fn ack_and_lease(&self, done: &Message, max: usize) -> Result<Vec<Message>> {
        let vis = self.store.queue_options(self.id).visibility_timeout;
        self.lease_inner(max, vis, Some(done))
    }

    fn lease_inner(
        &self,
        max: usize,
        visibility: Duration,
        ack: Option<&Message>,
    ) -> Result<Vec<Message>> {
        if max == 0 && ack.is_none() {
            return Ok(Vec::new());
        }
        let now = self.store.now();
        let options = self.store.queue_options(self.id);
        let deadline = now + visibility.as_millis().max(1) as u64;
        let mut st = self.store.engine().lock();
        let mut batch: Batch<'static> = Vec::new();
        if let Some(done) = ack {
            self.check_lease(&st, done)?;
            batch.push(op_entry(Op::Ack {
                at: now,
                ids: vec![done.id],
            })?);
        }
        st.expire_leases(self.id, now);
        let mut ids = Vec::new();
        // The message acked in this write is taken already: if its lease just expired (it
        // was acked late but before anyone else took it), it is ready now in the index, and
        // leasing it again here would spend a slot on a message the ack removes.
        let mut popped: Vec<MessageId> = ack.map(|m| m.id).into_iter().collect();
        let mut held_back = Vec::new();
        // The message acked in this write is no longer in flight.
        let mut suspect_busy = st.suspect_in_flight(self.id, ack.map(|m| m.id));
        while ids.len() < max {
            let Some(id) = st.pop_visible(self.id, now) else {
                break;
            };
            if popped.contains(&id) {
                // A second ready-list entry of a message taken in this call.
                continue;
            }
            popped.push(id);
            if st.suspects.contains(&id) {
                // Messages in flight when the process died are tried one at a time, so the
                // one that kills the process cannot take the others down with it.
                if suspect_busy {
                    held_back.push(id);
                    continue;
                }
            }
            let Some(m) = st.msgs.get(&id).copied() else {
                continue;
            };
            let extra = st.extras.get(&id);
            if extra
                .and_then(|e| e.expires_at)
                .is_some_and(|t| t <= self.store.expiry_now())
            {
                let op = self.expire_op(&st, id, m, now, &options)?;
                batch.push(op_entry(op)?);
                continue;
            }
            if m.place == Place::ReadyAfterLostLease && m.attempts >= options.max_attempts {
                let cut = extra.is_some_and(|e| e.lease_cut_by_restart);
                let failure = if cut {
                    Failure::transient(
                        "ConsumerDied",
                        format!(
                            "the process died during delivery {} of {} (no ack or failure was reported)",
                            m.attempts, options.max_attempts
                        ),
                    )
                } else {
                    Failure::transient(
                        "LeaseExpired",
                        format!(
                            "delivery {} of {} ended without an ack or failure before its lease expired",
                            m.attempts, options.max_attempts
                        ),
                    )
                };
                let report = FailureReport::new(&failure);
                let op = self.dead_letter_op(&st, id, m, &report, now, false)?;
                batch.push(op_entry(op)?);
                continue;
            }
            // Only a suspect actually delivered holds the others back: one that expired or
            // went to the DLQ above is not in flight.
            suspect_busy |= st.suspects.contains(&id);
            ids.push(id);
        }
        for &id in &held_back {
            st.push_back_ready(id);
        }
        if !ids.is_empty() {
            batch.push(op_entry(Op::Lease {
                at: now,
                deadline,
                ids: ids.clone(),
            })?);
        }
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        let effects = match self.store.engine().write_locked(&mut st, batch) {
            Ok(e) => e,
            Err(e) => {
                for id in popped.into_iter().filter(|id| !held_back.contains(id)) {
                    st.push_back_ready(id);
                }
                return Err(e);
            }
        };
        let leased: Vec<(MessageId, Msg, u32)> = ids
            .iter()
            .filter_map(|id| st.msgs.get(id).map(|m| (*id, *m, generation_of(&st, *id))))
            .collect();
        drop(st);
        self.store.finish(effects)?;
        leased
            .into_iter()
            .map(|(id, m, generation)| self.load_message(id, m, generation, now))
            .collect()
    }

    /// Like [`Queue::lease`], but waits up to `timeout` for a message to become visible.
    pub fn lease_wait(&self, max: usize, timeout: Duration) -> Result<Vec<Message>> {
        let vis = self.store.queue_options(self.id).visibility_timeout;
        let give_up = Instant::now() + timeout;
        loop {
            let got = self.lease_for(max, vis)?;
            if !got.is_empty() {
                return Ok(got);
            }
            let now_instant = Instant::now();
            if now_instant >= give_up {
                return Ok(got);
            }
            let mut st = self.store.engine().lock();
            let now = self.store.now();
            let wait_ms = st
                .next_visible_at(self.id)
                .map(|t| t.saturating_sub(now))
                .unwrap_or(u64::MAX);
            let until = give_up.min(now_instant + Duration::from_millis(wait_ms.clamp(1, 60_000)));
            if wait_ms > 0 {
                self.store.engine().wait_ready(&mut st, until);
            }
        }
    }

    fn load_message(
        &self,
        id: MessageId,
        m: Msg,
        generation: u32,
        leased_at: u64,
    ) -> Result<Message> {
        let record = self.store.engine().read_record(m.payload_pos)?;
        let (meta, payload) = match record::decode(&record) {
            Ok(Decoded::Put(put)) => {
                let range = record::put_payload(&record)?;
                (put.meta, range)
            }
            _ => return Err(self.store.engine().bad_content(m.payload_pos)),
        };
        Ok(Message {
            id,
            queue: Arc::clone(&self.name),
            attempt: m.attempts,
            generation,
            enqueued_at_ms: meta.enqueued_at,
            leased_at_ms: leased_at,
            attributes: meta.attributes,
            record,
            payload,
        })
    }

    /// The message's entry if `msg` is its current lease.
    fn check_lease(&self, st: &State, msg: &Message) -> Result<Msg> {
        match st.msgs.get(&msg.id) {
            Some(m)
                if m.place == Place::Leased
                    && m.attempts == msg.attempt
                    && m.queue == self.id
                    && generation_of(st, msg.id) == msg.generation =>
            {
                Ok(*m)
            }
            Some(_) => Err(Error::InvalidState {
                id: msg.id,
                expected: "leased by this delivery",
            }),
            None => Err(Error::NotFound(msg.id)),
        }
    }

    /// Acknowledges a delivered message: it is removed.
    pub fn ack(&self, msg: &Message) -> Result<()> {
        self.ack_all(std::slice::from_ref(msg))
    }

    /// Acknowledges several delivered messages with one record.
    pub fn ack_all(&self, msgs: &[Message]) -> Result<()> {
        let now = self.store.now();
        self.store.commit_with(|st| {
            for m in msgs {
                self.check_lease(st, m)?;
            }
            let ids = msgs.iter().map(|m| m.id).collect();
            Ok((vec![op_entry(Op::Ack { at: now, ids })?], ()))
        })
    }

    /// Extends a lease (heartbeat) to `visibility` from now.
    pub fn extend(&self, msg: &Message, visibility: Duration) -> Result<()> {
        let deadline = self.store.now() + visibility.as_millis().max(1) as u64;
        self.store.commit_with(|st| {
            self.check_lease(st, msg)?;
            let ids = vec![msg.id];
            Ok((vec![op_entry(Op::Extend { deadline, ids })?], ()))
        })
    }

    /// Gives a lease back without an outcome: visible again after `delay`; the delivery
    /// stays counted.
    pub fn release(&self, msg: &Message, delay: Duration) -> Result<()> {
        let visible_at = self.store.now() + delay.as_millis() as u64;
        self.store.commit_with(|st| {
            self.check_lease(st, msg)?;
            let op = Op::Release {
                id: msg.id,
                visible_at,
            };
            Ok((vec![op_entry(op)?], ()))
        })
    }

    /// Reports a failed delivery. A permanent failure, or one on the last allowed attempt,
    /// moves the message to the DLQ; otherwise it becomes visible again at `retry_at_ms`.
    pub fn retry(
        &self,
        msg: &Message,
        report: &FailureReport<'_>,
        retry_at_ms: u64,
    ) -> Result<FailureOutcome> {
        let options = self.store.queue_options(self.id);
        let now = self.store.now();
        self.store.commit_with(|st| {
            let m = self.check_lease(st, msg)?;
            if report.failure.is_permanent() || m.attempts >= options.max_attempts {
                let op = self.dead_letter_op(st, msg.id, m, report, now, true)?;
                return Ok((vec![op_entry(op)?], FailureOutcome::DeadLettered));
            }
            let extra = st.extras.get(&msg.id);
            let mut history = self
                .store
                .engine()
                .read_history(extra.and_then(|e| e.history_pos))?;
            history.first_received_at = extra.and_then(|e| e.first_received_at);
            let max_history = self.store.config().max_history;
            history.push(attempt_of(m.attempts, now, report), max_history);
            // At least one millisecond ahead: a message retried at once goes behind the
            // messages already waiting, never ahead of them on a tie.
            let visible_at = retry_at_ms.max(now + 1);
            let op = Op::Retry {
                id: msg.id,
                visible_at,
                history,
            };
            let outcome = FailureOutcome::Retried {
                visible_at_ms: visible_at,
            };
            Ok((vec![op_entry(op)?], outcome))
        })
    }

    /// Moves a delivered message to the DLQ at once (a permanent failure).
    pub fn dead_letter(&self, msg: &Message, report: &FailureReport<'_>) -> Result<()> {
        let now = self.store.now();
        self.store.commit_with(|st| {
            let m = self.check_lease(st, msg)?;
            let op = self.dead_letter_op(st, msg.id, m, report, now, true)?;
            Ok((vec![op_entry(op)?], ()))
        })
    }

    /// Builds the dead-letter record of message `id`.
    pub(crate) fn dead_letter_op(
        &self,
        st: &State,
        id: MessageId,
        m: Msg,
        report: &FailureReport<'_>,
        now: u64,
        record_attempt: bool,
    ) -> Result<Op> {
        let config = self.store.config();
        let extra = st.extras.get(&id);
        let mut history = self
            .store
            .engine()
            .read_history(extra.and_then(|e| e.history_pos))?;
        if record_attempt
            || report.failure.kind == "ConsumerDied"
            || report.failure.kind == "LeaseExpired"
        {
            history.push(attempt_of(m.attempts, now, report), config.max_history);
        }
        let f = report.failure;
        Ok(Op::DeadLetter {
            id,
            failure: FailureInfo {
                error_kind: f.kind.clone(),
                error_message: f.message.clone(),
                details: f.details().map(str::to_string),
                stack_trace: if config.include_stack_traces {
                    f.stack_trace().map(str::to_string)
                } else {
                    None
                },
                attempts: history.attempts,
                attempts_dropped: history.dropped,
                failed_at_ms: now,
                context: f.context().clone(),
            },
            dlq: DlqMetadata {
                dead_lettered_at_ms: now,
                worker: report.worker.map(str::to_string),
                environment: config.environment.clone(),
                code_version: config.code_version.clone(),
                tags: report.tags.clone(),
                expires_at_ms: config.retention.map(|r| now + r.as_millis() as u64),
            },
            first_received_at: extra.and_then(|e| e.first_received_at),
        })
    }

    /// The record that expires message `id` (TTL): to the DLQ or deleted.
    pub(crate) fn expire_op(
        &self,
        st: &State,
        id: MessageId,
        m: Msg,
        now: u64,
        options: &QueueOptions,
    ) -> Result<Op> {
        if options.expired_to_dlq {
            let failure = Failure::permanent(
                crate::engine::state::EXPIRED_KIND,
                "the message's time to live passed",
            );
            let report = FailureReport::new(&failure);
            self.dead_letter_op(st, id, m, &report, now, false)
        } else {
            Ok(Op::Delete {
                at: now,
                ids: vec![id],
                expired: true,
            })
        }
    }

    /// Counts of the queue and its DLQ, read from counters (no scan).
    pub fn stats(&self) -> QueueStats {
        let st = self.store.engine().lock();
        let qs = &st.queues[self.id as usize];
        let c = qs.counters;
        QueueStats {
            name: self.name.to_string(),
            dlq_name: self.store.dlq_name(&self.name),
            ready: c.ready,
            in_flight: c.in_flight,
            enqueued: c.enqueued,
            acked: c.acked,
            retried: c.retried,
            dead_lettered: c.dead_lettered,
            expired: c.expired,
            deleted: c.deleted,
            dlq_size: qs.dlq_order.len() as u64,
            oldest_ready_at_ms: st.next_visible_at(self.id).filter(|_| c.ready > 0),
        }
    }

    /// Messages waiting in the queue (visible now or later).
    pub fn len(&self) -> u64 {
        self.store.engine().lock().queues[self.id as usize]
            .counters
            .ready
    }

    /// True when no message waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The replay generation of message `id`.
fn generation_of(st: &State, id: MessageId) -> u32 {
    st.extras.get(&id).map_or(0, |e| e.generation)
}

fn attempt_of(number: u32, now: u64, report: &FailureReport<'_>) -> Attempt {
    Attempt {
        number,
        at_ms: now,
        error_kind: report.failure.kind.clone(),
        error_message: report.failure.message.clone(),
        details: report.failure.details().map(str::to_string),
        duration_ms: report.duration.as_millis() as u64,
        worker: report.worker.map(str::to_string),
    }
}
