//! [`AsyncWorkerPool`]: the worker pool for async handlers, on tokio tasks. It keeps the
//! thread pool's promises with the thread pool's code: the policy (`pool_policy`: the
//! settings, the classification, the retry delays, the move to the DLQ) and the embedded store's batching
//! protocol (reservations, start records, failure reports made durable by the next write:
//! docs/ARCHITECTURE.md, "The worker pool's batches"):
//! - one dispatcher (the future `run` returns) reserves as many messages as handlers may
//!   start (up to `concurrency` running at once), durably counted in the log before any
//!   of them starts, writes one start record for them (written, not fsynced, like the
//!   thread pool's), and spawns each handler as a task of its own. So a handler that kills
//!   the process is charged, and a message that keeps killing it reaches the DLQ after
//!   `max_attempts` restarts (the engine's suspects and `ConsumerDied`);
//! - `Ok(())` acks (the acks ride on the next reservation's write, one fsync for both); a
//!   permanent failure dead-letters at once; a transient failure or a panic (caught by its
//!   task) is retried after the [`Retry`] delay, dead-lettered on the last attempt, with
//!   the failure history in the envelope; failure reports are written, and durable with
//!   the next fsync (the dispatcher waits for it before it reports idle or returns);
//! - a handler that runs past half its lease has the lease extended (by the dispatcher);
//! - shutdown: once the signal completes nothing more is reserved; running handlers may
//!   finish for up to the grace period; those still running then are aborted and their
//!   messages released (visible again at once, their delivery counted once, as when it
//!   started: nothing is counted twice). Every outcome is durable when `run` returns.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::task::{Id, JoinError, JoinSet};

use super::queue::AsyncQueue;
use crate::api::backend::MessageQueue;
use crate::api::classify::Classifier;
use crate::api::core::pools::{PoolAttachment, PoolKind, PoolPresence};
use crate::api::core::types::Failure;
use crate::api::pool_policy::{
    on_failure, panic_failure, pool_setters, trace_failure, Action, PoolSettings,
};
use crate::api::queue::{FailureOutcome, FailureReport, Message, Queue};
use crate::api::retry::Retry;
use crate::api::trace::spans::HandlerSpan;
use crate::api::worker::{PoolCounters, ShutdownReport};
use crate::engine::Settle;
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
    grace: Duration,
    settings: PoolSettings,
}

impl AsyncWorkerPool {
    /// A pool over `queue`: 1 handler at a time, the default [`Retry`], a 30 s lease, 30 s
    /// of grace at shutdown.
    pub fn new(queue: &Queue) -> Self {
        AsyncWorkerPool {
            queue: queue.clone(),
            concurrency: 1,
            grace: Duration::from_secs(30),
            settings: PoolSettings::new("async-worker"),
        }
    }

    pool_setters!();

    setters! {
        /// How many handlers run at once.
        concurrency(n: usize) => concurrency = n.max(1);
        /// How long running handlers may go on after the shutdown signal before they are
        /// aborted and their messages released.
        grace(grace: Duration) => grace = grace;
    }

    /// Runs the pool until `shutdown` completes (a `CancellationToken::cancelled()`,
    /// `tokio::signal::ctrl_c()`, any future), then shuts it down gracefully (see the
    /// module docs). Returns the counters, and whether every running handler finished
    /// within the grace period. A failed write stops the pool: running handlers are
    /// aborted and their messages released, and the error is returned.
    ///
    /// Cancel-safety: dropping the future aborts the running handlers' tasks; their
    /// messages stay leased until their lease ends (their delivery counted once), and
    /// the acks not yet written are lost, so those messages are delivered again.
    pub async fn run(
        self,
        handler: impl AsyncHandler,
        shutdown: impl Future<Output = ()>,
    ) -> Result<ShutdownReport> {
        Dispatcher::new(&self, handler)?.run(shutdown, false).await
    }

    /// Runs the pool until the queue is empty (not even a message waiting out a backoff),
    /// no handler runs and every outcome is durable, then stops as [`Self::run`] does.
    /// Under a clock that does not move by itself (a
    /// [`ManualClock`](crate::clock::ManualClock)) a message waiting out a backoff keeps it
    /// running until the clock is moved: use [`Self::run`] with a signal there.
    pub async fn run_until_idle(self, handler: impl AsyncHandler) -> Result<ShutdownReport> {
        Dispatcher::new(&self, handler)?
            .run(std::future::pending(), true)
            .await
    }
}

/// A handler running in its task.
struct Running {
    msg: Message,
    /// Its `deadletter.handle` span (feature `tracing`), which the outcome is recorded on.
    span: HandlerSpan,
    started: Instant,
    /// When its lease is extended next.
    extend_at: Instant,
}

/// What the dispatcher waits for when it has nothing to do at once.
enum Event {
    /// A handler's task ended.
    Ended(std::result::Result<(Id, std::result::Result<(), Failure>), JoinError>),
    /// The shutdown signal completed.
    Shutdown,
    /// New work may be ready, a lease is due for extension, or the grace period ended.
    Look,
}

/// The pool as it runs: one future, owning the handlers' tasks.
struct Dispatcher<H: AsyncHandler> {
    queue: Queue,
    asynchronous: AsyncQueue,
    handler: Arc<H>,
    retry: Retry,
    classifier: Classifier,
    concurrency: usize,
    lease: Duration,
    grace: Duration,
    idle_poll: Duration,
    name: String,
    rng: SplitMix64,
    /// Whether start records are written (`Durability::Always`).
    starts: bool,
    tasks: JoinSet<std::result::Result<(), Failure>>,
    running: HashMap<Id, Running>,
    /// Handled successfully, the ack not written yet.
    done: Vec<Message>,
    /// The log position that makes the failure reports written so far durable.
    reports_to: u64,
    durations: Vec<Duration>,
    counters: PoolCounters,
    /// Handlers running now, for the store's list of attached pools.
    in_flight: Arc<AtomicU64>,
    /// What that list reads of this pool; its heartbeat.
    presence: Arc<PoolPresence>,
    /// The pool's entry in that list, until the dispatcher is dropped (its `run` ended).
    _attachment: PoolAttachment,
}

impl<H: AsyncHandler> Dispatcher<H> {
    fn new(pool: &AsyncWorkerPool, handler: H) -> Result<Self> {
        let settings = &pool.settings;
        let queue = (pool.queue).with_policy(settings.retry.max_attempts, settings.lease)?;
        // Its handler-duration series exist from now, at zero until the first delivery.
        queue.declare_handler_durations();
        let in_flight = Arc::new(AtomicU64::new(0));
        let reading = Arc::clone(&in_flight);
        let presence = Arc::new(PoolPresence::new(
            queue.name(),
            settings.given_name(),
            PoolKind::Async,
            pool.concurrency,
            queue.now_ms(),
            move || reading.load(Ordering::Relaxed),
        ));
        let attachment = queue.store().attach_pool(Arc::clone(&presence));
        Ok(Dispatcher {
            in_flight,
            presence,
            _attachment: attachment,
            asynchronous: AsyncQueue::new(&queue),
            starts: queue.store().engine().waits_for_sync(),
            queue,
            handler: Arc::new(handler),
            retry: settings.retry,
            classifier: settings.classifier.clone(),
            concurrency: pool.concurrency,
            lease: settings.lease,
            grace: pool.grace,
            idle_poll: settings.idle_poll,
            name: format!("{}-0", settings.name),
            rng: settings.retry.worker_rng(0),
            tasks: JoinSet::new(),
            running: HashMap::new(),
            done: Vec::new(),
            reports_to: 0,
            durations: Vec::new(),
            counters: PoolCounters::default(),
        })
    }

    async fn run(
        mut self,
        shutdown: impl Future<Output = ()>,
        until_idle: bool,
    ) -> Result<ShutdownReport> {
        let result = self.serve(shutdown, until_idle).await;
        let drained = match &result {
            Ok(drained) => *drained,
            Err(_) => false,
        };
        // Whatever happened: abort what still runs (its message released), then write the
        // acks and make every report durable.
        let settled = self.abort_running().await.and(self.settle().await);
        result?;
        settled?;
        self.counters.in_flight = 0;
        Ok(ShutdownReport {
            counters: self.counters,
            drained,
        })
    }

    /// The dispatcher's loop; true when the running handlers finished before the end of
    /// the grace period.
    async fn serve(
        &mut self,
        shutdown: impl Future<Output = ()>,
        until_idle: bool,
    ) -> Result<bool> {
        let mut shutdown = std::pin::pin!(shutdown);
        let mut grace_ends: Option<Instant> = None;
        loop {
            while let Some(ended) = self.tasks.try_join_next_with_id() {
                self.ended(ended)?;
            }
            if let Some(ends) = grace_ends {
                if self.running.is_empty() {
                    return Ok(true);
                }
                if Instant::now() >= ends {
                    return Ok(false);
                }
            }
            self.presence.beat(self.queue.now_ms());
            let seen = self.asynchronous.ready_epoch();
            let free = match grace_ends {
                Some(_) => 0,
                None => self.concurrency - self.running.len(),
            };
            let got = self.reserve(free).await?;
            if got > 0 && got == free {
                continue;
            }
            if until_idle && grace_ends.is_none() && self.idle() {
                grace_ends = Some(Instant::now());
                continue;
            }
            self.extend_due().await?;
            match self
                .next_event(seen, free, grace_ends, shutdown.as_mut())
                .await
            {
                Event::Ended(ended) => self.ended(ended)?,
                Event::Shutdown => grace_ends = Some(Instant::now() + self.grace),
                Event::Look => {}
            }
        }
    }

    /// Writes the acks of handled messages and reserves up to `free` more in one write
    /// (durable: it also makes the failure reports before it durable), writes their start
    /// record and spawns their handlers; returns how many were reserved.
    async fn reserve(&mut self, free: usize) -> Result<usize> {
        if free == 0 && self.done.is_empty() {
            return Ok(0);
        }
        let (batch, lost) = {
            let (queue, done) = (&self.queue, &self.done);
            queue
                .store()
                .deferred(|| queue.ack_and_reserve(done, free))
                .await?
        };
        self.acked(lost);
        let started = if self.starts && !batch.is_empty() {
            self.queue.start_all(&batch, &[])?.1
        } else {
            vec![true; batch.len()]
        };
        let now = Instant::now();
        for (msg, started) in batch.iter().zip(started) {
            if !started {
                // Its reservation ended meanwhile: another delivery decides.
                self.counters.lost_leases += 1;
                continue;
            }
            let span = HandlerSpan::new(msg.queue(), msg.id(), msg.attempt(), msg.attributes());
            let task = self
                .tasks
                .spawn(span.instrument(self.handler.handle(msg.clone())));
            self.running.insert(
                task.id(),
                Running {
                    msg: msg.clone(),
                    span,
                    started: now,
                    extend_at: now + self.lease / 2,
                },
            );
        }
        self.counted_running();
        Ok(batch.len())
    }

    /// Counts the handlers running, for the counters and the list of attached pools.
    fn counted_running(&mut self) {
        self.counters.in_flight = self.running.len() as u64;
        self.in_flight
            .store(self.counters.in_flight, Ordering::Relaxed);
    }

    /// Counts the acks just written (`lost` of them refused) and forgets them.
    fn acked(&mut self, lost: u64) {
        let n = self.done.len() as u64;
        self.counters.processed += n - lost;
        self.counters.lost_leases += lost;
        self.done.clear();
        if !self.durations.is_empty() {
            self.queue.observe_handlers(&self.durations);
            self.durations.clear();
        }
    }

    /// True when the queue holds nothing (not even a message waiting out a backoff), no
    /// handler runs and every outcome is written.
    fn idle(&self) -> bool {
        let c = self.queue.stats().counts;
        self.running.is_empty() && self.done.is_empty() && c.ready == 0 && c.in_flight == 0
    }

    /// Extends the leases of handlers that have used half of theirs.
    async fn extend_due(&mut self) -> Result<()> {
        let now = Instant::now();
        for r in self.running.values_mut().filter(|r| r.extend_at <= now) {
            r.extend_at = now + self.lease / 2;
            match self.asynchronous.extend(&r.msg, self.lease).await {
                // A lease lost meanwhile: its outcome will be refused and counted.
                Ok(()) | Err(Error::InvalidState { .. } | Error::NotFound(_)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Waits for a handler to end, the shutdown signal, new work (when handlers may
    /// start), the next lease extension, or the end of the grace period.
    async fn next_event(
        &mut self,
        seen: u64,
        free: usize,
        grace_ends: Option<Instant>,
        mut shutdown: Pin<&mut impl Future<Output = ()>>,
    ) -> Event {
        let mut wake_at = self
            .running
            .values()
            .map(|r| r.extend_at)
            .min()
            .unwrap_or(Instant::now() + self.idle_poll);
        if let Some(ends) = grace_ends {
            wake_at = wake_at.min(ends);
        }
        let work = if free > 0 {
            Some(self.asynchronous.wait_for_work(seen, wake_at))
        } else {
            None
        };
        let mut work = std::pin::pin!(work);
        let timer = tokio::time::sleep_until(tokio::time::Instant::from_std(wake_at));
        let mut timer = std::pin::pin!(timer);
        let tasks = &mut self.tasks;
        let stopping = grace_ends.is_some();
        std::future::poll_fn(|cx: &mut Context<'_>| {
            if !tasks.is_empty() {
                if let Poll::Ready(Some(ended)) = tasks.poll_join_next_with_id(cx) {
                    return Poll::Ready(Event::Ended(ended));
                }
            }
            if !stopping && shutdown.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Event::Shutdown);
            }
            if let Some(w) = work.as_mut().as_pin_mut() {
                if w.poll(cx).is_ready() {
                    return Poll::Ready(Event::Look);
                }
            }
            timer.as_mut().poll(cx).map(|()| Event::Look)
        })
        .await
    }

    /// Handles the end of a handler's task: a success waits for its ack, a failure or a
    /// panic is reported.
    fn ended(
        &mut self,
        ended: std::result::Result<(Id, std::result::Result<(), Failure>), JoinError>,
    ) -> Result<()> {
        let (id, failure) = match ended {
            Ok((id, Ok(()))) => (id, None),
            Ok((id, Err(failure))) => (id, Some(failure)),
            Err(e) if e.is_panic() => {
                self.counters.panics += 1;
                let id = e.id();
                (id, Some(panic_failure(e.into_panic().as_ref())))
            }
            // Aborted by the dispatcher, which released its message.
            Err(_) => return Ok(()),
        };
        let Some(r) = self.running.remove(&id) else {
            return Ok(());
        };
        self.counted_running();
        let duration = r.started.elapsed();
        self.durations.push(duration);
        match failure {
            None => {
                r.span.outcome("ok");
                self.done.push(r.msg);
            }
            Some(failure) => self.report_failure(&r, failure, duration)?,
        }
        Ok(())
    }

    /// Reports a failed delivery, written and made durable by the next reservation (or
    /// [`Dispatcher::settle`]), as the thread pool's deferred reports are.
    fn report_failure(
        &mut self,
        run: &Running,
        failure: Failure,
        duration: Duration,
    ) -> Result<()> {
        let msg = &run.msg;
        let now = self.queue.now_ms();
        let (failure, action) = on_failure(
            &self.classifier,
            &self.retry,
            failure,
            msg.attempt(),
            now,
            &mut self.rng,
        );
        let report = FailureReport::new(&failure)
            .duration(duration)
            .worker(&self.name);
        let retry_at = match action {
            Action::DeadLetter => None,
            Action::RetryAt(at) => Some(at),
        };
        match self
            .queue
            .report_failure(Settle::Written, msg, &report, retry_at)
        {
            Ok((outcome, pos)) => {
                self.reports_to = self.reports_to.max(pos);
                let retry_at = match outcome {
                    FailureOutcome::Retried { visible_at_ms } => {
                        self.counters.retried += 1;
                        Some(visible_at_ms)
                    }
                    FailureOutcome::DeadLettered => {
                        self.counters.dead_lettered += 1;
                        None
                    }
                };
                run.span.in_scope(|| {
                    trace_failure(msg, &failure.kind, retry_at);
                });
                run.span.outcome(if retry_at.is_some() {
                    "retry"
                } else {
                    "dead_letter"
                });
                Ok(())
            }
            // The lease was lost meanwhile (expired and redelivered): the other delivery
            // decides.
            Err(Error::InvalidState { .. } | Error::NotFound(_)) => {
                self.counters.lost_leases += 1;
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Aborts the handlers still running and releases their messages (visible at once,
    /// the delivery counted once).
    async fn abort_running(&mut self) -> Result<()> {
        self.tasks.abort_all();
        while self.tasks.join_next().await.is_some() {}
        let mut result = Ok(());
        self.in_flight.store(0, Ordering::Relaxed);
        for (_, r) in self.running.drain() {
            let released = self.asynchronous.release(&r.msg, Duration::ZERO).await;
            if let Err(e) = released {
                if !matches!(e, Error::InvalidState { .. } | Error::NotFound(_)) {
                    result = result.and(Err(e));
                }
            }
        }
        result
    }

    /// Writes the acks still held and makes every failure report durable.
    async fn settle(&mut self) -> Result<()> {
        if !self.done.is_empty() {
            let (queue, done) = (&self.queue, &self.done);
            let (_, lost) = queue
                .store()
                .deferred(|| queue.ack_and_reserve(done, 0))
                .await?;
            self.acked(lost);
        }
        let reports_to = std::mem::take(&mut self.reports_to);
        self.queue.store().durable_at(reports_to).await
    }
}
