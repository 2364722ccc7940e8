//! The worker pool: N threads that lease, handle, and ack, retry or dead-letter messages.
//!
//! The pool runs on any [`WorkerQueue`] (the embedded [`Queue`] by default; any core
//! [`MessageQueue`](crate::MessageQueue) through [`CoreOnly`](crate::backend::CoreOnly)): it is
//! generic over the backend, so each call into the queue is statically dispatched, and
//! the handler sees the backend's own message type. What follows is the protocol as the
//! embedded store runs it; under [`WorkerQueue`]'s defaults a batch is one leased
//! message, there are no start records, and every report is durable when it returns.
//!
//! Each worker takes a batch of messages at a time and handles them one after the other,
//! under `catch_unwind`, reporting each outcome:
//! - `Ok(())` acks;
//! - a permanent [`Failure`] dead-letters at once, spending no retries (the pool's
//!   [`Classifier`] decides the class of failures converted from errors with `?`);
//! - a transient failure (or a panic) is retried: the next attempt time from the [`Retry`]
//!   policy is written to the log as the message's visible-at, so no thread sleeps out a
//!   backoff and the queue keeps flowing; on the last attempt it is dead-lettered.
//!
//! The batch is a reservation ([`WorkerQueue::reserve_wait`]): every delivery in it is
//! counted in the log (durably, under `Durability::Always`) before any of its handlers
//! runs. Before each handler the worker writes a start record
//! ([`WorkerQueue::start`]), which carries the acks of the messages handled since the
//! last one; it reaches the operating system, not the disk, so it costs a write and no
//! fsync. The acks left at the end of a batch go with the next reservation, in one write
//! and one fsync (group commit). If the process dies, the reopen takes back every
//! reserved message without a start record: only a message whose handler ran can be what
//! killed the process, so only those are counted and become suspects. Under
//! `Durability::Interval` and `Never` a start would stay in the process's buffer and die
//! with it, so the pool writes none ([`WorkerQueue::wants_starts`]) and acks whole
//! batches: a crash there takes back every reservation of the batches in progress.
//!
//! Failure reports go the same way under `Durability::Always`: a retry or a move to the DLQ
//! is written ([`WorkerQueue::retry_deferred`], [`WorkerQueue::dead_letter_deferred`])
//! and made durable by the worker's next reservation, or its final acks, whose fsync covers
//! every record before it; when no write follows (nothing left to reserve) the worker
//! fsyncs them itself ([`WorkerQueue::make_durable`]). Until then their messages stay
//! counted as held, so `run_until_idle` and a stopping worker return only once every
//! outcome the pool reported is durable. A power cut before that may lose a report; its
//! message is then delivered again (docs/ARCHITECTURE.md, "The pool's failure reports").
//!
//! Batches grow while handlers are quick (doubling up to [`MAX_BATCH`] while a batch's
//! handlers took under [`QUICK_BATCH`] together) and shrink otherwise, so that slow
//! handlers are spread over the workers one message at a time. A failure does not shrink
//! a batch: its report costs a write, not an fsync, and a retry waits in the log, not in
//! the batch.
//!
//! A heartbeat thread extends the leases of a worker's batch when half of its lease has
//! passed, so a slow success is not redelivered. Invariants:
//! - a delivery is counted in the log before the handler runs;
//! - `in_flight` counts handlers running; `held` the messages workers hold (reserved,
//!   running, handled with their ack not written yet, or failed with their report not yet
//!   durable); shutdown waits for `in_flight`, then each worker gives back what it has not
//!   started, writes its acks and makes its reports durable.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use serde::de::DeserializeOwned;

use crate::api::backend::{DeadLetterQueue, Delivery, WorkerQueue, WriteMark};
use crate::api::classify::Classifier;
use crate::api::core::alert::DlqAlert;
use crate::api::core::holders::Holder;
use crate::api::core::pools::{PoolAttachment, PoolKind, PoolPresence};
use crate::api::core::types::{Failure, MessageId, DECODE_ERROR_KIND};
use crate::api::pool_policy::{
    on_failure, panic_failure, pool_setters, trace_failure, Action, PoolSettings,
};
use crate::api::queue::{FailureOutcome, FailureReport, Message, Queue};
use crate::api::retry::Retry;
use crate::api::trace::spans::HandlerSpan;
use crate::error::{Error, Result};
use crate::rng::SplitMix64;

/// A message handler. Any `Fn(&M) -> Result<(), Failure>` is one, where `M` is the
/// backend's message type ([`Message`] for the embedded store).
pub trait Handler<M = Message>: Send + Sync + 'static {
    /// Handles one message.
    fn handle(&self, msg: &M) -> std::result::Result<(), Failure>;
}

impl<M, F> Handler<M> for F
where
    F: Fn(&M) -> std::result::Result<(), Failure> + Send + Sync + 'static,
{
    fn handle(&self, msg: &M) -> std::result::Result<(), Failure> {
        self(msg)
    }
}

/// Counters of a running pool.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PoolCounters {
    /// Messages handled successfully and acked.
    pub processed: u64,
    /// Failed deliveries scheduled for another attempt.
    pub retried: u64,
    /// Messages moved to the DLQ.
    pub dead_lettered: u64,
    /// Handlers running now.
    pub in_flight: u64,
    /// Handler panics caught.
    pub panics: u64,
    /// Outcomes refused because the lease was lost meanwhile (the message was redelivered).
    pub lost_leases: u64,
}

/// What a shutdown found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShutdownReport {
    /// Counters at the end.
    pub counters: PoolCounters,
    /// True when every in-flight handler finished before the deadline.
    pub drained: bool,
}

/// Builder of a worker pool over one queue, on any backend (`Q`: the embedded [`Queue`]
/// unless another [`WorkerQueue`] is given; a backend that implements only the core
/// [`MessageQueue`](crate::MessageQueue) runs as [`CoreOnly`](crate::backend::CoreOnly)`(queue)`).
///
/// ```
/// use std::time::Duration;
/// use deadletter::{Config, Failure, Message, Store, WorkerPool};
/// use deadletter::pool::Retry;
///
/// # let dir = tempfile::tempdir().unwrap();
/// let store = Store::open(&dir, Config::fast())?;
/// let orders = store.queue("orders")?;
/// orders.enqueue_batch(&["ORD-1", "ORD-2", "poison"])?;
///
/// let pool = WorkerPool::new(&orders)
///     .workers(2)
///     .retry(Retry::exponential(Duration::from_millis(1)).max_attempts(3))
///     .start(|msg: &Message| match msg.text() {
///         Some(order) if order.starts_with("ORD-") => Ok(()), // acked
///         _ => Err(Failure::permanent("InvalidOrder", "not an order")), // straight to the DLQ
///     })?;
/// pool.run_until_idle()?;
/// let report = pool.shutdown(Duration::from_secs(5))?;
/// assert_eq!(report.counters.processed, 2);
/// assert_eq!(report.counters.dead_lettered, 1);
/// assert_eq!(orders.dlq().len(), 1);
/// # Ok::<(), deadletter::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct WorkerPool<Q: WorkerQueue = Queue> {
    queue: Q,
    workers: usize,
    settings: PoolSettings,
}

/// The largest batch a worker reserves.
pub const MAX_BATCH: usize = 256;
/// A batch whose handlers took less than this together lets the next one double. Handler
/// time, not the batch's wall time: a worker preempted on a busy machine still grows.
pub const QUICK_BATCH: Duration = Duration::from_millis(2);

/// How long [`RunningPool::run_until_idle`] watches a queue's clock stand still, with no
/// delivery held and every waiting message due later, before it takes those messages for
/// ones that wait for a clock that does not move by itself (a [`crate::clock::ManualClock`]). A
/// system clock moves within it.
pub(crate) const STILL_CLOCK: Duration = Duration::from_millis(100);

/// One worker's part of the shared state, on cache lines of its own: the worker writes
/// it for every message, and a line shared with another worker's would bounce between
/// their cores.
#[repr(align(128))]
struct Slot<M> {
    /// The batch it holds.
    held: Mutex<Held<M>>,
    /// True while its handler runs.
    running: AtomicBool,
}

/// The batch a worker holds, as the heartbeat sees it.
struct Held<M> {
    /// The batch.
    msgs: Arc<Vec<M>>,
    /// Messages before this index are finished.
    from: usize,
    /// When the batch's leases end.
    deadline: Instant,
}

impl<M> Default for Held<M> {
    fn default() -> Self {
        Held {
            msgs: Arc::new(Vec::new()),
            from: 0,
            deadline: Instant::now(),
        }
    }
}

#[derive(Default)]
struct Counters {
    processed: AtomicU64,
    retried: AtomicU64,
    dead_lettered: AtomicU64,
    panics: AtomicU64,
    lost_leases: AtomicU64,
    /// Messages held by workers: reserved, running, or handled with the ack not written.
    held: AtomicU64,
}

struct Shared<Q: WorkerQueue> {
    queue: Q,
    /// The pool's name: its workers are `name-0`, `name-1`...
    name: String,
    retry: Retry,
    lease: Duration,
    classifier: Classifier,
    stop: AtomicBool,
    counters: Counters,
    /// Per worker, the batch it holds (for the heartbeat) and whether a handler runs.
    slots: Vec<Slot<Q::Message>>,
    /// Signalled when a handler finishes (for shutdown and `run_until_idle`).
    done: Condvar,
    done_lock: Mutex<()>,
    fatal: Mutex<Option<Error>>,
    /// What the store's list of attached pools reads of this one; its heartbeat.
    presence: Arc<PoolPresence>,
}

/// A started pool (see [`WorkerPool::start`]): its threads lease and handle messages until
/// [`RunningPool::shutdown`], or until it is dropped, which stops it the same way without a
/// deadline. A service keeps it for its lifetime; a batch job waits with
/// [`RunningPool::run_until_idle`] first.
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use std::sync::Arc;
/// use std::time::Duration;
/// use deadletter::{Config, Failure, Message, Store, WorkerPool};
/// use deadletter::pool::Retry;
///
/// # let dir = tempfile::tempdir().unwrap();
/// let store = Store::open(&dir, Config::fast())?;
/// let emails = store.queue("emails")?;
/// let pool = WorkerPool::new(&emails)
///     .workers(2)
///     .name("mailer") // failures record the worker: "mailer-0", "mailer-1"
///     .retry(Retry::fixed(Duration::from_millis(1)).max_attempts(2))
///     .start(|msg: &Message| match msg.text() {
///         Some(to) if to.contains('@') => Ok(()),
///         _ => Err(Failure::transient("SmtpTimeout", "the server did not answer")),
///     })?;
///
/// // A callback when the DLQ reaches one entry (and again when it falls back under).
/// let alerts = Arc::new(AtomicU64::new(0));
/// let count = Arc::clone(&alerts);
/// pool.on_dlq_alert(1, move |alert| {
///     if alert.above {
///         count.fetch_add(1, Ordering::SeqCst);
///     }
/// })?;
///
/// // The pool handles what arrives while it runs.
/// emails.enqueue_batch(&["ana@example.com", "no address"])?;
/// pool.run_until_idle()?;
/// let now = pool.counters();
/// assert_eq!((now.processed, now.retried, now.dead_lettered), (1, 1, 1));
/// assert_eq!(alerts.load(Ordering::SeqCst), 1);
///
/// let report = pool.shutdown(Duration::from_secs(5))?;
/// assert!(report.drained); // every running handler finished before the deadline
/// # Ok::<(), deadletter::Error>(())
/// ```
pub struct RunningPool<Q: WorkerQueue = Queue> {
    shared: Arc<Shared<Q>>,
    threads: Vec<JoinHandle<()>>,
    /// The pool's entry among its backend's attached pools: dropped last, after `Drop`
    /// joined the threads, so the pool is listed until it has stopped.
    _attachment: Option<PoolAttachment>,
}

impl<Q: WorkerQueue> WorkerPool<Q> {
    /// A pool over `queue`: 1 worker, the default [`Retry`], a 30 s lease.
    pub fn new(queue: &Q) -> Self {
        WorkerPool {
            queue: queue.clone(),
            workers: 1,
            settings: PoolSettings::new("worker"),
        }
    }

    pool_setters!();

    setters! {
        /// Number of worker threads.
        workers(n: usize) => workers = n.max(1);
    }

    /// Starts the workers with `handler`.
    pub fn start(self, handler: impl Handler<Q::Message>) -> Result<RunningPool<Q>> {
        let given_name = self.settings.given_name();
        let PoolSettings {
            retry,
            lease,
            name,
            idle_poll,
            classifier,
            ..
        } = self.settings;
        let queue = self.queue.with_policy(retry.max_attempts, lease)?;
        // Its handler-duration series exist from now, at zero until the first delivery.
        queue.declare_handler_durations();
        let workers = self.workers;
        let shared = Arc::new_cyclic(|me: &Weak<Shared<Q>>| Shared {
            presence: {
                let me = me.clone();
                Arc::new(PoolPresence::new(
                    queue.name(),
                    given_name,
                    PoolKind::Threads,
                    workers,
                    queue.now_ms(),
                    move || me.upgrade().map_or(0, |s| s.in_flight()),
                ))
            },
            queue,
            name: name.clone(),
            retry,
            lease,
            classifier,
            stop: AtomicBool::new(false),
            counters: Counters::default(),
            slots: (0..self.workers)
                .map(|_| Slot {
                    held: Mutex::new(Held::default()),
                    running: AtomicBool::new(false),
                })
                .collect(),
            done: Condvar::new(),
            done_lock: Mutex::new(()),
            fatal: Mutex::new(None),
        });
        // On the embedded store, listings of the queue name the worker holding a message.
        if let Some(embedded) = (&shared.queue as &dyn std::any::Any).downcast_ref::<Queue>() {
            let weak = Arc::downgrade(&shared);
            embedded.register_holder(weak as std::sync::Weak<dyn Holder>);
        }
        let handler = Arc::new(handler);
        let mut threads = Vec::with_capacity(self.workers + 1);
        for i in 0..self.workers {
            let shared = Arc::clone(&shared);
            let handler = Arc::clone(&handler);
            let name = format!("{name}-{i}");
            let poll = idle_poll;
            let rng = retry.worker_rng(i);
            let t = std::thread::Builder::new()
                .name(name.clone())
                .spawn(move || {
                    let mut worker = Worker {
                        queue: shared.queue.worker_handle(),
                        shared: &shared,
                        handler: handler.as_ref(),
                        index: i,
                        name: &name,
                        rng,
                        done: Vec::new(),
                        durations: Vec::new(),
                        unsynced: 0,
                        mark: WriteMark::DURABLE,
                    };
                    if let Err(e) = worker.run(poll) {
                        stop_with(&shared, e);
                    }
                })
                .map_err(|e| Error::io("spawn worker", "", e))?;
            threads.push(t);
        }
        let hb = Arc::clone(&shared);
        let t = std::thread::Builder::new()
            .name(format!("{name}-heartbeat"))
            .spawn(move || heartbeat_loop(&hb))
            .map_err(|e| Error::io("spawn heartbeat", "", e))?;
        threads.push(t);
        let attachment = shared.queue.attach_pool(Arc::clone(&shared.presence));
        Ok(RunningPool {
            shared,
            threads,
            _attachment: attachment,
        })
    }

    /// Starts the workers with a handler of typed payloads (enqueued with
    /// [`Queue::enqueue_typed`]). A payload that does not decode is a permanent failure of
    /// kind `DecodeError`.
    pub fn start_typed<T, F>(self, handler: F) -> Result<RunningPool<Q>>
    where
        T: DeserializeOwned + 'static,
        F: Fn(T, &Q::Message) -> std::result::Result<(), Failure> + Send + Sync + 'static,
    {
        self.start(move |msg: &Q::Message| match msg.decode::<T>() {
            Ok(value) => handler(value, msg),
            Err(e) => Err(Failure::permanent(DECODE_ERROR_KIND, e.to_string())),
        })
    }
}

impl<Q: WorkerQueue> RunningPool<Q> {
    /// Counters now.
    pub fn counters(&self) -> PoolCounters {
        let c = &self.shared.counters;
        PoolCounters {
            processed: c.processed.load(Ordering::Relaxed),
            retried: c.retried.load(Ordering::Relaxed),
            dead_lettered: c.dead_lettered.load(Ordering::Relaxed),
            in_flight: self.shared.in_flight(),
            panics: c.panics.load(Ordering::Relaxed),
            lost_leases: c.lost_leases.load(Ordering::Relaxed),
        }
    }

    /// The queue the pool works on.
    pub fn queue(&self) -> &Q {
        &self.shared.queue
    }

    /// Registers the DLQ alert hook of the pool's queue.
    pub fn on_dlq_alert(
        &self,
        threshold: u64,
        callback: impl Fn(&DlqAlert) + Send + Sync + 'static,
    ) -> Result<()> {
        self.shared.queue.dlq().on_threshold(threshold, callback)
    }

    /// Blocks until the queue holds nothing waiting (including messages waiting out a
    /// backoff) and no handler runs. Returns the error that stopped the pool, if one did.
    ///
    /// Under a clock that does not move by itself (a [`crate::clock::ManualClock`]), a message
    /// waiting out a backoff never becomes visible while this waits: so it also returns
    /// once no handler runs, no delivery is held, every waiting message becomes visible
    /// only later than the queue's clock says now, and that clock has not moved for 100 ms
    /// of real time. Move the clock and call it again to go on.
    pub fn run_until_idle(&self) -> Result<()> {
        let mut still: Option<(u64, Instant)> = None;
        loop {
            if let Some(e) = self.shared.fatal.lock().take() {
                return Err(e);
            }
            // Checked under the lock the workers take to notify, so that the last worker
            // to let go of its messages cannot notify between the check and the wait.
            let mut g = self.shared.done_lock.lock();
            let stats = self.shared.queue.stats()?;
            let nothing_held = stats.counts.in_flight == 0
                && self.shared.counters.held.load(Ordering::Acquire) == 0;
            if stats.counts.ready == 0 && nothing_held {
                return Ok(());
            }
            let now = self.shared.queue.now_ms();
            // Only messages in the future wait (none is visible now, for workers to take).
            let all_later = stats.oldest_ready_at_ms.is_some_and(|at| at > now);
            if nothing_held && all_later {
                match still {
                    Some((at, since)) if at == now => {
                        if since.elapsed() >= STILL_CLOCK {
                            return Ok(());
                        }
                    }
                    _ => still = Some((now, Instant::now())),
                }
            } else {
                still = None;
            }
            self.shared.done.wait_for(&mut g, Duration::from_millis(20));
        }
    }

    /// Stops leasing, waits up to `deadline` for running handlers to finish, and joins the
    /// threads that finished.
    pub fn shutdown(mut self, deadline: Duration) -> Result<ShutdownReport> {
        self.shared.signal_stop();
        let give_up = Instant::now() + deadline;
        let mut drained = true;
        while self.shared.in_flight() > 0 {
            if Instant::now() >= give_up {
                drained = false;
                break;
            }
            let mut g = self.shared.done_lock.lock();
            self.shared.done.wait_for(&mut g, Duration::from_millis(10));
        }
        if drained {
            for t in self.threads.drain(..) {
                let _ = t.join();
            }
        }
        let report = ShutdownReport {
            counters: self.counters(),
            drained,
        };
        if let Some(e) = self.shared.fatal.lock().take() {
            return Err(e);
        }
        Ok(report)
    }
}

impl<Q: WorkerQueue> Drop for RunningPool<Q> {
    fn drop(&mut self) {
        self.shared.signal_stop();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

fn stop_with<Q: WorkerQueue>(shared: &Shared<Q>, e: Error) {
    shared.fatal.lock().get_or_insert(e);
    shared.signal_stop();
}

impl<Q: WorkerQueue> Holder for Shared<Q> {
    /// The worker whose batch holds `id` (running it, waiting to run it, or handled with
    /// its outcome not written yet).
    fn holder_of(&self, id: MessageId) -> Option<String> {
        self.slots.iter().enumerate().find_map(|(i, slot)| {
            let batch = Arc::clone(&slot.held.lock().msgs);
            batch
                .iter()
                .any(|m| m.id() == id)
                .then(|| format!("{}-{i}", self.name))
        })
    }
}

impl<Q: WorkerQueue> Shared<Q> {
    /// Handlers running now.
    fn in_flight(&self) -> u64 {
        let running = |s: &&Slot<_>| s.running.load(Ordering::Acquire);
        self.slots.iter().filter(running).count() as u64
    }

    /// Wakes `run_until_idle`, `shutdown` and the heartbeat after a change of counters (or
    /// of the stop flag). Taking the lock orders the wake-up after a waiter's check.
    fn notify_done(&self) {
        drop(self.done_lock.lock());
        self.done.notify_all();
    }

    /// Sets the stop flag and wakes every thread that waits (consumers, the heartbeat).
    fn signal_stop(&self) {
        self.stop.store(true, Ordering::Release);
        self.queue.wake_consumers();
        self.notify_done();
    }
}

/// One worker thread's state.
struct Worker<'a, Q: WorkerQueue> {
    /// Its own handle on the queue ([`WorkerQueue::worker_handle`]).
    queue: Q,
    shared: &'a Shared<Q>,
    handler: &'a dyn Handler<Q::Message>,
    index: usize,
    name: &'a str,
    rng: SplitMix64,
    /// Messages handled successfully whose ack is not written yet.
    done: Vec<Q::Message>,
    /// How long each handler of the current batch ran.
    durations: Vec<Duration>,
    /// Failure reports written but perhaps not durable yet: their messages stay counted in
    /// `held` until [`Worker::settle_reports`].
    unsynced: u64,
    /// The largest mark of those reports.
    mark: WriteMark,
}

impl<Q: WorkerQueue> Worker<'_, Q> {
    /// Reserves and handles batches until the pool stops; then writes the acks it holds.
    fn run(&mut self, poll: Duration) -> Result<()> {
        let shared = self.shared;
        let mut size = 1usize;
        while !shared.stop.load(Ordering::Acquire) {
            let batch = if self.done.is_empty() {
                // Reports waiting for durability do not wait out the poll: if nothing is
                // reserved (no write, so no fsync), they are synced at once below.
                let wait = if self.unsynced > 0 {
                    Duration::ZERO
                } else {
                    poll
                };
                self.queue.reserve_wait(size, wait)?
            } else {
                let (batch, lost) = self.queue.ack_and_reserve(&self.done, size)?;
                self.acked(lost);
                batch
            };
            shared.presence.beat(self.queue.now_ms());
            self.settle_reports()?;
            if batch.is_empty() {
                continue;
            }
            let quick = self.handle_batch(batch)?;
            size = if quick {
                (size * 2).min(MAX_BATCH)
            } else {
                (size / 2).max(1)
            };
        }
        if !self.done.is_empty() {
            let (_, lost) = self.queue.ack_and_reserve(&self.done, 0)?;
            self.acked(lost);
        }
        self.settle_reports()
    }

    /// Makes the failure reports written since the last call durable, and stops counting
    /// their messages as held. Called after each reservation (and the final acks): under
    /// `Durability::Always` their fsync covers the reports already (the log is made
    /// durable as a prefix), so this only checks; when nothing was written it fsyncs.
    fn settle_reports(&mut self) -> Result<()> {
        if self.unsynced == 0 {
            return Ok(());
        }
        self.queue.make_durable(self.mark)?;
        let n = std::mem::take(&mut self.unsynced);
        self.mark = WriteMark::DURABLE;
        self.release_held(n);
        Ok(())
    }

    /// Counts the acks just written (`lost` of them refused) and forgets them.
    fn acked(&mut self, lost: u64) {
        let c = &self.shared.counters;
        let n = self.done.len() as u64;
        c.processed.fetch_add(n - lost, Ordering::Relaxed);
        c.lost_leases.fetch_add(lost, Ordering::Relaxed);
        self.done.clear();
        self.release_held(n);
    }

    /// Counts `n` messages the worker no longer holds; wakes the waiters of
    /// `run_until_idle` when the workers hold none (they poll otherwise).
    fn release_held(&self, n: u64) {
        if self.shared.counters.held.fetch_sub(n, Ordering::AcqRel) == n {
            self.shared.notify_done();
        }
    }

    /// Handles a reserved batch in order; when the pool stops, gives back what has not
    /// started. Returns true when its handlers took less than [`QUICK_BATCH`] together.
    ///
    /// Per message the loop touches nothing another worker writes: handler times are
    /// recorded once per batch, one clock reading ends a handler and starts the next
    /// (unless a start record was written between them), and without start records the
    /// handled messages move into `done` at the end rather than being cloned (a clone
    /// counts a reference on the queue's name and the log's map, both shared by every
    /// worker).
    fn handle_batch(&mut self, batch: Vec<Q::Message>) -> Result<bool> {
        let shared = self.shared;
        let c = &shared.counters;
        let total = batch.len() as u64;
        c.held.fetch_add(total, Ordering::AcqRel);
        let batch = Arc::new(batch);
        let slot = &shared.slots[self.index];
        *slot.held.lock() = Held {
            msgs: Arc::clone(&batch),
            from: 0,
            deadline: Instant::now() + shared.lease,
        };
        let starts = self.queue.wants_starts();
        // Without starts: which messages succeeded, their acks still to be collected.
        let mut succeeded = vec![false; if starts { 0 } else { batch.len() }];
        self.durations.clear();
        let mut clock = Instant::now();
        for (i, msg) in batch.iter().enumerate() {
            // The first message always runs: a stop between the reservation and here must
            // not turn a one-message batch into a release.
            if i > 0 && shared.stop.load(Ordering::Acquire) {
                self.queue.release_unstarted(&batch[i..])?;
                self.release_held((batch.len() - i) as u64);
                break;
            }
            slot.held.lock().from = i;
            let runs = if starts {
                let (lost, runs) = self.queue.start(msg, &self.done)?;
                if !self.done.is_empty() {
                    self.acked(lost);
                }
                clock = Instant::now();
                runs
            } else {
                true
            };
            if !runs {
                // Its reservation ended meanwhile (the lease ran out): another delivery
                // decides.
                c.lost_leases.fetch_add(1, Ordering::Relaxed);
                self.release_held(1);
                continue;
            }
            let (ok, ended) = self.handle_one(msg, clock)?;
            clock = ended;
            if ok {
                if starts {
                    self.done.push(msg.clone());
                } else {
                    succeeded[i] = true;
                }
            }
        }
        *slot.held.lock() = Held::default();
        self.queue.observe_handlers(&self.durations);
        let handling: Duration = self.durations.iter().sum();
        if succeeded.contains(&true) {
            // Moved out, unless the heartbeat holds the batch for a moment (cloned then).
            let msgs = Arc::unwrap_or_clone(batch).into_iter().zip(succeeded);
            self.done.extend(msgs.filter_map(|(m, ok)| ok.then_some(m)));
        }
        Ok(handling < QUICK_BATCH)
    }

    /// Runs the handler on a started message from `started` on and reports its outcome
    /// (a success is the caller's to ack). Returns true on success, and when the handler
    /// ended; its time goes to `durations`.
    fn handle_one(&mut self, msg: &Q::Message, started: Instant) -> Result<(bool, Instant)> {
        let shared = self.shared;
        let c = &shared.counters;
        let running = &shared.slots[self.index].running;
        running.store(true, Ordering::Release);
        let span = HandlerSpan::new(msg.queue(), msg.id(), msg.attempt(), msg.attributes());
        let result = span.in_scope(|| catch_unwind(AssertUnwindSafe(|| self.handler.handle(msg))));
        let ended = Instant::now();
        let duration = ended.saturating_duration_since(started);
        self.durations.push(duration);
        let outcome = match result {
            Ok(Ok(())) => {
                span.outcome("ok");
                running.store(false, Ordering::Release);
                return Ok((true, ended));
            }
            Ok(Err(failure)) => span.in_scope(|| self.report_failure(msg, failure, duration)),
            Err(panic) => {
                c.panics.fetch_add(1, Ordering::Relaxed);
                let failure = panic_failure(panic.as_ref());
                span.in_scope(|| self.report_failure(msg, failure, duration))
            }
        };
        if let Ok(mark) = &outcome {
            span.outcome(if mark.1 { "dead_letter" } else { "retry" });
        }
        let outcome = outcome.map(|(mark, _)| mark);
        running.store(false, Ordering::Release);
        // No wake-up here: a failure leaves its message held (until its report is durable)
        // or releases it through `release_held`, which wakes the waiters when the workers
        // hold nothing; waking them at every failure cost each failure two context
        // switches (the idle waiter's and the heartbeat's).
        match outcome {
            Ok(mark) if !mark.is_durable() => {
                // Held until the next reservation's fsync covers it (settle_reports).
                self.unsynced += 1;
                self.mark = self.mark.max(mark);
            }
            Ok(_) => self.release_held(1),
            // The lease was lost meanwhile (expired and redelivered): the other delivery
            // decides.
            Err(Error::InvalidState { .. } | Error::NotFound(_)) => {
                self.release_held(1);
                c.lost_leases.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                self.release_held(1);
                return Err(e);
            }
        }
        // A failure report wrote a record: the next handler starts now.
        Ok((false, Instant::now()))
    }

    /// Reports a failed delivery (deferred: see [`WorkerQueue::retry_deferred`]) and
    /// counts it; returns the report's mark, and true when the message went to the DLQ.
    fn report_failure(
        &mut self,
        msg: &Q::Message,
        failure: Failure,
        duration: Duration,
    ) -> Result<(WriteMark, bool)> {
        let shared = self.shared;
        let c = &shared.counters;
        let now = self.queue.now_ms();
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
            .worker(self.name);
        let (mark, retry_at) = match action {
            Action::DeadLetter => (self.queue.dead_letter_deferred(msg, &report)?, None),
            Action::RetryAt(at) => match self.queue.retry_deferred(msg, &report, at)? {
                (FailureOutcome::Retried { visible_at_ms }, mark) => (mark, Some(visible_at_ms)),
                (FailureOutcome::DeadLettered, mark) => (mark, None),
            },
        };
        let counter = match retry_at {
            Some(_) => &c.retried,
            None => &c.dead_lettered,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        trace_failure(msg, &failure.kind, retry_at);
        Ok((mark, retry_at.is_none()))
    }
}

/// Extends the leases of handlers that have used half of theirs.
fn heartbeat_loop<Q: WorkerQueue>(shared: &Shared<Q>) {
    let tick = (shared.lease / 4).max(Duration::from_millis(5));
    while !shared.stop.load(Ordering::Acquire) || shared.in_flight() > 0 {
        {
            let mut g = shared.done_lock.lock();
            if shared.stop.load(Ordering::Acquire) && shared.in_flight() == 0 {
                return;
            }
            shared.done.wait_for(&mut g, tick);
        }
        shared.presence.beat(shared.queue.now_ms());
        let now = Instant::now();
        for slot in &shared.slots {
            let (msgs, from) = {
                let held = slot.held.lock();
                if held.from >= held.msgs.len()
                    || held.deadline.saturating_duration_since(now) >= shared.lease / 2
                {
                    continue;
                }
                (Arc::clone(&held.msgs), held.from)
            };
            for msg in &msgs[from..] {
                // A message finished meanwhile is refused: nothing to extend.
                let _ = shared.queue.extend(msg, shared.lease);
            }
            slot.held.lock().deadline = Instant::now() + shared.lease;
        }
    }
}
