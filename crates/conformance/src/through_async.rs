//! The embedded store driven through its async API (feature `async`): [`AsyncDriven`] and
//! [`AsyncDrivenDlq`] implement the backend traits by awaiting the
//! `deadletter::async_api` futures on a tokio runtime, one `block_on` per call, so every
//! scenario of the suite, the seed scenarios first, runs on the async API's enqueue,
//! lease (waiting ones included), ack, retry, dead-letter and DLQ operations. What the
//! async API leaves to the blocking handles (alerts, analysis, id listings) is forwarded
//! to them.

use std::sync::Arc;
use std::time::Duration;

use deadletter::async_api::{AsyncDlq, AsyncQueue};
use deadletter::backend::WorkerQueue;
use deadletter::dlq::{Analysis, DeadLetter, DlqAlert, DlqStats};
use deadletter::queue::{EnqueueOptions, FailureOutcome, FailureReport, MessageId, QueueStats};
use deadletter::{replay::ReplayReport, Result};
use deadletter::{DeadLetterQueue, Filter, Message, MessageQueue, Page, Queue, ReplayOptions};

/// The runtime every call is driven on (multi-threaded: the worker pool's threads call
/// in at once).
pub type Runtime = Arc<tokio::runtime::Runtime>;

/// A runtime for [`AsyncDriven`] handles.
pub fn runtime() -> Runtime {
    Arc::new(
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_time()
            .build()
            .expect("a tokio runtime"),
    )
}

/// An embedded queue used through [`AsyncQueue`].
#[derive(Clone)]
pub struct AsyncDriven {
    queue: AsyncQueue,
    rt: Runtime,
}

impl AsyncDriven {
    /// `queue` driven on `rt`.
    pub fn new(queue: &Queue, rt: &Runtime) -> Self {
        AsyncDriven {
            queue: AsyncQueue::new(queue),
            rt: Arc::clone(rt),
        }
    }
}

/// An embedded DLQ used through [`AsyncDlq`].
#[derive(Clone)]
pub struct AsyncDrivenDlq {
    dlq: AsyncDlq,
    rt: Runtime,
}

impl AsyncDrivenDlq {
    /// `dlq` driven on `rt`.
    pub fn new(dlq: &deadletter::Dlq, rt: &Runtime) -> Self {
        AsyncDrivenDlq {
            dlq: AsyncDlq::new(dlq),
            rt: Arc::clone(rt),
        }
    }
}

impl MessageQueue for AsyncDriven {
    type Message = Message;
    type Dlq = AsyncDrivenDlq;

    fn name(&self) -> &str {
        self.queue.name()
    }
    fn dlq(&self) -> AsyncDrivenDlq {
        AsyncDrivenDlq::new(self.queue.dlq().dlq(), &self.rt)
    }
    fn with_policy(&self, max_attempts: u32, lease: Duration) -> Result<Self> {
        let queue = self.queue.queue().with_policy(max_attempts, lease)?;
        Ok(AsyncDriven::new(&queue, &self.rt))
    }
    fn now_ms(&self) -> u64 {
        self.queue.queue().now_ms()
    }
    fn enqueue_with(
        &self,
        payload: impl AsRef<[u8]>,
        options: &EnqueueOptions,
    ) -> Result<MessageId> {
        self.rt.block_on(self.queue.enqueue_with(payload, options))
    }
    fn enqueue_batch<P: AsRef<[u8]>>(&self, payloads: &[P]) -> Result<Vec<MessageId>> {
        self.rt.block_on(self.queue.enqueue_batch(payloads))
    }
    fn lease(&self, max: usize) -> Result<Vec<Message>> {
        self.rt.block_on(self.queue.lease(max))
    }
    fn lease_wait(&self, max: usize, timeout: Duration) -> Result<Vec<Message>> {
        self.rt.block_on(self.queue.lease_wait(max, timeout))
    }
    fn ack_all(&self, msgs: &[Message]) -> Result<()> {
        self.rt.block_on(self.queue.ack_all(msgs))
    }
    fn ack_and_lease(&self, done: &Message, max: usize) -> Result<Vec<Message>> {
        self.rt.block_on(self.queue.ack_and_lease(done, max))
    }
    fn extend(&self, msg: &Message, visibility: Duration) -> Result<()> {
        self.rt.block_on(self.queue.extend(msg, visibility))
    }
    fn retry(
        &self,
        msg: &Message,
        report: &FailureReport<'_>,
        retry_at_ms: u64,
    ) -> Result<FailureOutcome> {
        self.rt.block_on(self.queue.retry(msg, report, retry_at_ms))
    }
    fn dead_letter(&self, msg: &Message, report: &FailureReport<'_>) -> Result<()> {
        self.rt.block_on(self.queue.dead_letter(msg, report))
    }
    fn stats(&self) -> Result<QueueStats> {
        Ok(self.queue.stats())
    }
}

/// The worker pool's batching left to its defaults, built on the async calls above.
impl WorkerQueue for AsyncDriven {}

impl DeadLetterQueue for AsyncDrivenDlq {
    fn name(&self) -> String {
        self.dlq.dlq().name()
    }
    fn queue_name(&self) -> &str {
        self.dlq.dlq().queue_name()
    }
    fn len(&self) -> Result<u64> {
        Ok(self.dlq.dlq().len())
    }
    fn list(&self, filter: &Filter, page: Page) -> Result<Vec<DeadLetter>> {
        self.rt.block_on(self.dlq.list(filter, page))
    }
    fn get(&self, id: MessageId) -> Result<DeadLetter> {
        self.rt.block_on(self.dlq.get(id))
    }
    fn ids(&self, filter: &Filter, limit: Option<usize>) -> Result<Vec<MessageId>> {
        self.dlq.dlq().ids(filter, limit)
    }
    fn stats(&self) -> Result<DlqStats> {
        self.rt.block_on(self.dlq.stats())
    }
    fn analyze(&self, filter: &Filter) -> Result<Analysis> {
        self.dlq.dlq().analyze(filter)
    }
    fn replay(&self, filter: &Filter, options: &ReplayOptions) -> Result<ReplayReport> {
        self.rt.block_on(self.dlq.replay(filter, options))
    }
    fn replay_ids(&self, ids: &[MessageId], options: &ReplayOptions) -> Result<ReplayReport> {
        self.rt.block_on(self.dlq.replay_ids(ids, options))
    }
    fn replay_one(&self, id: MessageId, options: &ReplayOptions) -> Result<()> {
        self.rt.block_on(self.dlq.replay_one(id, options))
    }
    fn replay_corrected(
        &self,
        id: MessageId,
        payload: impl AsRef<[u8]>,
        options: &ReplayOptions,
    ) -> Result<()> {
        self.rt
            .block_on(self.dlq.replay_corrected(id, payload, options))
    }
    fn mark_reprocessed(&self, id: MessageId, success: bool) -> Result<()> {
        self.rt.block_on(self.dlq.mark_reprocessed(id, success))
    }
    fn delete(&self, id: MessageId) -> Result<()> {
        self.rt.block_on(self.dlq.delete(id))
    }
    fn delete_matching(&self, filter: &Filter) -> Result<u64> {
        self.rt.block_on(self.dlq.delete_matching(filter))
    }
    fn purge(&self, older_than: Duration, include_pending: bool) -> Result<u64> {
        self.rt
            .block_on(self.dlq.purge(older_than, include_pending))
    }
    fn on_threshold(
        &self,
        threshold: u64,
        callback: impl Fn(&DlqAlert) + Send + Sync + 'static,
    ) -> Result<()> {
        self.dlq.dlq().on_threshold(threshold, callback)
    }
}
