//! Backends: the contract a queue and its DLQ keep, whatever holds them.
//!
//! Three traits name the operations users call, so that the [`WorkerPool`], the
//! conformance suite and a user's own code run unchanged on the embedded store or on
//! another engine (the `deadletter-jetstream` package implements them on NATS JetStream):
//!
//! - [`Delivery`]: a leased message (payload, id, attempt number, attributes);
//! - [`MessageQueue`]: produce (one or a batch), lease (up to `n`, waiting or not), then
//!   ack (one or many), retry, dead-letter or extend; counts; and the worker pool's
//!   batching: reservations, starts, acks carried by the next reservation, and failure
//!   reports made durable together ([`WriteMark`]), each with a default that keeps a
//!   backend without them correct;
//! - [`DeadLetterQueue`]: browse, count, analyse, replay, mark, delete and purge entries,
//!   and size alerts.
//!
//! The embedded [`Queue`], [`Message`] and [`Dlq`] implement them by calling their own
//! methods: the traits are used through generics (static dispatch), each message is the
//! backend's own type (for the embedded store, a view of the log's memory map, never
//! copied or boxed), and the batch operations (`lease(n)`, `ack_all`, `enqueue_batch`)
//! are part of the contract so that a consumer can lease in batches and commit acks in
//! groups.
//!
//! The traits are synchronous, like the pool (threads): a backend built on an async client
//! runs its own runtime behind them. Errors are the crate's [`Error`]; a backend reports
//! what is its own (a lost connection, a server refusal) as [`Error::Backend`].
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
//! [`WorkerPool`]: crate::WorkerPool
//! [`Error`]: crate::Error
//! [`Error::Backend`]: crate::Error::Backend

use std::collections::BTreeMap;
use std::time::Duration;

use serde::de::DeserializeOwned;

use crate::api::alert::DlqAlert;
use crate::api::dlq::{
    Analysis, Cursor, DeadLetterSummary, Dlq, DlqStats, FailureTimeline, Filter, FingerprintStats,
    Page, ReplayOptions, ReplayReport,
};
use crate::api::queue::{
    EnqueueOptions, FailureOutcome, FailureReport, Message, Queue, QueueStats,
};
use crate::api::types::{DeadLetter, MessageId};
use crate::engine::Settle;
use crate::error::{Error, Result};

/// A leased message, as a handler sees it on any backend.
///
/// ```
/// use deadletter::{Config, Delivery, Failure, FailureReport, MessageQueue, Store};
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
/// # fn main() -> deadletter::Result<()> {
/// # let dir = std::env::temp_dir().join(format!("deadletter-doc-backend-{}", std::process::id()));
/// # let _ = std::fs::remove_dir_all(&dir);
/// let store = Store::open(&dir, Config::fast())?;
/// let orders = store.queue("orders")?;
/// orders.enqueue_batch(&["ORD-1", "not an order"])?;
/// assert_eq!(drain(&orders)?, 2);
/// assert_eq!(orders.dlq().len(), 1);
/// # drop((orders, store));
/// # std::fs::remove_dir_all(&dir).ok();
/// # Ok(())
/// # }
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
/// the embedded store's ([`Queue`] documents it): lease, then ack, retry or dead-letter.
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
    /// and whose leases last `lease` (the worker pool applies its retry policy this way).
    fn with_policy(&self, max_attempts: u32, lease: Duration) -> Result<Self>;
    /// A handle on the same queue for one worker thread of a pool. The default is a
    /// clone; a backend whose messages count references on something the handle holds
    /// (the embedded queue's name) gives each worker its own, so that workers on different
    /// cores do not write one shared cache line for every message they take and drop.
    fn worker_handle(&self) -> Self {
        self.clone()
    }
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
    /// Reserves up to `max` messages for a consumer that handles them one after the other,
    /// waiting up to `timeout` for the first (the worker pool's batches). Each is a
    /// delivery counted before this returns; one whose handler has not started
    /// ([`MessageQueue::start`]) when the consumer dies is given back uncounted where the
    /// backend can tell (the embedded store: see [`Queue::reserve_wait`]). The default
    /// leases one message, so a backend without reservations delivers one at a time.
    fn reserve_wait(&self, max: usize, timeout: Duration) -> Result<Vec<Self::Message>> {
        let _ = max;
        self.lease_wait(1, timeout)
    }
    /// Acknowledges `done` and reserves up to `max` more, in one step where the backend
    /// can. Acks refused because their lease was lost are skipped and counted (the second
    /// value). The default acks one by one and leases one message.
    fn ack_and_reserve(
        &self,
        done: &[Self::Message],
        max: usize,
    ) -> Result<(Vec<Self::Message>, u64)> {
        let lost = ack_each(self, done)?;
        let more = if max > 0 { self.lease(1)? } else { Vec::new() };
        Ok((more, lost))
    }
    /// True when the pool must call [`MessageQueue::start`] before each handler; when
    /// false, it does not, and `done` waits for the next
    /// [`MessageQueue::ack_and_reserve`]. The embedded store wants starts under
    /// `Durability::Always` only: under the other settings a start would stay in the
    /// process's buffer and die with it. The default: false.
    fn wants_starts(&self) -> bool {
        false
    }
    /// Starts the handler of the reserved message `next` and acknowledges `done`, in one
    /// step where the backend can. Returns the acks refused because their lease was lost,
    /// and whether `next` may run (false: its reservation ended meanwhile). The default
    /// acks one by one; a lease needs no start.
    fn start(&self, next: &Self::Message, done: &[Self::Message]) -> Result<(u64, bool)> {
        let _ = next;
        Ok((ack_each(self, done)?, true))
    }
    /// Gives reserved messages whose handler has not started back, uncounted. The
    /// default does nothing: its reservations are single leases, always started.
    fn release_unstarted(&self, msgs: &[Self::Message]) -> Result<()> {
        let _ = msgs;
        Ok(())
    }
    /// Extends a lease (heartbeat) to `visibility` from now, where the backend allows
    /// the length to be chosen, or by its configured lease length otherwise.
    fn extend(&self, msg: &Self::Message, visibility: Duration) -> Result<()>;
    /// Reports a failed delivery. A permanent failure, or one on the last allowed attempt,
    /// moves the message to the DLQ; otherwise it becomes visible again at `retry_at_ms`.
    fn retry(
        &self,
        msg: &Self::Message,
        report: &FailureReport<'_>,
        retry_at_ms: u64,
    ) -> Result<FailureOutcome>;
    /// Moves a delivered message to the DLQ at once (a permanent failure).
    fn dead_letter(&self, msg: &Self::Message, report: &FailureReport<'_>) -> Result<()>;
    /// Reports a failed delivery as [`MessageQueue::retry`] does, for a consumer that makes
    /// its reports durable later, together ([`MessageQueue::make_durable`] with the
    /// returned mark): the worker pool, which reports failures between the group commits
    /// of its acks. The report is visible at once and survives the process dying; a power
    /// cut before a later durable write covers it may lose it (the message is then
    /// delivered again). The default reports durably, as `retry` does, and returns
    /// [`WriteMark::DURABLE`]; the embedded store writes without waiting for an fsync
    /// under `Durability::Always`.
    fn retry_deferred(
        &self,
        msg: &Self::Message,
        report: &FailureReport<'_>,
        retry_at_ms: u64,
    ) -> Result<(FailureOutcome, WriteMark)> {
        Ok((self.retry(msg, report, retry_at_ms)?, WriteMark::DURABLE))
    }
    /// Moves a delivered message to the DLQ as [`MessageQueue::dead_letter`] does, made
    /// durable later as [`MessageQueue::retry_deferred`] says. The default is durable at
    /// once.
    fn dead_letter_deferred(
        &self,
        msg: &Self::Message,
        report: &FailureReport<'_>,
    ) -> Result<WriteMark> {
        self.dead_letter(msg, report)?;
        Ok(WriteMark::DURABLE)
    }
    /// Returns once every deferred report whose mark is at most `mark` is durable: at once
    /// when a later durable write (the embedded store: any, since its log is made durable
    /// as a prefix) has covered it already. The default has nothing to wait for.
    fn make_durable(&self, mark: WriteMark) -> Result<()> {
        let _ = mark;
        Ok(())
    }
    /// Counts of the queue and its DLQ.
    fn stats(&self) -> Result<QueueStats>;
    /// Wakes consumers blocked in [`MessageQueue::lease_wait`] in this process, so that a
    /// stopping pool does not wait out their timeout. A backend whose waits cannot be
    /// interrupted leaves them to end at their timeout, which is what this default does.
    fn wake_consumers(&self) {}
    /// Records how long a handler ran for one delivery (the worker pool calls it). The
    /// embedded store keeps a histogram per queue for its metrics; this default, for a
    /// backend that keeps none, does nothing.
    fn observe_handler(&self, duration: Duration) {
        let _ = duration;
    }
    /// Records how long handlers ran for several deliveries at once (the worker pool
    /// calls it once per batch, so that workers do not share a counter per message). This
    /// default records them one by one with [`MessageQueue::observe_handler`].
    fn observe_handlers(&self, durations: &[Duration]) {
        for &d in durations {
            self.observe_handler(d);
        }
    }
}

/// How far a backend's deferred reports ([`MessageQueue::retry_deferred`],
/// [`MessageQueue::dead_letter_deferred`]) reach: pass the largest one held to
/// [`MessageQueue::make_durable`]. Marks of one queue's backend are ordered like its
/// writes; [`WriteMark::DURABLE`] (the default) says there is nothing to wait for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WriteMark(u64);

impl WriteMark {
    /// Nothing to wait for: the write is durable already.
    pub const DURABLE: WriteMark = WriteMark(0);

    /// A mark at `position` in a backend's own order of writes (the embedded store: the
    /// log position an fsync must reach); 0 is [`WriteMark::DURABLE`].
    pub fn at(position: u64) -> WriteMark {
        WriteMark(position)
    }

    /// The position given to [`WriteMark::at`].
    pub fn position(self) -> u64 {
        self.0
    }

    /// True when there is nothing to wait for.
    pub fn is_durable(self) -> bool {
        self.0 == 0
    }
}

/// Acks `done` one by one; returns how many were refused because their lease was lost.
fn ack_each<Q: MessageQueue>(queue: &Q, done: &[Q::Message]) -> Result<u64> {
    let mut lost = 0;
    for m in done {
        match queue.ack(m) {
            Ok(()) => {}
            Err(Error::InvalidState { .. }) | Err(Error::NotFound(_)) => lost += 1,
            Err(e) => return Err(e),
        }
    }
    Ok(lost)
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
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
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
    /// [`HISTORY_HOURS`](crate::HISTORY_HOURS)) up to and
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

impl Delivery for Message {
    #[inline]
    fn id(&self) -> MessageId {
        Message::id(self)
    }
    #[inline]
    fn queue(&self) -> &str {
        Message::queue(self)
    }
    #[inline]
    fn attempt(&self) -> u32 {
        Message::attempt(self)
    }
    #[inline]
    fn payload(&self) -> &[u8] {
        Message::payload(self)
    }
    #[inline]
    fn enqueued_at_ms(&self) -> u64 {
        Message::enqueued_at_ms(self)
    }
    #[inline]
    fn attributes(&self) -> &BTreeMap<String, String> {
        Message::attributes(self)
    }
}

impl MessageQueue for Queue {
    type Message = Message;
    type Dlq = Dlq;

    fn name(&self) -> &str {
        Queue::name(self)
    }
    fn dlq(&self) -> Dlq {
        Queue::dlq(self)
    }
    fn with_policy(&self, max_attempts: u32, lease: Duration) -> Result<Self> {
        let options = self
            .options()
            .max_attempts(max_attempts)
            .visibility_timeout(lease);
        self.store().queue_with(Queue::name(self), options)
    }
    fn worker_handle(&self) -> Self {
        Queue::worker_handle(self)
    }
    #[inline]
    fn now_ms(&self) -> u64 {
        self.store().now()
    }
    #[inline]
    fn enqueue_with(
        &self,
        payload: impl AsRef<[u8]>,
        options: &EnqueueOptions,
    ) -> Result<MessageId> {
        Queue::enqueue_with(self, payload, options)
    }
    #[inline]
    fn enqueue_batch<P: AsRef<[u8]>>(&self, payloads: &[P]) -> Result<Vec<MessageId>> {
        Queue::enqueue_batch(self, payloads)
    }
    #[inline]
    fn lease(&self, max: usize) -> Result<Vec<Message>> {
        Queue::lease(self, max)
    }
    #[inline]
    fn lease_wait(&self, max: usize, timeout: Duration) -> Result<Vec<Message>> {
        Queue::lease_wait(self, max, timeout)
    }
    #[inline]
    fn ack_all(&self, msgs: &[Message]) -> Result<()> {
        Queue::ack_all(self, msgs)
    }
    #[inline]
    fn ack_and_lease(&self, done: &Message, max: usize) -> Result<Vec<Message>> {
        Queue::ack_and_lease(self, done, max)
    }
    #[inline]
    fn reserve_wait(&self, max: usize, timeout: Duration) -> Result<Vec<Message>> {
        Queue::reserve_wait(self, max, timeout)
    }
    #[inline]
    fn ack_and_reserve(&self, done: &[Message], max: usize) -> Result<(Vec<Message>, u64)> {
        Queue::ack_and_reserve(self, done, max)
    }
    #[inline]
    fn wants_starts(&self) -> bool {
        self.store().engine().waits_for_sync()
    }
    #[inline]
    fn start(&self, next: &Message, done: &[Message]) -> Result<(u64, bool)> {
        Queue::start(self, next, done)
    }
    #[inline]
    fn release_unstarted(&self, msgs: &[Message]) -> Result<()> {
        Queue::release_unstarted(self, msgs)
    }
    #[inline]
    fn extend(&self, msg: &Message, visibility: Duration) -> Result<()> {
        Queue::extend(self, msg, visibility)
    }
    #[inline]
    fn retry(
        &self,
        msg: &Message,
        report: &FailureReport<'_>,
        retry_at_ms: u64,
    ) -> Result<FailureOutcome> {
        Queue::retry(self, msg, report, retry_at_ms)
    }
    #[inline]
    fn dead_letter(&self, msg: &Message, report: &FailureReport<'_>) -> Result<()> {
        Queue::dead_letter(self, msg, report)
    }
    fn retry_deferred(
        &self,
        msg: &Message,
        report: &FailureReport<'_>,
        retry_at_ms: u64,
    ) -> Result<(FailureOutcome, WriteMark)> {
        let (outcome, pos) =
            self.report_failure(Settle::Written, msg, report, Some(retry_at_ms))?;
        Ok((outcome, WriteMark::at(pos)))
    }
    fn dead_letter_deferred(&self, msg: &Message, report: &FailureReport<'_>) -> Result<WriteMark> {
        let (_, pos) = self.report_failure(Settle::Written, msg, report, None)?;
        Ok(WriteMark::at(pos))
    }
    fn make_durable(&self, mark: WriteMark) -> Result<()> {
        if mark.is_durable() {
            return Ok(());
        }
        self.sync_to(mark.position())
    }
    fn stats(&self) -> Result<QueueStats> {
        Ok(Queue::stats(self))
    }
    fn wake_consumers(&self) {
        self.store().wake_consumers()
    }
    fn observe_handler(&self, duration: Duration) {
        Queue::observe_handler(self, duration)
    }
    fn observe_handlers(&self, durations: &[Duration]) {
        Queue::observe_handlers(self, durations)
    }
}

impl DeadLetterQueue for Dlq {
    fn name(&self) -> String {
        Dlq::name(self)
    }
    fn queue_name(&self) -> &str {
        Dlq::queue_name(self)
    }
    fn len(&self) -> Result<u64> {
        Ok(Dlq::len(self))
    }
    fn list(&self, filter: &Filter, page: Page) -> Result<Vec<DeadLetter>> {
        Dlq::list(self, filter, page)
    }
    fn list_summaries(&self, filter: &Filter, page: Page) -> Result<Vec<DeadLetterSummary>> {
        Dlq::list_summaries(self, filter, page)
    }
    fn fingerprints(&self) -> Result<Vec<FingerprintStats>> {
        Ok(Dlq::fingerprints(self))
    }
    fn purge_matching(
        &self,
        filter: &Filter,
        older_than: Duration,
        include_pending: bool,
    ) -> Result<u64> {
        Dlq::purge_matching(self, filter, older_than, include_pending)
    }
    fn get(&self, id: MessageId) -> Result<DeadLetter> {
        Dlq::get(self, id)
    }
    fn summary(&self, id: MessageId) -> Result<DeadLetterSummary> {
        Dlq::summary(self, id)
    }
    fn ids(&self, filter: &Filter, limit: Option<usize>) -> Result<Vec<MessageId>> {
        Dlq::ids(self, filter, limit)
    }
    fn stats(&self) -> Result<DlqStats> {
        Ok(Dlq::stats(self))
    }
    fn analyze(&self, filter: &Filter) -> Result<Analysis> {
        Dlq::analyze(self, filter)
    }
    fn failure_timeline(&self, until_ms: u64, hours: u32) -> Result<FailureTimeline> {
        Dlq::failure_timeline(self, until_ms, hours)
    }
    fn replay(&self, filter: &Filter, options: &ReplayOptions) -> Result<ReplayReport> {
        Dlq::replay(self, filter, options)
    }
    fn replay_ids(&self, ids: &[MessageId], options: &ReplayOptions) -> Result<ReplayReport> {
        Dlq::replay_ids(self, ids, options)
    }
    fn replay_one(&self, id: MessageId, options: &ReplayOptions) -> Result<()> {
        Dlq::replay_one(self, id, options)
    }
    fn replay_corrected(
        &self,
        id: MessageId,
        payload: impl AsRef<[u8]>,
        options: &ReplayOptions,
    ) -> Result<()> {
        Dlq::replay_corrected(self, id, payload, options)
    }
    fn mark_reprocessed(&self, id: MessageId, success: bool) -> Result<()> {
        Dlq::mark_reprocessed(self, id, success)
    }
    fn delete(&self, id: MessageId) -> Result<()> {
        Dlq::delete(self, id)
    }
    fn delete_matching(&self, filter: &Filter) -> Result<u64> {
        Dlq::delete_matching(self, filter)
    }
    fn purge(&self, older_than: Duration, include_pending: bool) -> Result<u64> {
        Dlq::purge(self, older_than, include_pending)
    }
    fn on_threshold(
        &self,
        threshold: u64,
        callback: impl Fn(&DlqAlert) + Send + Sync + 'static,
    ) -> Result<()> {
        Dlq::on_threshold(self, threshold, callback)
    }
}
