//! [`AsyncQueue`]: a [`Queue`] whose calls return futures. Each write is the blocking
//! operation itself, run with its fsync wait deferred ([`Committed`]); a waiting lease
//! waits on the engine's ready signal and a timer, with no thread parked.

use std::future::Future;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::committed::Committed;
use super::dlq::AsyncDlq;
use crate::api::core::types::MessageId;
use crate::api::queue::{
    EnqueueOptions, FailureOutcome, FailureReport, Message, Queue, QueueStats,
};
use crate::error::Result;

/// A queue handle with an async API (feature `async`): the same queue as the [`Queue`] it
/// was made from, usable beside it. Cheap to clone.
///
/// Every write returns a [`Committed`] future: the write is made when the call returns,
/// and the future completes once the group commit's fsync covering it has completed (under
/// `Durability::Always`), without blocking the thread that awaits it: the store's commit
/// thread runs the fsync, shared by every task and thread waiting at that moment, and
/// wakes the tasks. See [`Committed`] for what dropping one means.
///
/// The writes themselves (validation, the append to the log's buffer, the index update)
/// run on the calling thread under the store's lock, as a blocking call's do; the only
/// I/O they can do there is a `write` of a full buffer and, once per segment, the roll to
/// the next segment (which fsyncs the one it seals).
///
/// Waiting leases ([`AsyncQueue::lease_wait`]) need a tokio runtime with its timer
/// enabled; everything else runs on any executor.
///
/// ```
/// use deadletter::{Config, Store};
/// use deadletter::async_api::AsyncQueue;
/// use deadletter::queue::FailureReport;
///
/// # let dir = tempfile::tempdir().unwrap();
/// # let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
/// # rt.block_on(async {
/// let store = Store::open(&dir, Config::default())?; // durable: fsync before completion
/// let orders = AsyncQueue::new(&store.queue("orders")?);
/// let id = orders.enqueue(b"ORD-1").await?; // durable when this completes
/// let msgs = orders.lease_wait(10, std::time::Duration::from_secs(1)).await?;
/// assert_eq!(msgs[0].id(), id);
/// orders.ack(&msgs[0]).await?;
/// assert!(orders.queue().is_empty());
/// # Ok::<(), deadletter::Error>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct AsyncQueue {
    queue: Queue,
}

impl AsyncQueue {
    /// The async face of `queue`.
    pub fn new(queue: &Queue) -> AsyncQueue {
        AsyncQueue {
            queue: queue.clone(),
        }
    }

    /// The blocking handle on the same queue.
    pub fn queue(&self) -> &Queue {
        &self.queue
    }

    /// This queue's DLQ.
    pub fn dlq(&self) -> AsyncDlq {
        AsyncDlq::new(&self.queue.dlq())
    }

    /// The queue's name.
    pub fn name(&self) -> &str {
        self.queue.name()
    }

    /// Counts of the queue and its DLQ, read from counters (no I/O, so not a future).
    pub fn stats(&self) -> QueueStats {
        self.queue.stats()
    }

    fn deferred<T>(&self, op: impl FnOnce(&Queue) -> Result<T>) -> Committed<T> {
        self.queue.store().deferred(|| op(&self.queue))
    }

    /// Enqueues one message ([`Queue::enqueue`]); the future yields its id once it is
    /// durable. Cancel-safety: dropped, the message is still enqueued (see [`Committed`]).
    pub fn enqueue(&self, payload: impl AsRef<[u8]>) -> Committed<MessageId> {
        self.deferred(|q| q.enqueue(payload))
    }

    /// Enqueues one message with options ([`Queue::enqueue_with`]). Cancel-safety: as
    /// [`AsyncQueue::enqueue`]; an idempotency key makes enqueueing it again after a
    /// dropped future safe within the store's idempotency window.
    pub fn enqueue_with(
        &self,
        payload: impl AsRef<[u8]>,
        options: &EnqueueOptions,
    ) -> Committed<MessageId> {
        self.deferred(|q| q.enqueue_with(payload, options))
    }

    /// Enqueues a batch with one write and one fsync ([`Queue::enqueue_batch`]).
    /// Cancel-safety: dropped, the whole batch is still enqueued (one record: all or none).
    pub fn enqueue_batch<P: AsRef<[u8]>>(&self, payloads: &[P]) -> Committed<Vec<MessageId>> {
        self.deferred(|q| q.enqueue_batch(payloads))
    }

    /// Enqueues a serde value ([`Queue::enqueue_typed`]). Cancel-safety: as
    /// [`AsyncQueue::enqueue`].
    pub fn enqueue_typed<T: Serialize>(&self, value: &T) -> Committed<MessageId> {
        self.deferred(|q| q.enqueue_typed(value))
    }

    /// Leases up to `max` visible messages without waiting for one ([`Queue::lease`]);
    /// the future yields them once their deliveries are durably counted. Cancel-safety:
    /// dropped, the messages it leased stay leased until their visibility timeout, their
    /// delivery counted (as a consumer that died).
    pub fn lease(&self, max: usize) -> Committed<Vec<Message>> {
        self.deferred(|q| q.lease(max))
    }

    /// Leases up to `max` messages, waiting up to `timeout` for one to become visible
    /// ([`Queue::lease_wait`]). No thread waits: the future leaves a waker with the
    /// engine, which every write that makes a message ready (and
    /// [`Store::wake_consumers`](crate::Store::wake_consumers)) wakes, and sleeps on a
    /// tokio timer until the queue's next retry or delay comes due. Needs a tokio runtime
    /// with its timer.
    ///
    /// Cancel-safety: dropped while it waits, nothing was leased and nothing is lost;
    /// dropped after it leased (while the deliveries' record is made durable), the
    /// messages stay leased until their visibility timeout, their delivery counted.
    pub async fn lease_wait(&self, max: usize, timeout: Duration) -> Result<Vec<Message>> {
        let give_up = Instant::now() + timeout;
        loop {
            let seen = self.ready_epoch();
            let got = self.lease(max).await?;
            if !got.is_empty() || !self.wait_for_work(seen, give_up).await {
                return Ok(got);
            }
        }
    }

    /// The engine's ready epoch: take it before looking at the queue, and pass it to
    /// [`AsyncQueue::wait_for_work`].
    pub(crate) fn ready_epoch(&self) -> u64 {
        self.queue.store().engine().ready_signal().epoch()
    }

    /// Waits until a write made a message ready (or consumers were woken) since epoch
    /// `seen`, the queue's next message may be visible, or `give_up`; false once `give_up`
    /// has passed. Cancel-safe: it holds nothing.
    pub(crate) async fn wait_for_work(&self, seen: u64, give_up: Instant) -> bool {
        let look = {
            let st = self.queue.store().engine().lock();
            self.queue.next_look(&st, give_up)
        };
        let Some((until, wait)) = look else {
            return false;
        };
        // A message visible now but held back (a suspect while another is out) is
        // looked at again after a millisecond, not in a busy loop.
        let until = if wait {
            until
        } else {
            until.min(Instant::now() + Duration::from_millis(1))
        };
        let signal = self.queue.store().engine().ready_signal();
        let timer = tokio::time::sleep_until(tokio::time::Instant::from_std(until));
        first_of(signal.changed(seen), timer).await;
        true
    }

    /// Acknowledges a delivered message ([`Queue::ack`]). Cancel-safety: dropped, the ack
    /// is still made (the message is removed).
    pub fn ack(&self, msg: &Message) -> Committed<()> {
        self.deferred(|q| q.ack(msg))
    }

    /// Acknowledges several messages with one record ([`Queue::ack_all`]). Cancel-safety:
    /// as [`AsyncQueue::ack`].
    pub fn ack_all(&self, msgs: &[Message]) -> Committed<()> {
        self.deferred(|q| q.ack_all(msgs))
    }

    /// Acknowledges `done` and leases up to `max` more in one write
    /// ([`Queue::ack_and_lease`]). Cancel-safety: as [`AsyncQueue::ack`] and
    /// [`AsyncQueue::lease`].
    pub fn ack_and_lease(&self, done: &Message, max: usize) -> Committed<Vec<Message>> {
        self.deferred(|q| q.ack_and_lease(done, max))
    }

    /// Extends a lease to `visibility` from now ([`Queue::extend`]). Cancel-safety:
    /// dropped, the lease is still extended.
    pub fn extend(&self, msg: &Message, visibility: Duration) -> Committed<()> {
        self.deferred(|q| q.extend(msg, visibility))
    }

    /// Gives a lease back without an outcome, visible again after `delay`
    /// ([`Queue::release`]). Cancel-safety: dropped, it is still given back.
    pub fn release(&self, msg: &Message, delay: Duration) -> Committed<()> {
        self.deferred(|q| q.release(msg, delay))
    }

    /// Reports a failed delivery: retried at `retry_at_ms`, or to the DLQ on the last
    /// attempt ([`Queue::retry`]). Cancel-safety: dropped, the report is still made.
    pub fn retry(
        &self,
        msg: &Message,
        report: &FailureReport<'_>,
        retry_at_ms: u64,
    ) -> Committed<FailureOutcome> {
        self.deferred(|q| q.retry(msg, report, retry_at_ms))
    }

    /// Moves a delivered message to the DLQ ([`Queue::dead_letter`]): one record, so it
    /// is in the queue or in the DLQ, never both. Cancel-safety: dropped, the move is
    /// still made.
    pub fn dead_letter(&self, msg: &Message, report: &FailureReport<'_>) -> Committed<()> {
        self.deferred(|q| q.dead_letter(msg, report))
    }
}

/// Completes when the first of `a` and `b` does (the other is dropped).
pub(crate) async fn first_of(a: impl Future<Output = ()>, b: impl Future<Output = ()>) {
    let mut a = std::pin::pin!(a);
    let mut b = std::pin::pin!(b);
    std::future::poll_fn(|cx: &mut Context<'_>| {
        if a.as_mut().poll(cx).is_ready() || b.as_mut().poll(cx).is_ready() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    })
    .await
}
