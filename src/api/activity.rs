//! Signs of life: the worker pools attached to each queue and the queue's recent rates
//! (enqueued, acked, retried, dead-lettered over the last minute and the last five),
//! read together by [`Store::workers`] (and, from another process, through the control
//! socket: [`Client::workers`](crate::control::Client::workers)).
//!
//! The rates come from the index, which counts each record as it is applied into buckets
//! of five seconds (`engine::state::rates`); a window is the buckets it spans, the current
//! one up to now included, so [`RateWindow::covered_ms`] is what a per-second rate divides
//! by. Nothing here is persisted: after a reopen the rates hold what the log replayed past
//! its last checkpoint, and the pools are those started since.

use serde::{Deserialize, Serialize};

use crate::api::core::pools::AttachedPool;
use crate::api::core::store::Store;
use crate::api::queue::Queue;
use crate::engine::state::{Activity, RecentActivity, RATE_BUCKETS, RATE_BUCKET_MS};

/// What a queue did over one window of time (see [`QueueRates`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RateWindow {
    /// The window's nominal length in seconds (60 or 300).
    pub seconds: u64,
    /// The milliseconds its counts cover: the whole buckets before the current one and the
    /// part of the current one elapsed (at most `seconds` × 1000).
    pub covered_ms: u64,
    /// Messages enqueued.
    pub enqueued: u64,
    /// Deliveries acked.
    pub acked: u64,
    /// Failed deliveries scheduled for another attempt.
    pub retried: u64,
    /// Messages moved to the DLQ.
    pub dead_lettered: u64,
}

impl RateWindow {
    /// Failed deliveries: retried and dead-lettered.
    pub fn failed(&self) -> u64 {
        self.retried + self.dead_lettered
    }

    /// `count` per second over the time this window covers.
    pub fn per_second(&self, count: u64) -> f64 {
        if self.covered_ms == 0 {
            return 0.0;
        }
        count as f64 * 1000.0 / self.covered_ms as f64
    }

    fn of(activity: &RecentActivity, now_ms: u64, seconds: u64) -> RateWindow {
        let buckets = (seconds * 1000).div_ceil(RATE_BUCKET_MS) as usize;
        let (counts, covered_ms) = activity.window(now_ms, buckets.min(RATE_BUCKETS));
        RateWindow {
            seconds,
            covered_ms,
            enqueued: counts[Activity::Enqueued as usize],
            acked: counts[Activity::Acked as usize],
            retried: counts[Activity::Retried as usize],
            dead_lettered: counts[Activity::DeadLettered as usize],
        }
    }
}

/// A queue's recent rates ([`Queue::rates`]).
///
/// ```
/// use deadletter::{Config, Store};
/// use deadletter::clock::ManualClock;
///
/// # let dir = tempfile::tempdir().unwrap();
/// let clock = ManualClock::new(1_700_000_000_000);
/// let store = Store::open(&dir, Config::fast().clock(clock.clone()))?;
/// let orders = store.queue("orders")?;
/// orders.enqueue_batch(&["ORD-1", "ORD-2", "ORD-3"])?;
/// let msg = orders.lease(1)?.remove(0);
/// orders.ack(&msg)?;
///
/// let rates = orders.rates();
/// assert_eq!((rates.last_minute.enqueued, rates.last_minute.acked), (3, 1));
/// clock.advance(2 * 60_000); // two minutes later
/// let rates = orders.rates();
/// assert_eq!(rates.last_minute.enqueued, 0);
/// assert_eq!(rates.last_5_minutes.enqueued, 3);
/// # Ok::<(), deadletter::Error>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct QueueRates {
    /// The last minute.
    pub last_minute: RateWindow,
    /// The last five minutes.
    pub last_5_minutes: RateWindow,
}

/// One queue's pools and rates (see [`Workers`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct QueueWorkers {
    /// The queue.
    pub queue: String,
    /// The pools attached to it, in start order (empty: nothing consumes it now).
    pub pools: Vec<AttachedPool>,
    /// Its recent rates.
    pub rates: QueueRates,
}

/// Every queue's attached pools and recent rates ([`Store::workers`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Workers {
    /// When it was read (ms since the epoch, by the store's clock).
    pub at_ms: u64,
    /// The process that read it: the store's owner when read through its control socket.
    pub pid: u32,
    /// False for a read-only snapshot, which sees no pool (they run in the process that
    /// holds the store) and only the rates of the records after its last checkpoint.
    pub live: bool,
    /// One entry per queue, in creation order.
    pub queues: Vec<QueueWorkers>,
}

impl Workers {
    /// The entry of queue `name`.
    pub fn queue(&self, name: &str) -> Option<&QueueWorkers> {
        self.queues.iter().find(|q| q.queue == name)
    }
}

impl Queue {
    /// How many messages this queue enqueued, acked, retried and dead-lettered over the
    /// last minute and the last five (counted as the records are applied, by the times
    /// they carry; not persisted).
    pub fn rates(&self) -> QueueRates {
        let now = self.store().now();
        let id = self.id() as usize;
        let st = self.store().engine().lock();
        let activity = &st.queues[id].activity;
        QueueRates {
            last_minute: RateWindow::of(activity, now, 60),
            last_5_minutes: RateWindow::of(activity, now, 300),
        }
    }
}

impl Store {
    /// Every queue with the worker pools attached to it in this process
    /// ([`Store::attached_pools`]) and its recent rates ([`Queue::rates`]). Read from the
    /// process that holds the store; another process asks it through the control socket
    /// ([`Client::workers`](crate::control::Client::workers)).
    ///
    /// ```
    /// use std::time::Duration;
    /// use deadletter::{Config, Failure, Message, Store, WorkerPool};
    /// use deadletter::pool::Retry;
    ///
    /// # let dir = tempfile::tempdir().unwrap();
    /// let store = Store::open(&dir, Config::fast())?;
    /// let orders = store.queue("orders")?;
    /// store.queue("audit")?;
    /// let pool = WorkerPool::new(&orders)
    ///     .workers(2)
    ///     .retry(Retry::fixed(Duration::from_millis(1)).max_attempts(2))
    ///     .start(|_: &Message| Err(Failure::transient("Timeout", "no answer")))?;
    /// orders.enqueue(b"ORD-1")?;
    /// pool.run_until_idle()?;
    ///
    /// let workers = store.workers();
    /// let orders_now = workers.queue("orders").unwrap();
    /// assert_eq!(orders_now.pools[0].workers, 2);
    /// assert_eq!(orders_now.rates.last_minute.failed(), 2); // one retry, one dead letter
    /// assert!(workers.queue("audit").unwrap().pools.is_empty()); // nothing consumes it
    /// # drop(pool);
    /// # Ok::<(), deadletter::Error>(())
    /// ```
    pub fn workers(&self) -> Workers {
        let pools = self.attached_pools();
        let queues = self
            .queue_names()
            .into_iter()
            .filter_map(|name| self.existing_queue(&name).ok())
            .map(|queue| QueueWorkers {
                pools: pools
                    .iter()
                    .filter(|p| p.queue == queue.name())
                    .cloned()
                    .collect(),
                rates: queue.rates(),
                queue: queue.name().to_string(),
            })
            .collect();
        Workers {
            at_ms: self.now(),
            pid: std::process::id(),
            live: !self.is_read_only(),
            queues,
        }
    }
}
