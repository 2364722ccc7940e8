//! The compaction schedule: a thread that runs [`Store::compact_now`] at an interval.
//!
//! A store opened with [`CompactionOptions::interval`](crate::store::CompactionOptions::interval)
//! set (the default: every minute) runs one for as long as a handle on it lives; a program
//! that opened its store without one starts it itself ([`Compactor::start`]) and holds the
//! guard.
//!
//! Invariants:
//! - the thread holds the store weakly between runs: it never keeps a store open;
//! - dropping the guard waits for a run under way to end, then lets go of the store (the
//!   guard's own handle), so the thread never outlives the engine it compacts;
//! - a failed run (a full disk, say) is tried again at the next interval; the same error
//!   reaches the callers of the failing operation directly.

use std::time::Duration;

use crate::api::core::actor::Actor;
use crate::api::core::store::Store;
use crate::api::services::thread::ServiceThread;
use crate::error::{require, Result};

/// A running compaction schedule (a guard): [`Store::compact_now`] every interval, on a
/// thread of its own, until the guard is dropped. It keeps the store open meanwhile.
pub struct Compactor {
    /// Declared first: stopped (and joined) before the handle below goes.
    _thread: ServiceThread,
    _store: Store,
}

impl std::fmt::Debug for Compactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compactor")
            .field("dir", &self._store.dir())
            .finish_non_exhaustive()
    }
}

impl Compactor {
    /// Starts compacting `store` every `every`, the first run one interval from now.
    /// [`Error::ReadOnly`](crate::Error::ReadOnly) on a snapshot,
    /// [`Error::InvalidConfig`](crate::Error::InvalidConfig) for an interval of zero.
    pub fn start(store: &Store, every: Duration) -> Result<Compactor> {
        store.writable()?;
        require(!every.is_zero(), "compaction interval of zero")?;
        let weak = store.downgrade();
        let thread = ServiceThread::spawn(
            "deadletter-compact",
            "spawn compaction thread",
            every,
            move || {
                let store = weak.upgrade(&Actor::store())?;
                // An error here is retried at the next interval (module documentation).
                let _ = store.compact_now();
                Some(every)
            },
        )?;
        Ok(Compactor {
            _thread: thread,
            _store: store.without_services(),
        })
    }
}
