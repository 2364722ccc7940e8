//! The async backend contract: [`AsyncMessageQueue`] and [`AsyncDeadLetterQueue`], the
//! core traits ([`MessageQueue`], [`DeadLetterQueue`]) as futures, so that code written
//! against them runs on the embedded store ([`AsyncQueue`], [`AsyncDlq`]) and on any other
//! backend that implements them (the JetStream backend's async handles) alike.
//!
//! Each method means what its blocking namesake means; its future resolves to what the
//! blocking call returns. What the async traits leave out (the DLQ's analysis, id
//! listings, alerts; a queue's policy change) is reached through [`blocking`]: those calls
//! read or compute, and a program calls them from a blocking context
//! (`tokio::task::spawn_blocking`) or not at all on a runtime thread.
//!
//! Invariant: no future of an implementation blocks the thread that polls it (no
//! `block_on`, no wait for an fsync or a server on the polling thread).
//!
//! [`blocking`]: AsyncMessageQueue::blocking
//! [`AsyncQueue`]: super::AsyncQueue
//! [`AsyncDlq`]: super::AsyncDlq

use std::future::Future;
use std::time::Duration;

use super::{AsyncDlq, AsyncQueue};
use crate::api::backend::{DeadLetterQueue, Delivery, MessageQueue};
use crate::api::core::types::{DeadLetter, MessageId};
use crate::api::dlq::Dlq;
use crate::api::dlq::{DlqStats, Filter, Page, ReplayOptions, ReplayReport};
use crate::api::queue::{EnqueueOptions, FailureOutcome, FailureReport, QueueStats};
use crate::api::queue::{Message, Queue};
use crate::error::Result;

/// A queue whose operations are futures: [`MessageQueue`] on an async runtime.
pub trait AsyncMessageQueue: Clone + Send + Sync + 'static {
    /// A delivery (as [`MessageQueue::Message`]).
    type Message: Delivery + Clone + Send + Sync + 'static;
    /// The DLQ's async handle.
    type Dlq: AsyncDeadLetterQueue;
    /// The blocking handle on the same queue, for what the async trait leaves out.
    type Blocking: MessageQueue<Message = Self::Message>;

    /// The async handle on `queue`.
    fn from_blocking(queue: &Self::Blocking) -> Self;
    /// The blocking handle on the same queue.
    fn blocking(&self) -> &Self::Blocking;
    /// The queue's name.
    fn name(&self) -> &str;
    /// The DLQ of this queue.
    fn dlq(&self) -> Self::Dlq;
    /// Enqueues one message ([`MessageQueue::enqueue_with`]).
    fn enqueue_with(
        &self,
        payload: &[u8],
        options: &EnqueueOptions,
    ) -> impl Future<Output = Result<MessageId>> + Send;
    /// Enqueues one message with the default options.
    fn enqueue(&self, payload: &[u8]) -> impl Future<Output = Result<MessageId>> + Send {
        async move { self.enqueue_with(payload, &EnqueueOptions::default()).await }
    }
    /// Enqueues messages in one batch ([`MessageQueue::enqueue_batch`]).
    fn enqueue_batch<P: AsRef<[u8]> + Sync>(
        &self,
        payloads: &[P],
    ) -> impl Future<Output = Result<Vec<MessageId>>> + Send;
    /// Leases up to `max` ready messages without waiting ([`MessageQueue::lease`]).
    fn lease(&self, max: usize) -> impl Future<Output = Result<Vec<Self::Message>>> + Send;
    /// Leases up to `max` messages, waiting up to `timeout` for the first
    /// ([`MessageQueue::lease_wait`]) without a thread parked.
    fn lease_wait(
        &self,
        max: usize,
        timeout: Duration,
    ) -> impl Future<Output = Result<Vec<Self::Message>>> + Send;
    /// Acknowledges messages handled ([`MessageQueue::ack_all`]).
    fn ack_all(&self, msgs: &[Self::Message]) -> impl Future<Output = Result<()>> + Send;
    /// Acknowledges one message.
    fn ack(&self, msg: &Self::Message) -> impl Future<Output = Result<()>> + Send {
        self.ack_all(std::slice::from_ref(msg))
    }
    /// Acknowledges `done` and leases up to `max` more ([`MessageQueue::ack_and_lease`]):
    /// by default the two calls one after the other; a backend that can do both in one
    /// step overrides it.
    fn ack_and_lease(
        &self,
        done: &Self::Message,
        max: usize,
    ) -> impl Future<Output = Result<Vec<Self::Message>>> + Send {
        async move {
            self.ack(done).await?;
            self.lease(max).await
        }
    }
    /// Extends a lease ([`MessageQueue::extend`]).
    fn extend(
        &self,
        msg: &Self::Message,
        visibility: Duration,
    ) -> impl Future<Output = Result<()>> + Send;
    /// Reports a failed delivery for a retry at `retry_at_ms` ([`MessageQueue::retry`]).
    fn retry(
        &self,
        msg: &Self::Message,
        report: &FailureReport<'_>,
        retry_at_ms: u64,
    ) -> impl Future<Output = Result<FailureOutcome>> + Send;
    /// Moves a message to the DLQ ([`MessageQueue::dead_letter`]).
    fn dead_letter(
        &self,
        msg: &Self::Message,
        report: &FailureReport<'_>,
    ) -> impl Future<Output = Result<()>> + Send;
    /// The queue's counters ([`MessageQueue::stats`]).
    fn stats(&self) -> impl Future<Output = Result<QueueStats>> + Send;
}

/// A DLQ whose operations are futures: [`DeadLetterQueue`] on an async runtime.
pub trait AsyncDeadLetterQueue: Clone + Send + Sync + 'static {
    /// The blocking handle on the same DLQ, for what the async trait leaves out.
    type Blocking: DeadLetterQueue;

    /// The async handle on `dlq`.
    fn from_blocking(dlq: &Self::Blocking) -> Self;
    /// The blocking handle on the same DLQ.
    fn blocking(&self) -> &Self::Blocking;
    /// A page of entries ([`DeadLetterQueue::list`]).
    fn list(
        &self,
        filter: &Filter,
        page: Page,
    ) -> impl Future<Output = Result<Vec<DeadLetter>>> + Send;
    /// One entry ([`DeadLetterQueue::get`]).
    fn get(&self, id: MessageId) -> impl Future<Output = Result<DeadLetter>> + Send;
    /// The DLQ's counters ([`DeadLetterQueue::stats`]).
    fn stats(&self) -> impl Future<Output = Result<DlqStats>> + Send;
    /// Replays the entries `filter` selects ([`DeadLetterQueue::replay`]).
    fn replay(
        &self,
        filter: &Filter,
        options: &ReplayOptions,
    ) -> impl Future<Output = Result<ReplayReport>> + Send;
    /// Replays entries by id ([`DeadLetterQueue::replay_ids`]).
    fn replay_ids(
        &self,
        ids: &[MessageId],
        options: &ReplayOptions,
    ) -> impl Future<Output = Result<ReplayReport>> + Send;
    /// Replays one entry ([`DeadLetterQueue::replay_one`]).
    fn replay_one(
        &self,
        id: MessageId,
        options: &ReplayOptions,
    ) -> impl Future<Output = Result<()>> + Send;
    /// Replays one entry with a corrected payload ([`DeadLetterQueue::replay_corrected`]).
    fn replay_corrected(
        &self,
        id: MessageId,
        payload: &[u8],
        options: &ReplayOptions,
    ) -> impl Future<Output = Result<()>> + Send;
    /// Records an entry's outcome handled outside ([`DeadLetterQueue::mark_reprocessed`]).
    fn mark_reprocessed(
        &self,
        id: MessageId,
        success: bool,
    ) -> impl Future<Output = Result<()>> + Send;
    /// Deletes one entry ([`DeadLetterQueue::delete`]).
    fn delete(&self, id: MessageId) -> impl Future<Output = Result<()>> + Send;
    /// Deletes the entries `filter` selects ([`DeadLetterQueue::delete_matching`]).
    fn delete_matching(&self, filter: &Filter) -> impl Future<Output = Result<u64>> + Send;
    /// Deletes entries older than `older_than` ([`DeadLetterQueue::purge`]).
    fn purge(
        &self,
        older_than: Duration,
        include_pending: bool,
    ) -> impl Future<Output = Result<u64>> + Send;
}

/// The embedded store's queue: its inherent methods, which these forward to.
impl AsyncMessageQueue for AsyncQueue {
    type Message = Message;
    type Dlq = AsyncDlq;
    type Blocking = Queue;

    fn from_blocking(queue: &Queue) -> Self {
        AsyncQueue::new(queue)
    }
    fn blocking(&self) -> &Queue {
        self.queue()
    }
    fn name(&self) -> &str {
        AsyncQueue::name(self)
    }
    fn dlq(&self) -> AsyncDlq {
        AsyncQueue::dlq(self)
    }
    fn enqueue_with(
        &self,
        payload: &[u8],
        options: &EnqueueOptions,
    ) -> impl Future<Output = Result<MessageId>> + Send {
        AsyncQueue::enqueue_with(self, payload, options)
    }
    fn enqueue_batch<P: AsRef<[u8]> + Sync>(
        &self,
        payloads: &[P],
    ) -> impl Future<Output = Result<Vec<MessageId>>> + Send {
        AsyncQueue::enqueue_batch(self, payloads)
    }
    fn lease(&self, max: usize) -> impl Future<Output = Result<Vec<Message>>> + Send {
        AsyncQueue::lease(self, max)
    }
    fn lease_wait(
        &self,
        max: usize,
        timeout: Duration,
    ) -> impl Future<Output = Result<Vec<Message>>> + Send {
        AsyncQueue::lease_wait(self, max, timeout)
    }
    fn ack_all(&self, msgs: &[Message]) -> impl Future<Output = Result<()>> + Send {
        AsyncQueue::ack_all(self, msgs)
    }
    fn ack_and_lease(
        &self,
        done: &Message,
        max: usize,
    ) -> impl Future<Output = Result<Vec<Message>>> + Send {
        AsyncQueue::ack_and_lease(self, done, max)
    }
    fn extend(
        &self,
        msg: &Message,
        visibility: Duration,
    ) -> impl Future<Output = Result<()>> + Send {
        AsyncQueue::extend(self, msg, visibility)
    }
    fn retry(
        &self,
        msg: &Message,
        report: &FailureReport<'_>,
        retry_at_ms: u64,
    ) -> impl Future<Output = Result<FailureOutcome>> + Send {
        AsyncQueue::retry(self, msg, report, retry_at_ms)
    }
    fn dead_letter(
        &self,
        msg: &Message,
        report: &FailureReport<'_>,
    ) -> impl Future<Output = Result<()>> + Send {
        AsyncQueue::dead_letter(self, msg, report)
    }
    fn stats(&self) -> impl Future<Output = Result<QueueStats>> + Send {
        std::future::ready(Ok(AsyncQueue::stats(self)))
    }
}

/// The embedded store's DLQ: its inherent methods, which these forward to.
impl AsyncDeadLetterQueue for AsyncDlq {
    type Blocking = Dlq;

    fn from_blocking(dlq: &Dlq) -> Self {
        AsyncDlq::new(dlq)
    }
    fn blocking(&self) -> &Dlq {
        self.dlq()
    }
    fn list(
        &self,
        filter: &Filter,
        page: Page,
    ) -> impl Future<Output = Result<Vec<DeadLetter>>> + Send {
        AsyncDlq::list(self, filter, page)
    }
    fn get(&self, id: MessageId) -> impl Future<Output = Result<DeadLetter>> + Send {
        AsyncDlq::get(self, id)
    }
    fn stats(&self) -> impl Future<Output = Result<DlqStats>> + Send {
        AsyncDlq::stats(self)
    }
    fn replay(
        &self,
        filter: &Filter,
        options: &ReplayOptions,
    ) -> impl Future<Output = Result<ReplayReport>> + Send {
        AsyncDlq::replay(self, filter, options)
    }
    fn replay_ids(
        &self,
        ids: &[MessageId],
        options: &ReplayOptions,
    ) -> impl Future<Output = Result<ReplayReport>> + Send {
        AsyncDlq::replay_ids(self, ids, options)
    }
    fn replay_one(
        &self,
        id: MessageId,
        options: &ReplayOptions,
    ) -> impl Future<Output = Result<()>> + Send {
        AsyncDlq::replay_one(self, id, options)
    }
    fn replay_corrected(
        &self,
        id: MessageId,
        payload: &[u8],
        options: &ReplayOptions,
    ) -> impl Future<Output = Result<()>> + Send {
        AsyncDlq::replay_corrected(self, id, payload, options)
    }
    fn mark_reprocessed(
        &self,
        id: MessageId,
        success: bool,
    ) -> impl Future<Output = Result<()>> + Send {
        AsyncDlq::mark_reprocessed(self, id, success)
    }
    fn delete(&self, id: MessageId) -> impl Future<Output = Result<()>> + Send {
        AsyncDlq::delete(self, id)
    }
    fn delete_matching(&self, filter: &Filter) -> impl Future<Output = Result<u64>> + Send {
        AsyncDlq::delete_matching(self, filter)
    }
    fn purge(
        &self,
        older_than: Duration,
        include_pending: bool,
    ) -> impl Future<Output = Result<u64>> + Send {
        AsyncDlq::purge(self, older_than, include_pending)
    }
}
