//! The worker pool's batching protocol: [`WorkerQueue`], the second trait of a backend,
//! with a default for every method built on the core [`MessageQueue`], and [`CoreOnly`],
//! which runs the pool on any core backend through those defaults.
//!
//! Invariants the pool relies on, whatever the implementation:
//! - every message a reservation hands out is a delivery counted before it is handed out,
//!   as a lease is;
//! - a message given back with [`WorkerQueue::release_unstarted`] has its delivery
//!   uncounted; a reserved message ends in exactly one way: an ack, a failure report, a
//!   release, or the end of its lease;
//! - a deferred failure report ([`WorkerQueue::retry_deferred`],
//!   [`WorkerQueue::dead_letter_deferred`]) is visible at once, and durable once
//!   [`WorkerQueue::make_durable`] returns for its mark.

use std::sync::Arc;
use std::time::Duration;

use crate::api::backend::contract::MessageQueue;
use crate::api::core::pools::{PoolAttachment, PoolPresence};
use crate::api::core::types::MessageId;
use crate::api::queue::{EnqueueOptions, FailureOutcome, FailureReport, QueueStats};
use crate::error::{Error, Result};

/// A queue as the [`WorkerPool`](crate::WorkerPool) drives it: how its workers take
/// batches, record that a handler starts, and make failure reports durable together.
///
/// Every method has a default built on [`MessageQueue`] alone, so a backend opts in with
/// an empty `impl WorkerQueue for MyQueue {}` (a queue type of another crate, which that
/// crate did not opt in, runs through [`CoreOnly`] instead). Under the defaults a worker
/// leases one message at a time, reports every outcome durably before it takes the next
/// message, and writes nothing else: correct on any backend, and as fast as its lease,
/// ack and retry round trips allow.
///
/// A backend overrides the defaults where it can do the same work with fewer writes or
/// waits; the embedded [`Queue`](crate::Queue) overrides them all:
/// - [`reserve_wait`](WorkerQueue::reserve_wait),
///   [`ack_and_reserve`](WorkerQueue::ack_and_reserve) and
///   [`release_unstarted`](WorkerQueue::release_unstarted), together, when it can hand a
///   worker several messages at once and give back those whose handler never started
///   without charging them an attempt (the embedded store's reservations);
/// - [`wants_starts`](WorkerQueue::wants_starts) and [`start`](WorkerQueue::start),
///   together, when it can cheaply record that a handler starts, so that a consumer dying
///   with a batch in hand is charged only for the messages whose handler ran;
/// - [`retry_deferred`](WorkerQueue::retry_deferred),
///   [`dead_letter_deferred`](WorkerQueue::dead_letter_deferred) and
///   [`make_durable`](WorkerQueue::make_durable), together, when a failure report can be
///   written now and made durable by a later write that happens anyway (a group commit);
/// - [`worker_handle`](WorkerQueue::worker_handle),
///   [`wake_consumers`](WorkerQueue::wake_consumers),
///   [`observe_handler`](WorkerQueue::observe_handler),
///   [`observe_handlers`](WorkerQueue::observe_handlers),
///   [`declare_handler_durations`](WorkerQueue::declare_handler_durations) and
///   [`attach_pool`](WorkerQueue::attach_pool), one by one: a handle per worker thread,
///   interrupting blocked leases when the pool stops, a record of handler times for the
///   backend's metrics, and a list of the pools running on it.
///
/// ```
/// use std::time::Duration;
/// use deadletter::{Config, Delivery, Failure, Store, WorkerPool};
/// use deadletter::pool::Retry;
/// use deadletter::MessageQueue;
/// use deadletter::backend::CoreOnly;
///
/// # let dir = tempfile::tempdir().unwrap();
/// let store = Store::open(&dir, Config::fast())?;
/// let orders = store.queue("orders")?;
/// orders.enqueue_batch(&["ORD-1", "ORD-2", "poison"])?;
///
/// // The embedded queue's own batching is the default (`WorkerPool::new(&orders)`);
/// // `CoreOnly` runs the same pool through the defaults built on the core trait, as it
/// // would on a backend that implements only `MessageQueue`.
/// let pool = WorkerPool::new(&CoreOnly(orders.clone()))
///     .retry(Retry::fixed(Duration::from_millis(1)).max_attempts(2))
///     .start(|msg: &deadletter::Message| match msg.text() {
///         Some(order) if order.starts_with("ORD-") => Ok(()),
///         _ => Err(Failure::permanent("InvalidOrder", "not an order")),
///     })?;
/// pool.run_until_idle()?;
/// let report = pool.shutdown(Duration::from_secs(5))?;
/// assert_eq!((report.counters.processed, report.counters.dead_lettered), (2, 1));
/// assert_eq!(orders.dlq().len(), 1);
/// # Ok::<(), deadletter::Error>(())
/// ```
pub trait WorkerQueue: MessageQueue {
    /// A handle on the same queue for one worker thread of a pool. The default is a
    /// clone. Override it when a message counts references on something the handle holds
    /// (the embedded queue's name): a handle of its own per worker keeps workers on
    /// different cores from writing one shared cache line for every message they take
    /// and drop.
    fn worker_handle(&self) -> Self {
        self.clone()
    }

    /// Reserves up to `max` messages for a consumer that handles them one after the other,
    /// waiting up to `timeout` for the first (the worker pool's batches). Each is a
    /// delivery counted before this returns; one whose handler has not started
    /// ([`WorkerQueue::start`]) when the consumer stops is given back uncounted by
    /// [`WorkerQueue::release_unstarted`], and one left when the consumer dies is given
    /// back uncounted where the backend can tell (the embedded store: see
    /// [`Queue::reserve_wait`](crate::Queue::reserve_wait)).
    ///
    /// The default leases one message ([`MessageQueue::lease_wait`]): a lease cannot be
    /// given back uncounted, so a backend without reservations delivers one at a time and
    /// a consumer that dies is charged for that one only. Override it (with
    /// [`WorkerQueue::ack_and_reserve`] and [`WorkerQueue::release_unstarted`]) to hand out
    /// more.
    fn reserve_wait(&self, max: usize, timeout: Duration) -> Result<Vec<Self::Message>> {
        let _ = max;
        self.lease_wait(1, timeout)
    }

    /// Acknowledges `done` and reserves up to `max` more (none for 0) without waiting, in
    /// one step where the backend can. Acks refused because their lease was lost are
    /// skipped and counted (the second value); any other error stops it and is returned.
    ///
    /// The default acks one by one ([`MessageQueue::ack`]) and then leases one message,
    /// as [`WorkerQueue::reserve_wait`]'s default does.
    fn ack_and_reserve(
        &self,
        done: &[Self::Message],
        max: usize,
    ) -> Result<(Vec<Self::Message>, u64)> {
        let lost = ack_each(self, done)?;
        let more = if max > 0 { self.lease(1)? } else { Vec::new() };
        Ok((more, lost))
    }

    /// True when the pool must call [`WorkerQueue::start`] before each handler; when
    /// false, it does not, and the acks of a batch wait for the next
    /// [`WorkerQueue::ack_and_reserve`]. The embedded store wants starts under
    /// `Durability::Always` only: under the other settings a start would stay in the
    /// process's buffer and die with it.
    ///
    /// The default is false: a lease needs no start, since its delivery was counted when
    /// it was handed out.
    fn wants_starts(&self) -> bool {
        false
    }

    /// Records that the handler of the reserved message `next` starts, and acknowledges
    /// `done`, in one step where the backend can. Returns the acks refused because their
    /// lease was lost, and whether `next` may run (false: its reservation ended meanwhile,
    /// and another delivery decides its outcome).
    ///
    /// Called only when [`WorkerQueue::wants_starts`] is true; the default acks `done` one
    /// by one and lets `next` run.
    fn start(&self, next: &Self::Message, done: &[Self::Message]) -> Result<(u64, bool)> {
        let _ = next;
        Ok((ack_each(self, done)?, true))
    }

    /// Gives back, uncounted, reserved messages whose handler has not started (the pool
    /// stopping in the middle of a batch): they are visible again at once, on the attempt
    /// they were reserved for.
    ///
    /// The default does nothing: its reservations hold one message, and the pool always
    /// starts the first message of a batch, so there is never one to give back. A backend
    /// that overrides [`WorkerQueue::reserve_wait`] to hand out more overrides this too.
    fn release_unstarted(&self, msgs: &[Self::Message]) -> Result<()> {
        let _ = msgs;
        Ok(())
    }

    /// Reports a failed delivery as [`MessageQueue::retry`] does, for a consumer that makes
    /// its reports durable later, together ([`WorkerQueue::make_durable`] with the
    /// returned mark): the worker pool, which reports failures between the group commits
    /// of its acks. The report is visible at once and survives the process dying; a power
    /// cut before a later durable write covers it may lose it (the message is then
    /// delivered again).
    ///
    /// The default reports durably, with [`MessageQueue::retry`], and returns
    /// [`WriteMark::DURABLE`]. The embedded store writes without waiting for an fsync
    /// under `Durability::Always`; a backend overrides it when a later write would make
    /// the report durable anyway.
    fn retry_deferred(
        &self,
        msg: &Self::Message,
        report: &FailureReport<'_>,
        retry_at_ms: u64,
    ) -> Result<(FailureOutcome, WriteMark)> {
        Ok((self.retry(msg, report, retry_at_ms)?, WriteMark::DURABLE))
    }

    /// Moves a delivered message to the DLQ as [`MessageQueue::dead_letter`] does, made
    /// durable later as [`WorkerQueue::retry_deferred`] says. The default is durable at
    /// once ([`MessageQueue::dead_letter`]).
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
    /// as a prefix) has covered it already. The default has nothing to wait for: its
    /// reports are durable when they return.
    fn make_durable(&self, mark: WriteMark) -> Result<()> {
        let _ = mark;
        Ok(())
    }

    /// Wakes consumers blocked in [`MessageQueue::lease_wait`] (or
    /// [`WorkerQueue::reserve_wait`]) in this process, so that a stopping pool does not
    /// wait out their timeout. The default does nothing: the waits end at their timeout
    /// (the pool waits at most 200 ms at a time).
    fn wake_consumers(&self) {}

    /// Records how long a handler ran for one delivery. The embedded store keeps a
    /// histogram per queue for its metrics; the default, for a backend that keeps none,
    /// does nothing.
    fn observe_handler(&self, duration: Duration) {
        let _ = duration;
    }

    /// Records how long handlers ran for several deliveries at once (the worker pool calls
    /// it once per batch, so that workers do not share a counter per message). The default
    /// records them one by one with [`WorkerQueue::observe_handler`].
    fn observe_handlers(&self, durations: &[Duration]) {
        for &d in durations {
            self.observe_handler(d);
        }
    }

    /// Says that a worker pool starts on this queue, before any handler runs: a backend
    /// that keeps handler times creates the queue's histogram here, so that its series
    /// exist (at zero) from the pool's start rather than from its first delivery. The
    /// default, for a backend that keeps none, does nothing.
    fn declare_handler_durations(&self) {}

    /// Lists a starting worker pool among the backend's attached pools (what
    /// [`Store::attached_pools`](crate::Store::attached_pools) reads for the embedded
    /// store), until the returned attachment is dropped: the pool keeps it while it runs.
    /// The default, for a backend that keeps no such list, attaches nothing (`None`).
    fn attach_pool(&self, pool: Arc<PoolPresence>) -> Option<PoolAttachment> {
        let _ = pool;
        None
    }
}

/// How far a backend's deferred reports ([`WorkerQueue::retry_deferred`],
/// [`WorkerQueue::dead_letter_deferred`]) reach: pass the largest one held to
/// [`WorkerQueue::make_durable`]. Marks of one queue's backend are ordered like its
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

/// A queue used through its core trait only: `CoreOnly(queue)` is a [`MessageQueue`]
/// that forwards every call to `queue`, and a [`WorkerQueue`] with every default. It runs
/// the worker pool on a backend that implements only the core traits (a queue type of
/// another crate that did not opt in to [`WorkerQueue`]), and it runs the pool on any
/// backend as if its batching were not there: the conformance suite checks the defaults
/// this way, on every backend.
#[derive(Debug, Clone)]
pub struct CoreOnly<Q>(pub Q);

impl<Q: MessageQueue> MessageQueue for CoreOnly<Q> {
    type Message = Q::Message;
    type Dlq = Q::Dlq;

    forward! { .0:
        fn name(&self) -> &str;
        fn dlq(&self) -> Q::Dlq;
        fn now_ms(&self) -> u64;
        fn enqueue_with(&self, payload: impl AsRef<[u8]>, options: &EnqueueOptions)
            -> Result<MessageId>;
        fn enqueue_batch<P: AsRef<[u8]>>(&self, payloads: &[P]) -> Result<Vec<MessageId>>;
        fn enqueue(&self, payload: impl AsRef<[u8]>) -> Result<MessageId>;
        fn enqueue_typed<T: serde::Serialize>(&self, value: &T) -> Result<MessageId>;
        fn lease(&self, max: usize) -> Result<Vec<Q::Message>>;
        fn lease_wait(&self, max: usize, timeout: Duration) -> Result<Vec<Q::Message>>;
        fn ack_all(&self, msgs: &[Q::Message]) -> Result<()>;
        fn ack(&self, msg: &Q::Message) -> Result<()>;
        fn ack_and_lease(&self, done: &Q::Message, max: usize) -> Result<Vec<Q::Message>>;
        fn extend(&self, msg: &Q::Message, visibility: Duration) -> Result<()>;
        fn retry(&self, msg: &Q::Message, report: &FailureReport<'_>, retry_at_ms: u64)
            -> Result<FailureOutcome>;
        fn dead_letter(&self, msg: &Q::Message, report: &FailureReport<'_>) -> Result<()>;
        fn stats(&self) -> Result<QueueStats>;
    }
    fn with_policy(&self, max_attempts: u32, lease: Duration) -> Result<Self> {
        self.0.with_policy(max_attempts, lease).map(CoreOnly)
    }
}

impl<Q: MessageQueue> WorkerQueue for CoreOnly<Q> {}
