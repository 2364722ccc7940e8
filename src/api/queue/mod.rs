//! A queue handle: produce, consume, and report outcomes.
//!
//! Delivery follows the lease model: [`Queue::lease`] counts the delivery in the log before it
//! hands the message out (so a process that dies in a handler still used up an attempt), and
//! the consumer then reports [`Queue::ack`], [`Queue::retry`] or [`Queue::dead_letter`]. A
//! lease not reported before its deadline makes the message visible again. Visible messages
//! are served in (visible-at, enqueue order); a message waiting out a backoff is not visible,
//! so it never blocks the ones behind it.
//!
//! The handle is split by job: `message` (what is sent and delivered), `lease`
//! (delivery), `outcome` (ack, retry, dead-letter), `browse` (listing the queue's messages
//! by state), `operator` (an operator's retry now, delay, move to the DLQ and delete); this
//! file holds the handle, enqueue and the counts.

mod browse;
mod lease;
mod message;
mod operator;
mod outcome;

use std::sync::Arc;

use serde::Serialize;

use crate::api::core::config::QueueOptions;
use crate::api::core::durations::DurationHistogram;
use crate::api::core::holders::Holder;
use crate::api::core::store::{queue_name, Store};
use crate::api::core::types::MessageId;
use crate::api::dlq::Dlq;
use crate::api::trace::spans;
use crate::engine::record::{Decoded, Put, PutCause, PutMeta, QueueId};
use crate::engine::state::State;
use crate::engine::wire;
use crate::engine::Batch;
use crate::error::{require, Error, Result};

pub use crate::engine::state::QueueCounters;
pub use browse::{MessageCounts, QueuedMessage, QueuedState};
pub use message::{EnqueueOptions, Message};
pub use operator::{ActionReport, MessageAction, MOVED_BY_OPERATOR};
pub use outcome::{FailureOutcome, FailureReport};

/// Counts of a queue and its DLQ.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct QueueStats {
    /// Queue name.
    pub name: String,
    /// DLQ name.
    pub dlq_name: String,
    /// The queue's counters: waiting, in flight, enqueued, acked, retried, dead-lettered,
    /// expired, deleted (in the serde form, fields of this struct).
    #[serde(flatten)]
    pub counts: QueueCounters,
    /// Entries in the DLQ.
    pub dlq_size: u64,
    /// Since when the oldest waiting message has been visible: its enqueue time (or the end
    /// of its delay or backoff), or, for a message whose lease a restart cut, when the
    /// lease was lost.
    pub oldest_ready_at_ms: Option<u64>,
    /// Messages refused by the queue's `max_pending` since the store opened (not kept
    /// across a reopen: a refused enqueue writes nothing).
    #[serde(default)]
    pub refused: u64,
}

impl QueueStats {
    /// The counts of an empty queue `name` whose DLQ is `dlq_name`: a backend fills in
    /// what it counted.
    pub fn new(name: impl Into<String>, dlq_name: impl Into<String>) -> Self {
        QueueStats {
            name: name.into(),
            dlq_name: dlq_name.into(),
            ..Self::default()
        }
    }
}

/// A handle on one queue. Cheap to clone; usable from any number of threads.
///
/// A consumer leases messages (each delivery is counted in the log before it is handed
/// out), then reports an outcome: [`Queue::ack`], [`Queue::retry`] (visible again later,
/// or to the DLQ on the last attempt) or [`Queue::dead_letter`]. A [`crate::WorkerPool`]
/// does this loop for a handler.
///
/// ```
/// use deadletter::{Config, Failure, Store};
/// use deadletter::queue::{FailureOutcome, FailureReport, QueueOptions};
///
/// # let dir = tempfile::tempdir().unwrap();
/// let store = Store::open(&dir, Config::fast())?;
/// let emails = store.queue_with("emails", QueueOptions::default().max_attempts(2))?;
/// emails.enqueue(b"ana@example.com")?;
/// emails.enqueue(b"not an address")?;
///
/// let batch = emails.lease(10)?;
/// assert_eq!(batch[0].payload(), b"ana@example.com");
/// emails.ack(&batch[0])?;
///
/// // A transient failure is retried at the given time (here at once), until the last
/// // attempt, which moves the message to the DLQ with its history.
/// let timeout = Failure::transient("Timeout", "the mail server did not answer");
/// let outcome = emails.retry(&batch[1], &FailureReport::new(&timeout), 0)?;
/// assert!(matches!(outcome, FailureOutcome::Retried { .. }));
/// # std::thread::sleep(std::time::Duration::from_millis(2));
/// let again = emails.lease(1)?;
/// assert_eq!(again[0].attempt(), 2);
/// let outcome = emails.retry(&again[0], &FailureReport::new(&timeout), 0)?;
/// assert_eq!(outcome, FailureOutcome::DeadLettered);
/// assert!(emails.is_empty());
/// assert_eq!(emails.dlq().len(), 1);
/// # Ok::<(), deadletter::Error>(())
/// ```
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

    /// The same queue with its own copy of the name: each message it hands out counts a
    /// reference on that copy, so a pool worker with its own handle touches no reference
    /// count another worker's messages touch.
    pub(crate) fn worker_handle(&self) -> Queue {
        Queue::new(self.store.clone(), self.id, self.name.to_string())
    }

    /// Registers a worker pool of this process that works on this queue, so that a
    /// listing of its in-flight messages names their holder (`core::holders`).
    pub(crate) fn register_holder(&self, pool: std::sync::Weak<dyn Holder>) {
        self.store.holders().register(self.id, pool);
    }

    /// The queue's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The queue's id in the store's index.
    pub(crate) fn id(&self) -> QueueId {
        self.id
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
        let now = self.store.now();
        let defaults = self.store.queue_options(self.id);
        let ttl = options.ttl.or(defaults.default_ttl);
        let visible_at = now + options.delay.map(|d| d.as_millis() as u64).unwrap_or(0);
        let key = options
            .idempotency_key
            .as_ref()
            .map(|k| format!("{}:{k}", self.id));
        let payloads: Vec<&'p [u8]> = payloads.collect();
        // Room for the record header and metadata, so that encoding does not reallocate.
        let meta_room = 64
            + key.as_ref().map_or(0, |k| k.len())
            + options
                .attributes
                .iter()
                .map(|(k, v)| k.len() + v.len() + 2)
                .sum::<usize>();
        let ids = self.store.commit_with(|st| {
            if let Some(k) = &key {
                let window = self.store.config().idempotency_window.as_millis() as u64;
                st.expire_idempotency(now.saturating_sub(window));
                if let Some(&(id, _)) = st.idempotency.get(k) {
                    return Ok((Vec::new(), vec![id]));
                }
            }
            if let Some(limit) = defaults.max_pending {
                let c = st.queues[self.id as usize].counters;
                if c.ready + c.in_flight + payloads.len() as u64 > limit {
                    self.store.count_refused(self.id, payloads.len() as u64);
                    return Err(Error::QueueFull {
                        queue: self.name.to_string(),
                        limit,
                    });
                }
            }
            let mut batch: Batch<'p> = Vec::with_capacity(payloads.len());
            let mut ids = Vec::with_capacity(payloads.len());
            for (next, payload) in (st.next_id..).zip(payloads) {
                self.store.check_size(payload.len())?;
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
                wire::encode_put(&mut body, &meta, payload)?;
                batch.push((body, Decoded::Put(Put { meta, payload })));
                ids.push(next);
            }
            Ok((batch, ids))
        })?;
        spans::enqueued(&self.name, &ids, &options.attributes);
        Ok(ids)
    }

    /// Counts of the queue and its DLQ, read from counters (no scan).
    pub fn stats(&self) -> QueueStats {
        let st = self.store.engine().lock();
        let qs = &st.queues[self.id as usize];
        let counts = qs.counters;
        QueueStats {
            name: self.name.to_string(),
            dlq_name: self.store.dlq_name(&self.name),
            counts,
            dlq_size: qs.dlq_order.len() as u64,
            oldest_ready_at_ms: st
                .oldest_waiting_since(self.id)
                .filter(|_| counts.ready > 0),
            refused: self.store.refused(self.id),
        }
    }

    /// Records how long a handler ran for one delivery of this queue (the worker pool
    /// does); read back in [`QueueMetrics::handler_duration`](crate::metrics::QueueMetrics).
    pub fn observe_handler(&self, duration: std::time::Duration) {
        self.store.handler_durations(self.id).observe(duration);
    }

    /// Records how long handlers ran for several deliveries, with one addition per
    /// histogram bucket they fall in (the worker pool records a batch at a time).
    pub fn observe_handlers(&self, durations: &[std::time::Duration]) {
        if !durations.is_empty() {
            self.store.handler_durations(self.id).observe_all(durations);
        }
    }

    /// Creates this queue's handler-duration histogram, empty, if it has none yet (a
    /// worker pool starting on it does, so that its metrics show zero counts until the
    /// first delivery rather than no series).
    pub(crate) fn declare_handler_durations(&self) {
        self.store.handler_durations(self.id);
    }

    /// The handler durations recorded for this queue: `None` until a pool starts on it or
    /// a run is recorded.
    pub(crate) fn handler_duration(&self) -> Option<DurationHistogram> {
        self.store.handler_duration_snapshot(self.id)
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

impl Store {
    /// Opens queue `name` with the configured defaults, creating it if new.
    pub fn queue(&self, name: &str) -> Result<Queue> {
        self.queue_with(name, self.config().queue_defaults.clone())
    }

    /// Opens queue `name` with its own options, creating it if new.
    pub fn queue_with(&self, name: &str, options: QueueOptions) -> Result<Queue> {
        require(options.max_attempts > 0, "max_attempts of zero")?;
        let id = self.declare(name)?;
        self.set_queue_options(id, options);
        Ok(Queue::new(self.clone(), id, name.to_string()))
    }

    /// An existing queue, or [`Error::UnknownQueue`].
    pub fn existing_queue(&self, name: &str) -> Result<Queue> {
        let id = self.queue_id(name)?;
        Ok(Queue::new(self.clone(), id, name.to_string()))
    }

    /// A handle on queue `q` (the caller holds the state lock and passes it).
    pub(crate) fn queue_handle(&self, q: QueueId, st: &State) -> Queue {
        Queue::new(self.clone(), q, queue_name(st, q))
    }
}

/// The replay generation of message `id`.
fn generation_of(st: &State, id: MessageId) -> u32 {
    st.extras.get(&id).map_or(0, |e| e.generation)
}
