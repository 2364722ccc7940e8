//! [`AsyncWorkerPool`]: the worker pool for async handlers, on tokio tasks. It keeps the
//! thread pool's promises with the thread pool's policy code (`failure_policy`: the
//! classification, the retry delays, the move to the DLQ; the backend's attempt counting),
//! on the [`AsyncQueue`] API:
//! - up to `concurrency` handlers run at once, each message leased alone (its delivery
//!   durably counted in the log before its handler runs, so a handler that kills the
//!   process is charged, and a message that keeps killing it reaches the DLQ after
//!   `max_attempts` restarts: the engine's suspects and `ConsumerDied`);
//! - `Ok(())` acks; a permanent failure dead-letters at once; a transient failure or a
//!   panic (caught by its task) is retried after the [`Retry`] delay, and dead-lettered on
//!   the last attempt, with the failure history in the envelope;
//! - a handler that runs past half its lease has the lease extended (a heartbeat in the
//!   worker's task, no thread);
//! - shutdown: once the signal completes no new message is leased; running handlers may
//!   finish for up to the grace period; those still running then are aborted and their
//!   messages released (visible again at once, the delivery counted once, as it was when
//!   leased: nothing is counted twice). Every outcome is durable when `run` returns.
//!
//! Each worker's handler runs in a task of its own (`tokio::spawn`), so a panic is caught
//! as the task's failure and a handler's future may be aborted without touching the
//! worker's state.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::queue::AsyncQueue;
use crate::api::backend::MessageQueue;
use crate::api::classify::Classifier;
use crate::api::core::types::Failure;
use crate::api::failure_policy::{on_failure, panic_failure, Action};
use crate::api::queue::{FailureOutcome, FailureReport, Message, Queue};
use crate::api::retry::Retry;
use crate::api::worker::{PoolCounters, ShutdownReport};
use crate::error::{Error, Result};
use crate::rng::SplitMix64;

/// An async message handler: any `Fn(Message) -> impl Future<Output = Result<(),
/// Failure>>` whose future is `Send` is one. The handler gets the message by value (a
/// cheap view of the log's memory map), so its future may hold it across awaits.
pub trait AsyncHandler: Send + Sync + 'static {
    /// The handler's future.
    type Future: Future<Output = std::result::Result<(), Failure>> + Send + 'static;
    /// Handles one message.
    fn handle(&self, msg: Message) -> Self::Future;
}

impl<F, Fut> AsyncHandler for F
where
    F: Fn(Message) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = std::result::Result<(), Failure>> + Send + 'static,
{
    type Future = Fut;
    fn handle(&self, msg: Message) -> Fut {
        self(msg)
    }
}

/// Builder and runner of an async worker pool over one embedded queue (feature `async`;
/// needs a tokio runtime with its timer).
///
/// ```
/// use std::time::Duration;
/// use deadletter::{Config, Failure, Message, Store};
/// use deadletter::async_api::AsyncWorkerPool;
/// use deadletter::pool::Retry;
///
/// # let dir = tempfile::tempdir().unwrap();
/// # let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
/// # rt.block_on(async {
/// let store = Store::open(&dir, Config::fast())?;
/// let orders = store.queue("orders")?;
/// orders.enqueue_batch(&["ORD-1", "ORD-2", "poison"])?;
/// let report = AsyncWorkerPool::new(&orders)
///     .concurrency(8)
///     .retry(Retry::exponential(Duration::from_millis(1)).max_attempts(3))
///     .run_until_idle(|msg: Message| async move {
///         match msg.text() {
///             Some(order) if order.starts_with("ORD-") => Ok(()), // acked
///             _ => Err(Failure::permanent("InvalidOrder", "not an order")),
///         }
///     })
///     .await?;
/// assert_eq!(report.counters.processed, 2);
/// assert_eq!(orders.dlq().len(), 1);
/// # Ok::<(), deadletter::Error>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct AsyncWorkerPool {
    queue: Queue,
    concurrency: usize,
    retry: Retry,
    lease: Duration,
    grace: Duration,
    name: String,
    idle_poll: Duration,
    classifier: Classifier,
}

impl AsyncWorkerPool {
    /// A pool over `queue`: 1 handler at a time, the default [`Retry`], a 30 s lease, 30 s
    /// of grace at shutdown.
    pub fn new(queue: &Queue) -> Self {
        AsyncWorkerPool {
            queue: queue.clone(),
            concurrency: 1,
            retry: Retry::default(),
            lease: Duration::from_secs(30),
            grace: Duration::from_secs(30),
            name: "async-worker".into(),
            idle_poll: Duration::from_millis(200),
            classifier: Classifier::new(),
        }
    }

    setters! {
        /// How failures converted from errors with `?` are classified (as the thread
        /// pool's [`WorkerPool::classify`](crate::WorkerPool::classify)).
        classify(classifier: Classifier) => classifier = classifier;
        /// How many handlers run at once.
        concurrency(n: usize) => concurrency = n.max(1);
        /// The retry policy (its `max_attempts` becomes the queue's).
        retry(retry: Retry) => retry = retry;
        /// Lease length; handlers running longer get it extended.
        lease(lease: Duration) => lease = lease.max(Duration::from_millis(10));
        /// How long running handlers may go on after the shutdown signal before they are
        /// aborted and their messages released.
        grace(grace: Duration) => grace = grace;
        /// Prefix of worker names (recorded with failures): `{name}-{index}`.
        name(name: impl Into<String>) => name = name.into();
    }

    /// Runs the pool until `shutdown` completes (a `CancellationToken::cancelled()`,
    /// `tokio::signal::ctrl_c()`, any future), then shuts it down gracefully (see the
    /// module docs). Returns the counters, and whether every running handler finished
    /// within the grace period; an error that stopped a worker (a failed write) is
    /// returned after the others stopped.
    ///
    /// Cancel-safety: dropping the future aborts the workers as the end of the grace
    /// period does (running handlers aborted, their messages released); an outcome being
    /// written stands.
    pub async fn run(
        self,
        handler: impl AsyncHandler,
        shutdown: impl Future<Output = ()>,
    ) -> Result<ShutdownReport> {
        let running = self.start(handler)?;
        shutdown.await;
        running.finish(self.grace).await
    }

    /// Runs the pool until the queue is empty (not even a message waiting out a backoff),
    /// no handler runs and every outcome is durable, then stops it as [`Self::run`] does.
    pub async fn run_until_idle(self, handler: impl AsyncHandler) -> Result<ShutdownReport> {
        let running = self.start(handler)?;
        loop {
            let shared = &running.shared;
            let c = running.queue.stats().counts;
            let busy = shared.counters.in_flight.load(Ordering::Acquire);
            if (c.ready == 0 && c.in_flight == 0 && busy == 0) || shared.fatal.lock().is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        running.finish(self.grace).await
    }

    fn start(&self, handler: impl AsyncHandler) -> Result<Running> {
        let queue = self.queue.with_policy(self.retry.max_attempts, self.lease)?;
        let shared = Arc::new(Shared {
            queue: AsyncQueue::new(&queue),
            retry: self.retry.clone(),
            classifier: self.classifier.clone(),
            lease: self.lease,
            idle_poll: self.idle_poll,
            stop: AtomicBool::new(false),
            counters: Counters::default(),
            fatal: Mutex::new(None),
        });
        let handler = Arc::new(handler);
        let mut workers = tokio::task::JoinSet::new();
        for i in 0..self.concurrency {
            let worker = Worker {
                shared: Arc::clone(&shared),
                name: format!("{}-{i}", self.name),
                rng: self.retry.worker_rng(i),
            };
            workers.spawn(worker.run(Arc::clone(&handler)));
        }
        Ok(Running {
            queue,
            shared,
            workers,
        })
    }
}

#[derive(Default)]
struct Counters {
    processed: AtomicU64,
    retried: AtomicU64,
    dead_lettered: AtomicU64,
    in_flight: AtomicU64,
    panics: AtomicU64,
    lost_leases: AtomicU64,
}

impl Counters {
    fn snapshot(&self) -> PoolCounters {
        let l = |c: &AtomicU64| c.load(Ordering::Acquire);
        let mut p = PoolCounters::default();
        p.processed = l(&self.processed);
        p.retried = l(&self.retried);
        p.dead_lettered = l(&self.dead_lettered);
        p.in_flight = l(&self.in_flight);
        p.panics = l(&self.panics);
        p.lost_leases = l(&self.lost_leases);
        p
    }
}

/// What the workers share.
struct Shared {
    queue: AsyncQueue,
    retry: Retry,
    classifier: Classifier,
    lease: Duration,
    idle_poll: Duration,
    stop: AtomicBool,
    counters: Counters,
    /// The first error that stopped a worker.
    fatal: Mutex<Option<Error>>,
}

/// A started pool: its workers' tasks.
struct Running {
    queue: Queue,
    shared: Arc<Shared>,
    workers: tokio::task::JoinSet<()>,
}

impl Running {
    /// Stops leasing, gives running handlers `grace`, aborts the rest (their messages
    /// released), and reports.
    async fn finish(mut self, grace: Duration) -> Result<ShutdownReport> {
        self.shared.stop.store(true, Ordering::Release);
        self.queue.store().wake_consumers();
        let deadline = tokio::time::Instant::now() + grace;
        let mut drained = true;
        loop {
            match tokio::time::timeout_at(deadline, self.workers.join_next()).await {
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(_) => {
                    drained = false;
                    self.workers.abort_all();
                    while self.workers.join_next().await.is_some() {}
                    break;
                }
            }
        }
        // What aborted workers released is made durable before the report.
        self.queue.store().deferred(|| Ok(())).await?;
        let fatal = self.shared.fatal.lock().take();
        if let Some(e) = fatal {
            return Err(e);
        }
        Ok(ShutdownReport {
            counters: self.shared.counters.snapshot(),
            drained,
        })
    }
}

/// One worker: a loop of lease, handle, report.
struct Worker {
    shared: Arc<Shared>,
    name: String,
    rng: SplitMix64,
}

/// A message whose handler runs: dropped before its outcome is reported (the worker
/// aborted), it aborts the handler's task and releases the message.
struct InFlight<'a> {
    shared: &'a Shared,
    msg: Option<Message>,
    task: tokio::task::JoinHandle<std::result::Result<(), Failure>>,
}

impl InFlight<'_> {
    /// The outcome is about to be reported: nothing to release any more.
    fn disarm(&mut self) -> Option<Message> {
        self.shared.counters.in_flight.fetch_sub(1, Ordering::AcqRel);
        self.msg.take()
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if let Some(msg) = self.msg.take() {
            self.task.abort();
            self.shared.counters.in_flight.fetch_sub(1, Ordering::AcqRel);
            // The release is written now; its fsync follows (the pool's end waits for it).
            drop(self.shared.queue.release(&msg, Duration::ZERO));
        }
    }
}

impl Worker {
    async fn run(mut self, handler: Arc<impl AsyncHandler>) {
        if let Err(e) = self.serve(&*handler).await {
            let mut fatal = self.shared.fatal.lock();
            fatal.get_or_insert(e);
            self.shared.stop.store(true, Ordering::Release);
        }
    }

    async fn serve(&mut self, handler: &impl AsyncHandler) -> Result<()> {
        let shared = Arc::clone(&self.shared);
        let q = &shared.queue;
        loop {
            // The epoch before the stop flag: a stop's wake-up after the check ends the wait.
            let seen = q.ready_epoch();
            if shared.stop.load(Ordering::Acquire) {
                return Ok(());
            }
            let mut got = q.lease(1).await?;
            let Some(msg) = got.pop() else {
                q.wait_for_work(seen, Instant::now() + shared.idle_poll).await;
                continue;
            };
            self.handle(handler, msg).await?;
        }
    }

    async fn handle(&mut self, handler: &impl AsyncHandler, msg: Message) -> Result<()> {
        let shared = Arc::clone(&self.shared);
        let q = &shared.queue;
        shared.counters.in_flight.fetch_add(1, Ordering::AcqRel);
        let started = Instant::now();
        let mut running = InFlight {
            shared: &shared,
            task: tokio::spawn(handler.handle(msg.clone())),
            msg: Some(msg),
        };
        let result = loop {
            let beat = tokio::time::sleep(shared.lease / 2);
            let mut beat = std::pin::pin!(beat);
            let joined = std::future::poll_fn(|cx| {
                if let Poll::Ready(r) = std::pin::Pin::new(&mut running.task).poll(cx) {
                    return Poll::Ready(Some(r));
                }
                beat.as_mut().poll(cx).map(|()| None)
            })
            .await;
            match joined {
                Some(r) => break r,
                None => {
                    if let Some(m) = &running.msg {
                        // A message finished meanwhile is refused: nothing to extend.
                        let _ = q.extend(m, shared.lease).await;
                    }
                }
            }
        };
        let duration = started.elapsed();
        q.queue().observe_handler(duration);
        let Some(msg) = running.disarm() else {
            return Ok(());
        };
        let failure = match result {
            Ok(Ok(())) => return self.settle(q.ack(&msg).await, &shared.counters.processed),
            Ok(Err(failure)) => failure,
            Err(e) if e.is_panic() => {
                shared.counters.panics.fetch_add(1, Ordering::Relaxed);
                panic_failure(e.into_panic().as_ref())
            }
            Err(_) => Failure::transient("Cancelled", "the handler's task was cancelled"),
        };
        let now = q.queue().now_ms();
        let (failure, action) = on_failure(
            &shared.classifier,
            &shared.retry,
            failure,
            msg.attempt(),
            now,
            &mut self.rng,
        );
        let report = FailureReport::new(&failure)
            .duration(duration)
            .worker(&self.name);
        match action {
            Action::DeadLetter => {
                let done = q.dead_letter(&msg, &report).await;
                self.settle(done, &shared.counters.dead_lettered)
            }
            Action::RetryAt(at) => match q.retry(&msg, &report, at).await {
                Ok(FailureOutcome::Retried { .. }) => self.settle(Ok(()), &shared.counters.retried),
                Ok(FailureOutcome::DeadLettered) => {
                    self.settle(Ok(()), &shared.counters.dead_lettered)
                }
                Err(e) => self.settle(Err(e), &shared.counters.retried),
            },
        }
    }

    /// Counts a reported outcome in `counter`; a refusal because the lease was lost
    /// (expired and redelivered: the other delivery decides) is counted as such.
    fn settle(&self, result: Result<()>, counter: &AtomicU64) -> Result<()> {
        match result {
            Ok(()) => {
                counter.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Err(Error::InvalidState { .. } | Error::NotFound(_)) => {
                self.shared.counters.lost_leases.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Err(e) => Err(e),
        }
    }
}
