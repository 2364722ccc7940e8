//! Group commit: an fsync covers every record appended before it, so concurrent callers
//! waiting for durability share one; under `Durability::Interval` a background thread
//! syncs at the interval.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use super::{Inner, Log};
use crate::error::{Error, Result};

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
        loop {
            if self.synced.load(Ordering::Acquire) >= target {
                return Ok(());
            }
            {
                let mut busy = self.sync_busy.lock();
                loop {
                    if self.poisoned.load(Ordering::Acquire) {
                        return Err(Error::Poisoned);
                    }
                    if self.synced.load(Ordering::Acquire) >= target {
                        return Ok(());
                    }
                    if !*busy {
                        break;
                    }
                    self.sync_done.wait(&mut busy);
                }
                *busy = true;
            }
            let result = self.sync_once();
            *self.sync_busy.lock() = false;
            self.sync_done.notify_all();
            result?;
        }
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
