//! Syncing: an fsync covers every record appended before it, so concurrent callers
//! waiting for durability share one (group commit: how they share it, and the leader's
//! gathering, are in `group_commit.rs`, where loom checks them); under
//! `Durability::Interval` a background thread syncs at the interval.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use super::{Inner, Log};
use crate::error::{Error, Result};

impl Log {
    /// Writes and fsyncs everything appended so far.
    pub fn sync(&self) -> Result<()> {
        self.inner.sync_to(self.end_position())
    }

    /// Returns once everything below log position `target` is durable: at once if an
    /// fsync covered it already, else leading or joining one (it covers everything
    /// appended so far).
    pub fn sync_to(&self, target: u64) -> Result<()> {
        self.inner.sync_to(target)
    }

    /// A future that completes once everything below log position `target` is durable,
    /// without blocking the thread that awaits it: the commit thread (started by the first
    /// call; `committer.rs`) runs the fsync, shared with every other waiter, blocking or
    /// not, and wakes the task.
    #[cfg(feature = "async")]
    pub fn durable_at(&self, target: u64) -> super::DurableWait {
        use super::committer::Committer;
        if self.inner.commit.synced() >= target {
            return super::DurableWait::ready(Ok(()));
        }
        if self.is_poisoned() {
            return super::DurableWait::ready(Err(Error::Poisoned));
        }
        let mut committer = self.committer.lock();
        if committer.is_none() {
            match Committer::start(Arc::downgrade(&self.inner)) {
                Ok(c) => *committer = Some(c),
                Err(e) => {
                    let e = Error::io("spawn commit thread", &self.inner.dir, e);
                    return super::DurableWait::ready(Err(e));
                }
            }
        }
        match committer.as_ref() {
            Some(c) => c.register(target),
            None => super::DurableWait::ready(Err(Error::Poisoned)),
        }
    }
}

impl Inner {
    /// Returns once everything up to `target` is durable, leading an fsync or waiting for
    /// the one under way (group commit). A simulated disk, whose runs depend on their seed
    /// alone, never gathers.
    pub(super) fn sync_to(&self, target: u64) -> Result<()> {
        self.commit.sync_to(
            target,
            self.fs.allows_background_io(),
            || self.poisoned.load(Ordering::Acquire),
            || self.sync_once(),
        )
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
        if self.commit.synced() >= end {
            return Ok(());
        }
        if let Err(e) = file.sync() {
            return self.poison(Error::io("fsync", path, e));
        }
        self.fsyncs.fetch_add(1, Ordering::Relaxed);
        self.commit.advance(end);
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
