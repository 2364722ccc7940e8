//! The core contract: the three traits every backend implements, holding the operations
//! users call.
//!
//! - [`Delivery`]: a leased message (payload, id, attempt number, attributes);
//! - [`MessageQueue`]: produce (one or a batch), lease (up to `n`, waiting or not), then
//!   ack (one or many), retry, dead-letter or extend; the retry limit and lease length of
//!   a handle; counts;
//! - [`DeadLetterQueue`]: browse, count, analyse, replay, mark, delete and purge entries,
//!   and size alerts.
//!
//! What every backend promises, and the conformance suite checks:
//! - an enqueue returns once the message is durable by the backend's own standard;
//! - a delivery is counted before it is handed out ([`Delivery::attempt`] is 1 for the
//!   first), so a consumer that dies in its handler has used up an attempt;
//! - a retry makes the message visible again no earlier than the time asked, and a later
//!   message is never held up behind it;
//! - a permanent failure, or a failure on the last allowed attempt, moves the message to
//!   the DLQ with its whole envelope (payload byte for byte, metadata, failure, every
//!   attempt kept, DLQ metadata); it is then in the DLQ exactly once and no longer in the
//!   queue;
//! - browsing a DLQ changes nothing; replay, delete and purge follow [`ReplayOptions`]
//!   and [`Filter`] as documented there.
//!
//! Errors are the crate's [`Error`]; a backend reports what is its own (a lost
//! connection, a server refusal) as [`Error::Backend`].
//!
//! [`Error`]: crate::Error
//! [`Error::Backend`]: crate::Error::Backend

use std::collections::BTreeMap;
use std::time::Duration;

use serde::de::DeserializeOwned;

use crate::api::core::alert::DlqAlert;
use crate::api::core::clock::{Clock, SystemClock};
use crate::api::core::types::{DeadLetter, MessageId};
use crate::api::dlq::{
    generation_and_payload, replay_transformed_with, stale_correction, Correction, TransformReport,
};
use crate::api::dlq::{
    Analysis, Cursor, DeadLetterSummary, DlqStats, FailureTimeline, Filter, FingerprintStats, Page,
    ReplayOptions, ReplayReport,
};
use crate::api::queue::{EnqueueOptions, FailureOutcome, FailureReport, QueueStats};
use crate::api::trace::TraceParent;
use crate::error::{Error, Result};

/// A leased message, as a handler sees it on any backend.
///
/// ```
/// use deadletter::{Config, Delivery, Failure, MessageQueue, Store};
/// use deadletter::queue::FailureReport;
///
/// // A handler written once for every backend.
/// fn handle(msg: &impl Delivery) -> Result<(), Failure> {
///     match msg.text() {
///         Some(order) if order.starts_with("ORD-") => Ok(()),
///         _ => Err(Failure::permanent("InvalidOrder", "not an order")),
///     }
/// }
///
/// // Code generic over the backend: here it runs on the embedded store.
/// fn drain(queue: &impl MessageQueue) -> deadletter::Result<usize> {
///     let mut handled = 0;
///     for msg in queue.lease(10)? {
///         match handle(&msg) {
///             Ok(()) => queue.ack(&msg)?,
///             Err(failure) => queue.dead_letter(&msg, &FailureReport::new(&failure))?,
///         }
///         handled += 1;
///     }
///     Ok(handled)
/// }
///
/// # let dir = tempfile::tempdir().unwrap();
/// let store = Store::open(&dir, Config::fast())?;
/// let orders = store.queue("orders")?;
/// orders.enqueue_batch(&["ORD-1", "not an order"])?;
/// assert_eq!(drain(&orders)?, 2);
/// assert_eq!(orders.dlq().len(), 1);
/// # Ok::<(), deadletter::Error>(())
/// ```
pub trait Delivery: Clone + Send + Sync + 'static {
    /// The message id: stable for the message's whole life, replays included.
    fn id(&self) -> MessageId;
    /// The name of the queue it was leased from.
    fn queue(&self) -> &str;
    /// This delivery's number: 1 for the first.
    fn attempt(&self) -> u32;
    /// The payload bytes.
    fn payload(&self) -> &[u8];
    /// When it was enqueued (ms since the epoch).
    fn enqueued_at_ms(&self) -> u64;
    /// The caller's attributes.
    fn attributes(&self) -> &BTreeMap<String, String>;
    /// The trace context it carries (its `traceparent` attribute), if a valid one.
    fn traceparent(&self) -> Option<TraceParent> {
        TraceParent::from_attributes(self.attributes())
    }
    /// The payload as UTF-8 text, if it is.
    fn text(&self) -> Option<&str> {
        std::str::from_utf8(self.payload()).ok()
    }
    /// Decodes a payload enqueued with [`MessageQueue::enqueue_typed`] (bincode).
    fn decode<T: DeserializeOwned>(&self) -> Result<T> {
        bincode::serde::decode_from_slice(self.payload(), bincode::config::standard())
            .map(|(v, _)| v)
            .map_err(|e| Error::Codec(e.to_string()))
    }
}

/// A queue on some backend: produce, lease, and report outcomes.
///
/// A handle is cheap to clone and usable from any number of threads. The lease model is
/// the embedded store's ([`Queue`](crate::Queue) documents it): lease, then ack, retry or dead-letter.
/// These are the operations a user calls and all a backend must implement; the worker
/// pool's faster paths are a second trait, [`WorkerQueue`], whose every method has a
/// default built on these.
///
/// [`WorkerQueue`]: crate::backend::WorkerQueue
pub trait MessageQueue: Clone + Send + Sync + 'static {
    /// What a lease hands out.
    type Message: Delivery;
    /// This queue's DLQ handle.
    type Dlq: DeadLetterQueue;

    /// The queue's name.
    fn name(&self) -> &str;
    /// This queue's DLQ.
    fn dlq(&self) -> Self::Dlq;
    /// A handle on the same queue whose deliveries go to the DLQ after `max_attempts`
    /// (by [`MessageQueue::retry`] on the last attempt, and when the last lease runs out)
    /// and whose leases last `lease`. The worker pool applies its retry policy this way;
    /// nothing built on the other methods could, since the limit is the backend's to
    /// enforce.
    fn with_policy(&self, max_attempts: u32, lease: Duration) -> Result<Self>;
    /// The time now by the backend's clock (ms since the epoch): retry times are
    /// computed from it.
    fn now_ms(&self) -> u64;

    /// Enqueues one message with options; returns its id once it is durable.
    fn enqueue_with(
        &self,
        payload: impl AsRef<[u8]>,
        options: &EnqueueOptions,
    ) -> Result<MessageId>;
    /// Enqueues a batch; returns the ids in order.
    fn enqueue_batch<P: AsRef<[u8]>>(&self, payloads: &[P]) -> Result<Vec<MessageId>>;
    /// Enqueues one message.
    fn enqueue(&self, payload: impl AsRef<[u8]>) -> Result<MessageId> {
        self.enqueue_with(payload, &EnqueueOptions::default())
    }
    /// Enqueues a serde value, encoded with bincode; read it back with
    /// [`Delivery::decode`].
    fn enqueue_typed<T: serde::Serialize>(&self, value: &T) -> Result<MessageId> {
        let bytes = bincode::serde::encode_to_vec(value, bincode::config::standard())
            .map_err(|e| Error::Codec(e.to_string()))?;
        self.enqueue(bytes)
    }

    /// Leases up to `max` visible messages, without waiting. Each delivery is counted
    /// before this returns.
    fn lease(&self, max: usize) -> Result<Vec<Self::Message>>;
    /// Leases up to `max` messages, waiting up to `timeout` for the first one.
    fn lease_wait(&self, max: usize, timeout: Duration) -> Result<Vec<Self::Message>>;
    /// Acknowledges several delivered messages together.
    fn ack_all(&self, msgs: &[Self::Message]) -> Result<()>;
    /// Acknowledges one delivered message: it is removed.
    fn ack(&self, msg: &Self::Message) -> Result<()> {
        self.ack_all(std::slice::from_ref(msg))
    }
    /// Acknowledges `done` and leases up to `max` more, in one step where the backend can
    /// (the embedded store: one write). If the ack is refused, nothing is leased.
    fn ack_and_lease(&self, done: &Self::Message, max: usize) -> Result<Vec<Self::Message>> {
        self.ack(done)?;
        self.lease(max)
    }
    /// Extends a lease (heartbeat) to `visibility` from now, where the backend allows
    /// the length to be chosen, or by its configured lease length otherwise.
    fn extend(&self, msg: &Self::Message, visibility: Duration) -> Result<()>;
    /// Reports a failed delivery. A permanent failure, or one on the last allowed attempt,
    /// moves the message to the DLQ; otherwise it becomes visible again at `retry_at_ms`.
    /// It is durable when this returns.
    fn retry(
        &self,
        msg: &Self::Message,
        report: &FailureReport<'_>,
        retry_at_ms: u64,
    ) -> Result<FailureOutcome>;
    /// Moves a delivered message to the DLQ at once (a permanent failure), durably.
    fn dead_letter(&self, msg: &Self::Message, report: &FailureReport<'_>) -> Result<()>;
    /// Counts of the queue and its DLQ.
    fn stats(&self) -> Result<QueueStats>;
}

/// A DLQ on some backend: browse, count, analyse, replay, delete, purge, alert.
///
/// Browsing ([`list`](DeadLetterQueue::list), [`get`](DeadLetterQueue::get),
/// [`stats`](DeadLetterQueue::stats), [`analyze`](DeadLetterQueue::analyze)) changes
/// nothing. An entry is identified by its message id.
pub trait DeadLetterQueue: Clone + Send + Sync + 'static {
    /// The DLQ's name.
    fn name(&self) -> String;
    /// The name of the queue it belongs to.
    fn queue_name(&self) -> &str;
    /// Entries in the DLQ.
    fn len(&self) -> Result<u64>;
    /// True when the DLQ is empty.
    fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }
    /// Entries matching `filter`, oldest first, one page at a time.
    fn list(&self, filter: &Filter, page: Page) -> Result<Vec<DeadLetter>>;
    /// Summaries of the entries [`list`](DeadLetterQueue::list) returns (see
    /// [`DeadLetterSummary`]). By default made from the whole entries; the embedded store
    /// reads only what a summary holds.
    fn list_summaries(&self, filter: &Filter, page: Page) -> Result<Vec<DeadLetterSummary>> {
        let entries = self.list(filter, page)?;
        Ok(entries.into_iter().map(DeadLetterSummary::from).collect())
    }
    /// Entries grouped by failure fingerprint, most entries first. By default from
    /// [`analyze`](DeadLetterQueue::analyze) (hourly counts end at the newest entry); the
    /// embedded store answers from its index, with hourly counts ending now.
    fn fingerprints(&self) -> Result<Vec<FingerprintStats>> {
        Ok(self.analyze(&Filter::all())?.fingerprints)
    }
    /// Deletes the entries matching `filter` that were dead-lettered more than
    /// `older_than` ago, reprocessed ones only unless `include_pending`. By default the
    /// cutoff is taken from the system clock; the embedded store takes its own clock.
    fn purge_matching(
        &self,
        filter: &Filter,
        older_than: Duration,
        include_pending: bool,
    ) -> Result<u64> {
        let now = SystemClock.now_ms();
        let cutoff = now.saturating_sub(older_than.as_millis() as u64);
        match filter.purge_cutoff(cutoff, include_pending) {
            Some(f) => self.delete_matching(&f),
            None => Ok(0),
        }
    }
    /// One entry by id, or [`Error::NotFound`].
    fn get(&self, id: MessageId) -> Result<DeadLetter>;
    /// The summary of one entry by id. By default made from the whole entry.
    fn summary(&self, id: MessageId) -> Result<DeadLetterSummary> {
        self.get(id).map(DeadLetterSummary::from)
    }
    /// Ids of the entries matching `filter` (up to `limit`), oldest first.
    fn ids(&self, filter: &Filter, limit: Option<usize>) -> Result<Vec<MessageId>>;
    /// Counts of the DLQ.
    fn stats(&self) -> Result<DlqStats>;
    /// Failure distributions and patterns of the entries matching `filter`.
    fn analyze(&self, filter: &Filter) -> Result<Analysis>;
    /// Dead-letterings per hour in the `hours` hours (1 to
    /// [`HISTORY_HOURS`](crate::dlq::HISTORY_HOURS)) up to and
    /// including the hour holding `until_ms`. The embedded store reads the history it
    /// keeps (replays and deletes do not change it). This default, for a backend that
    /// keeps none, counts the entries the DLQ still holds, reading them once, a page at a
    /// time ([`FailureTimeline::persisted`] is false).
    fn failure_timeline(&self, until_ms: u64, hours: u32) -> Result<FailureTimeline> {
        FailureTimeline::check_hours(hours)?;
        let mut t = FailureTimeline::empty(until_ms, hours, false);
        let mut page = Page::first(1000);
        loop {
            let entries = self.list(&Filter::all(), page)?;
            let Some(last) = entries.last() else {
                return Ok(t);
            };
            page = Page::after_cursor(Cursor::of(last), 1000);
            for e in &entries {
                t.count(e.dlq.dead_lettered_at_ms, &e.failure.error_kind, 1);
            }
        }
    }
    /// Replays the entries matching `filter` (up to `options.limit`).
    fn replay(&self, filter: &Filter, options: &ReplayOptions) -> Result<ReplayReport>;
    /// Replays the given entries.
    fn replay_ids(&self, ids: &[MessageId], options: &ReplayOptions) -> Result<ReplayReport>;
    /// Replays one entry: [`Error::NotFound`] if it is not in the DLQ,
    /// [`Error::AlreadyReprocessed`] if it was marked and `options.force` is not set.
    fn replay_one(&self, id: MessageId, options: &ReplayOptions) -> Result<()>;
    /// Replays one entry with a corrected payload; the failed bytes are kept as
    /// [`DeadLetter::replaced_payload`] if it fails again.
    fn replay_corrected(
        &self,
        id: MessageId,
        payload: impl AsRef<[u8]>,
        options: &ReplayOptions,
    ) -> Result<()>;
    /// Replays entries, each with its corrected payload (one equal to the entry's own is a
    /// plain replay); an entry that cannot be replayed, or is no longer at the generation
    /// its correction names, is left as it is and listed with the reason. By default one
    /// [`replay_corrected`](DeadLetterQueue::replay_corrected) each; the embedded store
    /// writes them in one batch.
    fn replay_corrected_batch(
        &self,
        corrections: &[Correction],
        options: &ReplayOptions,
    ) -> Result<ReplayReport> {
        let mut report = ReplayReport::new(options.dry_run);
        for c in corrections {
            let entry = match c.generation {
                Some(g) => self.get(c.id).and_then(|e| match e.generation == g {
                    true => Ok(()),
                    false => Err(stale_correction(c.id)),
                }),
                None => Ok(()),
            };
            let outcome = entry.and_then(|()| match options.dry_run {
                true => self.get(c.id).map(|_| ()),
                false => self.replay_corrected(c.id, &c.payload, options),
            });
            match outcome {
                Ok(()) => report.replayed.push(c.id),
                Err(e) => report.failed.push((c.id, e.to_string())),
            }
        }
        Ok(report)
    }
    /// Replays the given entries, each with its payload passed through `transform`, as
    /// [`Dlq::replay_transformed_ids`](crate::Dlq::replay_transformed_ids) says (a dry run
    /// reports each payload before and after). By default the entries are read with
    /// [`get`](DeadLetterQueue::get) and replayed with
    /// [`replay_corrected_batch`](DeadLetterQueue::replay_corrected_batch), each at the
    /// generation it was read at.
    fn replay_transformed_ids<F, E>(
        &self,
        ids: &[MessageId],
        options: &ReplayOptions,
        transform: F,
    ) -> Result<TransformReport>
    where
        F: FnMut(&[u8]) -> std::result::Result<Vec<u8>, E>,
        E: std::fmt::Display,
    {
        let read = |id| generation_and_payload(self.get(id)?, options);
        replay_transformed_with(ids, options, usize::MAX, read, transform, |planned| {
            let corrections: Vec<Correction> = planned
                .iter()
                .map(|p| Correction::new(p.id, p.payload.clone()).generation(p.generation))
                .collect();
            self.replay_corrected_batch(&corrections, options)
        })
    }
    /// Records that an entry was reprocessed outside the queue, with its outcome.
    fn mark_reprocessed(&self, id: MessageId, success: bool) -> Result<()>;
    /// Deletes one entry for good.
    fn delete(&self, id: MessageId) -> Result<()>;
    /// Deletes the entries matching `filter`; returns how many.
    fn delete_matching(&self, filter: &Filter) -> Result<u64>;
    /// Deletes entries dead-lettered more than `older_than` ago; pending ones only if
    /// `include_pending`. Returns how many.
    fn purge(&self, older_than: Duration, include_pending: bool) -> Result<u64>;
    /// Calls `callback` when the DLQ's size reaches `threshold`, and again when it falls
    /// back under.
    fn on_threshold(
        &self,
        threshold: u64,
        callback: impl Fn(&DlqAlert) + Send + Sync + 'static,
    ) -> Result<()>;
}
