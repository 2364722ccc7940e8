//! The wake-up of waiting async consumers: the futures' counterpart of the engine's
//! `ready` condition variable, notified at the same points (a write that made a message
//! ready, [`Engine::wake`](super::Engine::wake)). A future waits for the signal's epoch to
//! move past the one it saw before it looked at the queue, so a notification between its
//! look and its registration is never lost. No thread waits: each waiting future leaves a
//! waker, and a notification wakes them all.
//!
//! Invariants:
//! - a [`ReadyChanged`] completes once the epoch differs from the one it was made with;
//! - a future polled again replaces its waker (one entry per waiting future), and one
//!   dropped removes it, so the list holds only futures that wait.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, Waker};

use parking_lot::Mutex;

/// The epoch and the wakers of the futures waiting on it.
#[derive(Default)]
pub(crate) struct ReadySignal {
    epoch: AtomicU64,
    next_id: AtomicU64,
    wakers: Mutex<Vec<(u64, Waker)>>,
}

impl ReadySignal {
    /// The epoch now: take it before looking at the queue.
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    /// Moves the epoch on and wakes every waiting future.
    pub(crate) fn notify(&self) {
        self.epoch.fetch_add(1, Ordering::AcqRel);
        let wakers = std::mem::take(&mut *self.wakers.lock());
        for (_, w) in wakers {
            w.wake();
        }
    }

    /// A future that completes once the epoch is no longer `seen`.
    pub(crate) fn changed(&self, seen: u64) -> ReadyChanged<'_> {
        ReadyChanged {
            signal: self,
            seen,
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
        }
    }
}

/// See [`ReadySignal::changed`].
pub(crate) struct ReadyChanged<'a> {
    signal: &'a ReadySignal,
    seen: u64,
    id: u64,
}

impl Future for ReadyChanged<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.signal.epoch() != self.seen {
            return Poll::Ready(());
        }
        {
            let mut wakers = self.signal.wakers.lock();
            match wakers.iter_mut().find(|(id, _)| *id == self.id) {
                Some((_, w)) => w.clone_from(cx.waker()),
                None => wakers.push((self.id, cx.waker().clone())),
            }
        }
        // A notification between the first check and the registration took the list
        // before this waker was in it.
        if self.signal.epoch() != self.seen {
            return Poll::Ready(());
        }
        Poll::Pending
    }
}

impl Drop for ReadyChanged<'_> {
    fn drop(&mut self) {
        let mut wakers = self.signal.wakers.lock();
        if let Some(i) = wakers.iter().position(|(id, _)| *id == self.id) {
            wakers.swap_remove(i);
        }
    }
}
