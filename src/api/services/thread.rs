//! A service's thread: rounds of work with a wait between them, stopped by its owner.
//!
//! Invariants:
//! - dropping the [`ServiceThread`] stops the thread and waits for the round under way to
//!   end, unless it is dropped on that very thread (then it only stops it: a thread cannot
//!   wait for itself);
//! - a wake cuts the current wait short; wakes that come while a round runs count once.

use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{RecvTimeoutError, Sender};

use crate::error::{Error, Result};

/// A running service thread; dropping it stops the thread.
pub(crate) struct ServiceThread {
    /// Wakes the thread; dropped (disconnected) to stop it.
    wake: Option<Sender<()>>,
    handle: Option<JoinHandle<()>>,
}

impl ServiceThread {
    /// Starts thread `name` (`op` names it in an error: "spawn compaction thread"): it
    /// waits `first` (or until woken), then runs `round` and waits as long as the round
    /// says, again and again, until `round` returns `None` or the thread is stopped.
    pub(crate) fn spawn(
        name: &str,
        op: &'static str,
        first: Duration,
        mut round: impl FnMut() -> Option<Duration> + Send + 'static,
    ) -> Result<ServiceThread> {
        let (wake, woken) = crossbeam_channel::bounded::<()>(1);
        let handle = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                let mut wait = first;
                loop {
                    match woken.recv_timeout(wait) {
                        Ok(()) | Err(RecvTimeoutError::Timeout) => {}
                        Err(RecvTimeoutError::Disconnected) => return,
                    }
                    match round() {
                        Some(next) => wait = next,
                        None => return,
                    }
                }
            })
            .map_err(|e| Error::io(op, "", e))?;
        Ok(ServiceThread {
            wake: Some(wake),
            handle: Some(handle),
        })
    }

    /// Cuts the thread's current wait short.
    pub(crate) fn wake(&self) {
        if let Some(wake) = &self.wake {
            let _ = wake.try_send(());
        }
    }
}

impl Drop for ServiceThread {
    fn drop(&mut self) {
        drop(self.wake.take());
        if let Some(handle) = self.handle.take() {
            if handle.thread().id() != std::thread::current().id() {
                let _ = handle.join();
            }
        }
    }
}
