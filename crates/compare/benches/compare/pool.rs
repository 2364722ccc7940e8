//! Worker pools: what a pool run is given ([`PoolRun`]), when it is over
//! ([`Completion`]), and the pool every contestant without one of its own gets
//! ([`batch_pool`]).
//!
//! A pool run hands each message to a handler shared by all workers, which
//! returns an [`Outcome`]. The handler is the harness's, not the engine's: it
//! counts what it settles (acks and permanent failures) in the run's
//! [`Completion`], so a run ends at the same point for every engine, and
//! the engine's pool is then stopped with every outcome committed (its stop is
//! part of the timed run).
//!
//! [`batch_pool`] is the best batching the `Contestant` trait allows: every
//! worker thread leases a batch in one commit, runs the handler on each
//! message, reports each failure (one commit each: a retry or a move to the
//! DLQ), and acks the batch's successes in one commit. A worker that finds
//! nothing to lease sleeps [`IDLE_SLEEP`] and asks again (messages waiting out
//! a backoff become visible by themselves), as a polling consumer does.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::contestant::{BenchResult, Contestant, Failure, Id};

/// How long an idle [`batch_pool`] worker sleeps before leasing again.
pub const IDLE_SLEEP: Duration = Duration::from_micros(200);

/// What the handler decided for one delivery.
#[derive(Clone, Debug)]
pub enum Outcome {
    /// Success: ack.
    Ack,
    /// Transient failure: retry after the run's backoff.
    Retry(&'static str),
    /// Permanent failure: straight to the DLQ.
    Dead {
        /// Error kind.
        kind: &'static str,
        /// Error message.
        error: String,
    },
}

/// The handler of a pool run: payload and attempt (1 on the first delivery).
pub type PoolHandler = Arc<dyn Fn(&[u8], u32) -> Outcome + Send + Sync>;

/// Counts settled messages and tells when a pool run is over: once `target`
/// are settled, or once the deadline has passed (a run bounded by the time
/// budget).
pub struct Completion {
    settled: AtomicUsize,
    target: AtomicUsize,
    deadline: Instant,
    lock: Mutex<()>,
    done: Condvar,
}

impl Completion {
    /// Over once `target` messages are settled or `budget` has passed.
    pub fn new(target: usize, budget: Duration) -> Arc<Self> {
        Arc::new(Completion {
            settled: AtomicUsize::new(0),
            target: AtomicUsize::new(target),
            deadline: Instant::now() + budget,
            lock: Mutex::new(()),
            done: Condvar::new(),
        })
    }

    /// Counts one settled message; wakes the waiter at the target.
    pub fn settle(&self) {
        let settled = self.settled.fetch_add(1, Ordering::AcqRel) + 1;
        if settled == self.target.load(Ordering::Acquire) {
            self.wake();
        }
    }

    /// Lowers the target (a producer that stopped early at its time budget).
    pub fn set_target(&self, target: usize) {
        self.target.store(target, Ordering::Release);
        if self.all_settled() {
            self.wake();
        }
    }

    fn wake(&self) {
        // Taking the lock orders the wake-up after a waiter's check.
        drop(self.lock.lock());
        self.done.notify_all();
    }

    /// Messages settled so far.
    pub fn settled(&self) -> usize {
        self.settled.load(Ordering::Acquire)
    }

    /// True when every message is settled.
    pub fn all_settled(&self) -> bool {
        self.settled() >= self.target.load(Ordering::Acquire)
    }

    /// True when the run is over (all settled, or past the deadline).
    pub fn is_done(&self) -> bool {
        self.all_settled() || Instant::now() >= self.deadline
    }

    /// Blocks until the run is over, or for at most `timeout`; returns
    /// [`Completion::is_done`].
    pub fn wait(&self, timeout: Duration) -> bool {
        let until = (Instant::now() + timeout).min(self.deadline);
        let mut g = self.lock.lock();
        while !self.all_settled() && Instant::now() < until {
            self.done.wait_until(&mut g, until);
        }
        self.is_done()
    }
}

/// One pool run.
pub struct PoolRun {
    /// Worker threads.
    pub workers: usize,
    /// Messages per lease of [`batch_pool`] (an engine's own pool sizes its
    /// batches itself).
    pub lease_batch: usize,
    /// Backoff of a transient failure.
    pub retry_after: Duration,
    /// The handler.
    pub handler: PoolHandler,
    /// When the run is over.
    pub completion: Arc<Completion>,
}

/// The pool built on the trait (see the module doc).
pub fn batch_pool<C: Contestant + ?Sized>(c: &C, run: &PoolRun) -> BenchResult<()> {
    thread::scope(|s| {
        let workers: Vec<_> = (0..run.workers)
            .map(|_| s.spawn(|| batch_worker(c, run)))
            .collect();
        let mut first_error = None;
        for w in workers {
            let result = w
                .join()
                .map_err(|_| -> crate::contestant::BenchError { "pool worker panicked".into() })
                .and_then(|r| r);
            if let Err(e) = result {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    })
}

fn batch_worker<C: Contestant + ?Sized>(c: &C, run: &PoolRun) -> BenchResult<()> {
    let mut acks: Vec<Id> = Vec::with_capacity(run.lease_batch);
    while !run.completion.is_done() {
        let leased = c.lease(run.lease_batch)?;
        if leased.is_empty() {
            thread::sleep(IDLE_SLEEP);
            continue;
        }
        acks.clear();
        for m in &leased {
            match (run.handler)(&m.payload, m.attempt) {
                Outcome::Ack => acks.push(m.id),
                Outcome::Retry(error) => c.nack(
                    m.id,
                    &Failure::Transient {
                        error,
                        retry_after: run.retry_after,
                    },
                )?,
                Outcome::Dead { kind, error } => c.nack(
                    m.id,
                    &Failure::Permanent {
                        kind,
                        error: &error,
                    },
                )?,
            }
        }
        if !acks.is_empty() {
            c.ack(&acks)?;
        }
    }
    Ok(())
}
