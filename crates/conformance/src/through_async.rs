//! A backend driven through its async API (feature `async`): [`AsyncDriven`] and
//! [`AsyncDrivenDlq`] implement the backend traits by awaiting the futures of any
//! [`AsyncMessageQueue`] and [`AsyncDeadLetterQueue`] on a tokio runtime, one `block_on`
//! per call, so every scenario of the suite, the seed scenarios first, runs on the async
//! API's enqueue, lease (waiting ones included), ack, retry, dead-letter and DLQ
//! operations: the embedded store's (`tests/embedded_async.rs`) and the JetStream
//! backend's (its `tests/conformance_async.rs`). What the async traits leave to the
//! blocking handles (alerts, analysis, id listings, a policy change) is forwarded to them.

use std::sync::Arc;
use std::time::Duration;

use deadletter::async_api::{AsyncDeadLetterQueue, AsyncMessageQueue};
use deadletter::backend::WorkerQueue;
use deadletter::dlq::{Analysis, DeadLetter, DlqAlert, DlqStats};
use deadletter::queue::{EnqueueOptions, FailureOutcome, FailureReport, MessageId, QueueStats};
use deadletter::{replay::ReplayReport, Result};
use deadletter::{DeadLetterQueue, Filter, MessageQueue, Page, ReplayOptions};

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

/// A queue used through its async handle `Q`.
#[derive(Clone)]
pub struct AsyncDriven<Q> {
    queue: Q,
    rt: Runtime,
}

impl<Q: AsyncMessageQueue> AsyncDriven<Q> {
    /// `queue`'s async handle, driven on `rt`.
    pub fn new(queue: &Q::Blocking, rt: &Runtime) -> Self {
        AsyncDriven {
            queue: Q::from_blocking(queue),
            rt: Arc::clone(rt),
        }
    }
}

/// A DLQ used through its async handle `D`.
#[derive(Clone)]
pub struct AsyncDrivenDlq<D> {
    dlq: D,
    rt: Runtime,
}

impl<D: AsyncDeadLetterQueue> AsyncDrivenDlq<D> {
    /// `dlq`'s async handle, driven on `rt`.
    pub fn new(dlq: &D::Blocking, rt: &Runtime) -> Self {
        AsyncDrivenDlq {
            dlq: D::from_blocking(dlq),
            rt: Arc::clone(rt),
        }
    }
}

impl<Q: AsyncMessageQueue> MessageQueue for AsyncDriven<Q> {
    type Message = Q::Message;
    type Dlq = AsyncDrivenDlq<Q::Dlq>;

    fn name(&self) -> &str {
        self.queue.name()
    }
    fn dlq(&self) -> Self::Dlq {
        AsyncDrivenDlq {
            dlq: self.queue.dlq(),
            rt: Arc::clone(&self.rt),
        }
    }
    fn with_policy(&self, max_attempts: u32, lease: Duration) -> Result<Self> {
        let queue = self.queue.blocking().with_policy(max_attempts, lease)?;
        Ok(AsyncDriven::new(&queue, &self.rt))
    }
    fn now_ms(&self) -> u64 {
        self.queue.blocking().now_ms()
    }
    fn enqueue_with(
        &self,
        payload: impl AsRef<[u8]>,
        options: &EnqueueOptions,
    ) -> Result<MessageId> {
        self.rt
            .block_on(self.queue.enqueue_with(payload.as_ref(), options))
    }
    fn enqueue_batch<P: AsRef<[u8]>>(&self, payloads: &[P]) -> Result<Vec<MessageId>> {
        let payloads: Vec<&[u8]> = payloads.iter().map(AsRef::as_ref).collect();
        self.rt.block_on(self.queue.enqueue_batch(&payloads))
    }
    fn lease(&self, max: usize) -> Result<Vec<Q::Message>> {
        self.rt.block_on(self.queue.lease(max))
    }
    fn lease_wait(&self, max: usize, timeout: Duration) -> Result<Vec<Q::Message>> {
        self.rt.block_on(self.queue.lease_wait(max, timeout))
    }
    fn ack_all(&self, msgs: &[Q::Message]) -> Result<()> {
        self.rt.block_on(self.queue.ack_all(msgs))
    }
    fn ack_and_lease(&self, done: &Q::Message, max: usize) -> Result<Vec<Q::Message>> {
        self.rt.block_on(self.queue.ack_and_lease(done, max))
    }
    fn extend(&self, msg: &Q::Message, visibility: Duration) -> Result<()> {
        self.rt.block_on(self.queue.extend(msg, visibility))
    }
    fn retry(
        &self,
        msg: &Q::Message,
        report: &FailureReport<'_>,
        retry_at_ms: u64,
    ) -> Result<FailureOutcome> {
        self.rt.block_on(self.queue.retry(msg, report, retry_at_ms))
    }
    fn dead_letter(&self, msg: &Q::Message, report: &FailureReport<'_>) -> Result<()> {
        self.rt.block_on(self.queue.dead_letter(msg, report))
    }
    fn stats(&self) -> Result<QueueStats> {
        self.rt.block_on(self.queue.stats())
    }
}

/// The worker pool's batching left to its defaults, built on the async calls above.
impl<Q: AsyncMessageQueue> WorkerQueue for AsyncDriven<Q> {}

impl<D: AsyncDeadLetterQueue> DeadLetterQueue for AsyncDrivenDlq<D> {
    fn name(&self) -> String {
        self.dlq.blocking().name()
    }
    fn queue_name(&self) -> &str {
        self.dlq.blocking().queue_name()
    }
    fn len(&self) -> Result<u64> {
        self.dlq.blocking().len()
    }
    fn list(&self, filter: &Filter, page: Page) -> Result<Vec<DeadLetter>> {
        self.rt.block_on(self.dlq.list(filter, page))
    }
    fn get(&self, id: MessageId) -> Result<DeadLetter> {
        self.rt.block_on(self.dlq.get(id))
    }
    fn ids(&self, filter: &Filter, limit: Option<usize>) -> Result<Vec<MessageId>> {
        self.dlq.blocking().ids(filter, limit)
    }
    fn stats(&self) -> Result<DlqStats> {
        self.rt.block_on(self.dlq.stats())
    }
    fn analyze(&self, filter: &Filter) -> Result<Analysis> {
        self.dlq.blocking().analyze(filter)
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
            .block_on(self.dlq.replay_corrected(id, payload.as_ref(), options))
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
        self.dlq.blocking().on_threshold(threshold, callback)
    }
}
