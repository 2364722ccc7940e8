//! The JetStream backend's async handles: [`AsyncJetStreamQueue`] and
//! [`AsyncJetStreamDlq`] implement `deadletter`'s async traits
//! ([`AsyncMessageQueue`], [`AsyncDeadLetterQueue`]) with the backend's own futures,
//! awaited on the caller's runtime: no `block_on` inside, so a tokio program calls them
//! from its tasks. The blocking handles ([`JetStreamQueue`], [`JetStreamDlq`]) run the
//! same futures to completion on the connection's runtime: they are the facade built on
//! these, not the other way round.
//!
//! Opening a queue (`JetStream::queue`) is still a blocking call: it creates or checks the
//! streams and the consumer once, before any message flows; a tokio program opens its
//! queues at start-up or inside `spawn_blocking`.
//!
//! Cancel-safety: a dropped future stops where it is. A publish already sent may still be
//! stored (an enqueue whose future is dropped may or may not have enqueued; its id is not
//! known), an acknowledgement already sent stands, and a move to the DLQ dropped after its
//! publish but before the original's termination leaves the message to be delivered again
//! and dead-lettered once (the DLQ publish's deduplication id): never lost, never doubled
//! in the DLQ.

use std::future::Future;
use std::time::Duration;

use deadletter::async_api::{AsyncDeadLetterQueue, AsyncMessageQueue};
use deadletter::dlq::{DeadLetter, DlqStats};
use deadletter::queue::{EnqueueOptions, FailureOutcome, FailureReport, MessageId, QueueStats};
use deadletter::replay::ReplayReport;
use deadletter::{Filter, Page, ReplayOptions, Result};

use crate::{JetStreamDlq, JetStreamMessage, JetStreamQueue};

/// A JetStream queue with an async API: the same queue as the [`JetStreamQueue`] it was
/// made from (`AsyncJetStreamQueue::from_blocking`, or [`JetStreamQueue::asynchronous`]).
/// Cheap to clone.
#[derive(Clone, Debug)]
pub struct AsyncJetStreamQueue(JetStreamQueue);

/// A JetStream DLQ with an async API. Cheap to clone.
#[derive(Clone, Debug)]
pub struct AsyncJetStreamDlq(JetStreamDlq);

impl JetStreamQueue {
    /// This queue's async handle.
    pub fn asynchronous(&self) -> AsyncJetStreamQueue {
        AsyncJetStreamQueue(self.clone())
    }
}

impl JetStreamDlq {
    /// This DLQ's async handle.
    pub fn asynchronous(&self) -> AsyncJetStreamDlq {
        AsyncJetStreamDlq(self.clone())
    }
}

impl AsyncMessageQueue for AsyncJetStreamQueue {
    type Message = JetStreamMessage;
    type Dlq = AsyncJetStreamDlq;
    type Blocking = JetStreamQueue;

    fn from_blocking(queue: &JetStreamQueue) -> Self {
        queue.asynchronous()
    }
    fn blocking(&self) -> &JetStreamQueue {
        &self.0
    }
    fn name(&self) -> &str {
        &self.0.info().name
    }
    fn dlq(&self) -> AsyncJetStreamDlq {
        self.0.dlq_handle().asynchronous()
    }
    async fn enqueue_with(&self, payload: &[u8], options: &EnqueueOptions) -> Result<MessageId> {
        let ids = self
            .0
            .publish_all(std::iter::once(payload), options)
            .await?;
        Ok(ids[0])
    }
    async fn enqueue_batch<P: AsRef<[u8]> + Sync>(&self, payloads: &[P]) -> Result<Vec<MessageId>> {
        let options = EnqueueOptions::default();
        self.0
            .publish_all(payloads.iter().map(|p| p.as_ref()), &options)
            .await
    }
    fn lease(&self, max: usize) -> impl Future<Output = Result<Vec<JetStreamMessage>>> + Send {
        self.0.lease_async(max, None)
    }
    fn lease_wait(
        &self,
        max: usize,
        timeout: Duration,
    ) -> impl Future<Output = Result<Vec<JetStreamMessage>>> + Send {
        self.0.lease_async(max, Some(timeout))
    }
    fn ack_all(&self, msgs: &[JetStreamMessage]) -> impl Future<Output = Result<()>> + Send {
        self.0.ack_all_async(msgs)
    }
    fn extend(
        &self,
        msg: &JetStreamMessage,
        _visibility: Duration,
    ) -> impl Future<Output = Result<()>> + Send {
        self.0.extend_async(msg)
    }
    fn retry(
        &self,
        msg: &JetStreamMessage,
        report: &FailureReport<'_>,
        retry_at_ms: u64,
    ) -> impl Future<Output = Result<FailureOutcome>> + Send {
        self.0.retry_and_release(msg, report, retry_at_ms)
    }
    fn dead_letter(
        &self,
        msg: &JetStreamMessage,
        report: &FailureReport<'_>,
    ) -> impl Future<Output = Result<()>> + Send {
        self.0.dead_letter_async(msg, report)
    }
    fn stats(&self) -> impl Future<Output = Result<QueueStats>> + Send {
        self.0.stats_async()
    }
}

impl AsyncDeadLetterQueue for AsyncJetStreamDlq {
    type Blocking = JetStreamDlq;

    fn from_blocking(dlq: &JetStreamDlq) -> Self {
        dlq.asynchronous()
    }
    fn blocking(&self) -> &JetStreamDlq {
        &self.0
    }
    fn list(
        &self,
        filter: &Filter,
        page: Page,
    ) -> impl Future<Output = Result<Vec<DeadLetter>>> + Send {
        self.0.list_async(filter, page)
    }
    fn get(&self, id: MessageId) -> impl Future<Output = Result<DeadLetter>> + Send {
        self.0.get_async(id)
    }
    fn stats(&self) -> impl Future<Output = Result<DlqStats>> + Send {
        self.0.stats_async()
    }
    fn replay(
        &self,
        filter: &Filter,
        options: &ReplayOptions,
    ) -> impl Future<Output = Result<ReplayReport>> + Send {
        self.0.replay_async(filter, options)
    }
    fn replay_ids(
        &self,
        ids: &[MessageId],
        options: &ReplayOptions,
    ) -> impl Future<Output = Result<ReplayReport>> + Send {
        self.0.replay_ids_async(ids, options)
    }
    fn replay_one(
        &self,
        id: MessageId,
        options: &ReplayOptions,
    ) -> impl Future<Output = Result<()>> + Send {
        self.0.replay_one_async(id, None, options)
    }
    fn replay_corrected(
        &self,
        id: MessageId,
        payload: &[u8],
        options: &ReplayOptions,
    ) -> impl Future<Output = Result<()>> + Send {
        self.0.replay_one_async(id, Some(payload), options)
    }
    fn mark_reprocessed(
        &self,
        id: MessageId,
        success: bool,
    ) -> impl Future<Output = Result<()>> + Send {
        self.0.mark_reprocessed_async(id, success)
    }
    fn delete(&self, id: MessageId) -> impl Future<Output = Result<()>> + Send {
        self.0.delete_async(id)
    }
    fn delete_matching(&self, filter: &Filter) -> impl Future<Output = Result<u64>> + Send {
        self.0.delete_matching_async(filter)
    }
    fn purge(
        &self,
        older_than: Duration,
        include_pending: bool,
    ) -> impl Future<Output = Result<u64>> + Send {
        self.0.purge_async(older_than, include_pending)
    }
}
