//! The worker pools attached to a store: each running pool (the thread pool and the async
//! pool) registers a [`PoolPresence`] with its queue's store while it runs, and the
//! [`PoolAttachment`] it gets back takes it out again when the pool stops or is dropped.
//! [`Store::attached_pools`](crate::Store::attached_pools) reads them as [`AttachedPool`]s.
//!
//! Invariants:
//! - in memory only: nothing is written to the log, and a store reopened has none until its
//!   pools start again;
//! - a pool is listed from its start until its attachment is dropped, which its stop and its
//!   drop both do (the attachment is the last thing a stopping pool lets go of);
//! - what a pool changes as it runs costs it no lock: its heartbeat is one atomic store at
//!   most once per [`HEARTBEAT_EVERY_MS`] of its clock, and the handlers running are read
//!   from the pool's own counters only when the registry is read.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

/// A pool's heartbeat is stored at most this often (ms of the queue's clock).
pub const HEARTBEAT_EVERY_MS: u64 = 1_000;

/// Which kind of pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum PoolKind {
    /// A [`WorkerPool`](crate::WorkerPool): worker threads.
    Threads,
    /// An `AsyncWorkerPool` (feature `async`): handlers as tokio tasks.
    Async,
}

impl PoolKind {
    /// `threads` or `async`.
    pub fn name(self) -> &'static str {
        match self {
            PoolKind::Threads => "threads",
            PoolKind::Async => "async",
        }
    }
}

/// A pool attached to a store, as [`Store::attached_pools`](crate::Store::attached_pools)
/// reads it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct AttachedPool {
    /// Its number in this process (in start order; not reused while the store is open).
    pub id: u64,
    /// The queue it consumes.
    pub queue: String,
    /// The name its builder was given (`WorkerPool::name`), if one was.
    pub name: Option<String>,
    /// Threads or tasks.
    pub kind: PoolKind,
    /// Worker threads (the thread pool), or how many handlers may run at once (the async
    /// pool).
    pub workers: u64,
    /// Handlers running now.
    pub in_flight: u64,
    /// When it started (ms since the epoch, by the queue's clock).
    pub started_at_ms: u64,
    /// When it was last seen working or idle-polling (ms since the epoch, by the queue's
    /// clock): a pool whose heartbeat is old is stuck (or its clock stands still).
    pub last_heartbeat_ms: u64,
    /// The process it runs in.
    pub pid: u32,
    /// The host that process runs on, when known.
    pub host: Option<String>,
}

/// What a running pool tells the registry: what it is (fixed at its start) and its
/// heartbeat, with a reading of the handlers it runs now. A pool makes one at its start
/// and hands it to its queue ([`WorkerQueue::attach_pool`](crate::backend::WorkerQueue::attach_pool)).
pub struct PoolPresence {
    queue: String,
    name: Option<String>,
    kind: PoolKind,
    workers: u64,
    started_at_ms: u64,
    pid: u32,
    host: Option<String>,
    heartbeat_ms: AtomicU64,
    in_flight: Box<dyn Fn() -> u64 + Send + Sync>,
}

impl std::fmt::Debug for PoolPresence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PoolPresence")
            .field("queue", &self.queue)
            .field("name", &self.name)
            .field("kind", &self.kind)
            .field("workers", &self.workers)
            .finish_non_exhaustive()
    }
}

impl PoolPresence {
    /// The presence of a pool of `kind` with `workers` on `queue`, started at `now_ms`;
    /// `in_flight` reads how many of its handlers run.
    pub(crate) fn new(
        queue: &str,
        name: Option<String>,
        kind: PoolKind,
        workers: usize,
        now_ms: u64,
        in_flight: impl Fn() -> u64 + Send + Sync + 'static,
    ) -> PoolPresence {
        let holder = crate::storage::vfs::LockHolder::this_process();
        PoolPresence {
            pid: holder.pid.unwrap_or_else(std::process::id),
            host: holder.host,
            queue: queue.to_string(),
            name,
            kind,
            workers: workers as u64,
            started_at_ms: now_ms,
            heartbeat_ms: AtomicU64::new(now_ms),
            in_flight: Box::new(in_flight),
        }
    }

    /// Records that the pool is alive at `now_ms`: stored when the last heartbeat is at
    /// least [`HEARTBEAT_EVERY_MS`] older (a load otherwise, so that workers calling it for
    /// every batch do not write one shared cache line).
    pub fn beat(&self, now_ms: u64) {
        let last = self.heartbeat_ms.load(Ordering::Relaxed);
        if now_ms >= last.saturating_add(HEARTBEAT_EVERY_MS) {
            self.heartbeat_ms.fetch_max(now_ms, Ordering::Relaxed);
        }
    }

    /// The queue the pool consumes.
    pub fn queue(&self) -> &str {
        &self.queue
    }

    /// The pool as it is now, numbered `id`.
    pub fn reading(&self, id: u64) -> AttachedPool {
        AttachedPool {
            id,
            queue: self.queue.clone(),
            name: self.name.clone(),
            kind: self.kind,
            workers: self.workers,
            in_flight: (self.in_flight)(),
            started_at_ms: self.started_at_ms,
            last_heartbeat_ms: self.heartbeat_ms.load(Ordering::Relaxed),
            pid: self.pid,
            host: self.host.clone(),
        }
    }
}

/// The pools attached to one store.
#[derive(Default)]
pub(crate) struct PoolRegistry {
    inner: Arc<Mutex<Registered>>,
}

#[derive(Default)]
struct Registered {
    next_id: u64,
    pools: Vec<(u64, Arc<PoolPresence>)>,
}

impl PoolRegistry {
    /// Adds `pool`; it stays listed until the returned attachment is dropped.
    pub(crate) fn attach(&self, pool: Arc<PoolPresence>) -> PoolAttachment {
        let id = {
            let mut r = self.inner.lock();
            r.next_id += 1;
            let id = r.next_id;
            r.pools.push((id, pool));
            id
        };
        let registry = Arc::downgrade(&self.inner);
        PoolAttachment::new(move || {
            if let Some(registry) = registry.upgrade() {
                registry.lock().pools.retain(|(i, _)| *i != id);
            }
        })
    }

    /// Every attached pool, in start order.
    pub(crate) fn list(&self) -> Vec<AttachedPool> {
        let pools: Vec<_> = self.inner.lock().pools.clone();
        pools.iter().map(|(id, p)| p.reading(*id)).collect()
    }
}

/// A pool's registration with its backend (from
/// [`WorkerQueue::attach_pool`](crate::backend::WorkerQueue::attach_pool)): dropping it
/// takes the pool out of the registry.
pub struct PoolAttachment {
    detach: Option<Box<dyn FnOnce() + Send + Sync>>,
}

impl std::fmt::Debug for PoolAttachment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PoolAttachment").finish_non_exhaustive()
    }
}

impl PoolAttachment {
    /// An attachment that runs `detach` when dropped: what a backend with a registry of its
    /// own returns.
    pub fn new(detach: impl FnOnce() + Send + Sync + 'static) -> PoolAttachment {
        PoolAttachment {
            detach: Some(Box::new(detach)),
        }
    }
}

impl Drop for PoolAttachment {
    fn drop(&mut self) {
        if let Some(detach) = self.detach.take() {
            detach();
        }
    }
}
