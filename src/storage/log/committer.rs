//! The commit thread: durability for callers that must not block (futures). A caller
//! registers the log position it needs durable and gets a [`DurableWait`], a future; the
//! thread (`deadletter-commit`, started by the first registration, stopped by
//! [`Log::close`](super::Log::close)) takes every registration waiting, leads or joins one
//! group-commit fsync up to the largest position among them (the same protocol blocking
//! callers use, so it shares their fsyncs too), and completes each registration it covered,
//! waking its task. Registrations made while an fsync runs wait for the next one: however
//! many futures wait at once, each fsync covers all of them (and the thread gathers them
//! first, as group commit's leader does: see `run`).
//!
//! Invariants:
//! - a [`DurableWait`] completes `Ok` only once the log is durable up to its position, and
//!   with an error once the fsync that should have covered it failed (the log is then
//!   poisoned);
//! - every registration is completed, also when the log closes with registrations
//!   waiting (the close syncs them first, and completes them);
//! - no code here blocks the registering thread on I/O: registering takes a short lock.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll, Waker};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use super::group_commit::MAX_GATHER;
use super::Inner;
use crate::error::{Error, Result};

/// One registration's outcome, and the task to wake when it arrives.
#[derive(Default)]
struct Slot {
    state: Mutex<SlotState>,
}

#[derive(Default)]
struct SlotState {
    done: Option<Result<()>>,
    waker: Option<Waker>,
}

impl Slot {
    fn complete(&self, result: Result<()>) {
        let waker = {
            let mut s = self.state.lock();
            s.done = Some(result);
            s.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }
}

/// A future that completes once the log is durable up to a position (see the module
/// docs). Dropping it cancels nothing: the fsync happens anyway, and the records it
/// waited for are as durable as they would have been.
#[must_use = "a DurableWait does nothing unless awaited"]
pub struct DurableWait {
    slot: Arc<Slot>,
}

impl DurableWait {
    /// A wait that is already over, with `result`.
    pub(crate) fn ready(result: Result<()>) -> DurableWait {
        let slot = Arc::new(Slot::default());
        slot.state.lock().done = Some(result);
        DurableWait { slot }
    }
}

impl std::fmt::Debug for DurableWait {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let done = self.slot.state.lock().done.is_some();
        f.debug_struct("DurableWait").field("done", &done).finish()
    }
}

impl Future for DurableWait {
    type Output = Result<()>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        let mut s = self.slot.state.lock();
        match s.done.take() {
            Some(result) => Poll::Ready(result),
            None => {
                match &s.waker {
                    Some(w) if w.will_wake(cx.waker()) => {}
                    _ => s.waker = Some(cx.waker().clone()),
                }
                Poll::Pending
            }
        }
    }
}

/// The registrations waiting for the commit thread.
#[derive(Default)]
struct Queue {
    waiting: Vec<(u64, Arc<Slot>)>,
    stop: bool,
}

/// The commit thread and what it serves.
pub(super) struct Committer {
    queue: Arc<(Mutex<Queue>, Condvar)>,
    thread: Option<JoinHandle<()>>,
}

impl Committer {
    /// Starts the commit thread of the log `inner`.
    pub(super) fn start(inner: Weak<Inner>) -> std::io::Result<Committer> {
        let queue: Arc<(Mutex<Queue>, Condvar)> = Arc::default();
        let served = Arc::clone(&queue);
        let thread = std::thread::Builder::new()
            .name("deadletter-commit".into())
            .spawn(move || run(&served, &inner))?;
        Ok(Committer {
            queue,
            thread: Some(thread),
        })
    }

    /// Registers a wait for `target` (the caller checked it is not durable yet).
    pub(super) fn register(&self, target: u64) -> DurableWait {
        let slot = Arc::new(Slot::default());
        let (lock, wake) = &*self.queue;
        let mut q = lock.lock();
        if q.stop {
            return DurableWait::ready(Err(Error::Poisoned));
        }
        q.waiting.push((target, Arc::clone(&slot)));
        drop(q);
        wake.notify_one();
        DurableWait { slot }
    }

    /// Stops the thread once it has served every registration made so far.
    pub(super) fn stop(&mut self) {
        let (lock, wake) = &*self.queue;
        lock.lock().stop = true;
        wake.notify_one();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Committer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The thread's loop: take what waits, one fsync for all of it, complete it. Before it
/// takes, it gathers as group commit's leader does (`group_commit.rs`): when the previous
/// fsync covered more than one waiter, it waits for as many to be registered again, or a
/// quarter of that fsync's duration (at most [`MAX_GATHER`]), so that a steady set of
/// writers does not split into two cohorts that alternate.
fn run(queue: &(Mutex<Queue>, Condvar), inner: &Weak<Inner>) {
    let (lock, wake) = queue;
    let (mut last_cohort, mut last_fsync) = (0usize, Duration::ZERO);
    loop {
        let batch = {
            let mut q = lock.lock();
            while q.waiting.is_empty() && !q.stop {
                wake.wait(&mut q);
            }
            if q.waiting.is_empty() {
                return;
            }
            if last_cohort > 1 {
                let give_up = Instant::now() + (last_fsync / 4).min(MAX_GATHER);
                while q.waiting.len() < last_cohort && !q.stop {
                    if wake.wait_until(&mut q, give_up).timed_out() {
                        break;
                    }
                }
            }
            std::mem::take(&mut q.waiting)
        };
        let target = batch.iter().map(|(t, _)| *t).max().unwrap_or(0);
        let started = Instant::now();
        let mut result = match inner.upgrade() {
            Some(inner) => inner.sync_to(target),
            None => Err(Error::Poisoned),
        };
        (last_cohort, last_fsync) = (batch.len(), started.elapsed());
        for (_, slot) in batch {
            // The first waiter gets the failure itself; the others what every later write
            // of a poisoned log gets.
            let mine = std::mem::replace(&mut result, Err(Error::Poisoned));
            let ok = mine.is_ok();
            slot.complete(mine);
            if ok {
                result = Ok(());
            }
        }
    }
}
