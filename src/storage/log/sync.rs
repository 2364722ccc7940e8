//! Group commit: an fsync covers every record appended before it, so concurrent callers
//! waiting for durability share one; under `Durability::Interval` a background thread
//! syncs at the interval.
//!
//! **Gathering.** Left to itself, group commit splits a steady set of writers into two
//! cohorts that alternate: the writers released by one fsync append again while the next
//! one, started at once by a waiter, is already under way, so each fsync covers about half
//! of them (four threads enqueueing one at a time went only twice as fast as one). So a
//! thread that becomes the leader first waits for the cohort of the previous fsync, the
//! number of waiters it covered, to be back: until as many writers wait for an fsync, or a
//! quarter of the previous fsync's duration has passed (at most [`MAX_GATHER`]). A lone
//! writer (a cohort of one) never waits, and a cohort that does not come back in time
//! shrinks the next wait's aim to the writers that did. A simulated disk, whose runs
//! depend on their seed alone, never waits.
//!
//! Invariants: a waiter counts in `SyncState::waiting` from after its append until it
//! returns, so every waiter the leader counts is covered by the fsync it leads; the wait
//! is bounded, so no writer waits for a writer that never comes.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::{Inner, Log};
use crate::error::{Error, Result};

/// The longest a leader waits for the previous fsync's cohort to be back.
pub const MAX_GATHER: Duration = Duration::from_micros(500);

/// Group commit's bookkeeping, under `Inner::sync_state`.
#[derive(Debug, Default)]
pub(super) struct SyncState {
    /// True while one thread leads an fsync (or gathers for one); the others wait on
    /// `Inner::sync_done`.
    busy: bool,
    /// The log positions that the threads in [`Inner::sync_to`] wait for, one per thread.
    waiting: Vec<u64>,
    /// True while the leader gathers: an arriving waiter wakes it (`Inner::sync_arrived`).
    gathering: bool,
    /// How many waiters the previous fsync covered.
    last_cohort: usize,
    /// How long the previous fsync took.
    last_fsync: Duration,
}

impl SyncState {
    /// Waiters not covered by what is durable now.
    fn uncovered(&self, synced: u64) -> usize {
        self.waiting.iter().filter(|&&t| t > synced).count()
    }

    /// Forgets one waiter for `target`.
    fn leave(&mut self, target: u64) {
        if let Some(i) = self.waiting.iter().position(|&t| t == target) {
            self.waiting.swap_remove(i);
        }
    }
}

impl Log {
    /// Writes and fsyncs everything appended so far.
    pub fn sync(&self) -> Result<()> {
        let end = self.inner.writer.lock().appended_end();
        self.inner.sync_to(end)
    }
}

impl Inner {
    /// Returns once everything up to `target` is durable, leading an fsync or waiting for
    /// the one under way (group commit).
    pub(super) fn sync_to(&self, target: u64) -> Result<()> {
        if self.synced.load(Ordering::Acquire) >= target {
            return Ok(());
        }
        let mut s = self.sync_state.lock();
        s.waiting.push(target);
        if s.gathering {
            self.sync_arrived.notify_one();
        }
        let result = loop {
            if self.poisoned.load(Ordering::Acquire) {
                break Err(Error::Poisoned);
            }
            if self.synced.load(Ordering::Acquire) >= target {
                break Ok(());
            }
            if s.busy {
                self.sync_done.wait(&mut s);
                continue;
            }
            s.busy = true;
            self.gather(&mut s);
            let cohort = s.uncovered(self.synced.load(Ordering::Acquire));
            let result = parking_lot::MutexGuard::unlocked(&mut s, || {
                let started = Instant::now();
                self.sync_once().map(|()| started.elapsed())
            });
            s.busy = false;
            if let Ok(took) = result {
                s.last_fsync = took;
                s.last_cohort = cohort;
            }
            self.sync_done.notify_all();
            if let Err(e) = result {
                break Err(e);
            }
        };
        s.leave(target);
        result
    }

    /// The leader's wait for the previous fsync's cohort (see the module docs).
    fn gather(&self, s: &mut parking_lot::MutexGuard<'_, SyncState>) {
        if s.last_cohort <= 1 || !self.fs.allows_background_io() {
            return;
        }
        let give_up = Instant::now() + (s.last_fsync / 4).min(MAX_GATHER);
        s.gathering = true;
        while s.uncovered(self.synced.load(Ordering::Acquire)) < s.last_cohort {
            if self.sync_arrived.wait_until(s, give_up).timed_out() {
                break;
            }
        }
        s.gathering = false;
    }

    /// Writes the buffer and fsyncs the active segment once.
    fn sync_once(&self) -> Result<()> {
        let (file, path, end) = {
            let mut w = self.writer.lock();
            self.flush_locked(&mut w)?;
            (
                Arc::clone(&w.active.file),
                w.active.path.clone(),
                w.appended_end(),
            )
        };
        if self.synced.load(Ordering::Acquire) >= end {
            return Ok(());
        }
        if let Err(e) = file.sync() {
            return self.poison(Error::io("fsync", path, e));
        }
        self.fsyncs.fetch_add(1, Ordering::Relaxed);
        self.synced.fetch_max(end, Ordering::AcqRel);
        Ok(())
    }
}
pub(super) fn spawn_flusher(
    inner: Weak<Inner>,
    every: Duration,
) -> std::io::Result<(crossbeam_channel::Sender<()>, JoinHandle<()>)> {
    let (stop, stopped) = crossbeam_channel::bounded::<()>(0);
    let handle = std::thread::Builder::new()
        .name("deadletter-flush".into())
        .spawn(move || loop {
            match stopped.recv_timeout(every) {
                Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
                _ => return,
            }
            let Some(inner) = inner.upgrade() else { return };
            let end = inner.writer.lock().appended_end();
            // An error poisons the log; appenders see it on their next call.
            let _ = inner.sync_to(end);
        })?;
    Ok((stop, handle))
}
