//! The store: one directory, one log, any number of queues and their DLQs.
//!
//! A [`Store`] is the API over an [`Engine`] (the log, the index, the write path): it adds
//! the configuration, per-queue options, DLQ alert hooks, the expiry clock and the
//! background compaction thread, and hands out [`Queue`] and [`Dlq`] handles.
//!
//! Invariants:
//! - under [`Durability::Always`] a call returns only after its records are durable, and
//!   any record it depended on (earlier in the log) is durable too (the engine waits);
//! - the expiry clock never goes backwards (see [`Store::expiry_now`]);
//! - one compaction runs at a time.

use std::path::Path;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::{Mutex, RwLock};

use crate::api::actor::Actor;
use crate::api::alert::{AlertFn, Alerts};
use crate::api::config::{Config, QueueOptions};
use crate::api::dlq::Dlq;
use crate::api::durations::{DurationHistogram, HandlerDurations};
use crate::api::expiry;
use crate::api::guarded::GuardDriver;
use crate::api::queue::Queue;
use crate::engine::compaction::CompactionReport;
use crate::engine::record::{Op, QueueId, RECORD_OVERHEAD};
use crate::engine::state::{Effects, IdMap, State, MAX_QUEUES};
use crate::engine::{op_entry, Batch, Engine, EngineOptions, Settle};
use crate::error::{Error, Result};
use crate::storage::log::{Durability, LogOptions, RecoveryReport, SegmentInfo};
use crate::storage::segment;
use crate::storage::vfs::RealFs;

pub(crate) struct StoreInner {
    /// The control socket's server, when [`Config::control_socket`] is on. First, so that
    /// it stops (and its socket file goes) before the engine releases the directory lock.
    control: Mutex<Option<crate::api::control::server::ControlServer>>,
    /// What drives guarded replays: its thread stops before the engine closes.
    guards: GuardDriver,
    engine: Engine,
    config: Config,
    queue_options: RwLock<IdMap<QueueId, QueueOptions>>,
    /// Enqueues refused by a queue's `max_pending`, per queue, since the store opened.
    refused: Mutex<IdMap<QueueId, u64>>,
    alerts: Alerts,
    /// Held by a compaction run: one at a time.
    compaction_run: Mutex<()>,
    /// The latest time expiry has used (see [`Store::expiry_now`]).
    expiry_high_water: Mutex<u64>,
    /// The background compaction thread.
    compactor: Mutex<Compactor>,
    /// Handler durations per queue, recorded by worker pools (not persisted).
    durations: RwLock<IdMap<QueueId, Arc<HandlerDurations>>>,
}

/// How the engine of a store opened with `config` is set up.
fn engine_options(config: &Config) -> EngineOptions {
    let wait_for_sync = config.durability == Durability::Always;
    let log = LogOptions {
        segment_size: config.segment_size,
        // Room for the payload plus its metadata.
        max_record_size: config.max_message_size + RECORD_OVERHEAD,
        // The engine waits for durability itself, outside its lock (group commit).
        durability: if wait_for_sync {
            Durability::Never
        } else {
            config.durability
        },
        preallocate: config.preallocate,
        recovery: config.recovery,
        // The last 1/32 of each segment is kept for records that carry no payload, so
        // that on a full disk, once a roll fails, consumers can still lease, ack and
        // dead-letter (and free what producers wait for).
        reserve: config.segment_size / 32,
        ..LogOptions::default()
    };
    EngineOptions {
        fs: config.vfs_or(|| Arc::new(RealFs)),
        log,
        wait_for_sync,
        relocate_below: config.compaction.relocate_below,
        batch: config.compaction.batch,
        idempotency_window_ms: config.idempotency_window.as_millis() as u64,
        fingerprint_frames: config.fingerprint_frames,
        audit: config.audit,
    }
}

/// The background compaction thread and its stop signal; dropping it stops the thread.
#[derive(Default)]
struct Compactor(Option<(crossbeam_channel::Sender<()>, JoinHandle<()>)>);

impl Drop for Compactor {
    fn drop(&mut self) {
        if let Some((stop, handle)) = self.0.take() {
            drop(stop);
            // The last handle may be dropped by the compaction thread itself.
            if handle.thread().id() != std::thread::current().id() {
                let _ = handle.join();
            }
        }
    }
}

fn spawn_compactor(
    inner: std::sync::Weak<StoreInner>,
    every: Duration,
) -> Result<(crossbeam_channel::Sender<()>, JoinHandle<()>)> {
    let (stop, stopped) = crossbeam_channel::bounded::<()>(0);
    let handle = std::thread::Builder::new()
        .name("deadletter-compact".into())
        .spawn(move || loop {
            match stopped.recv_timeout(every) {
                Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
                _ => return,
            }
            let Some(inner) = inner.upgrade() else { return };
            let store = Store {
                inner,
                actor: Actor::store(),
            };
            // An error here (a full disk, say) is retried at the next interval; the same
            // error reaches callers of the failing operation directly.
            let _ = store.compact_now();
        })
        .map_err(|e| Error::io("spawn compaction thread", "", e))?;
    Ok((stop, handle))
}

/// A store: a directory holding durable queues and their DLQs. Cheap to clone.
///
/// Opening replays the directory's log, so a store reopened after a crash holds exactly
/// what was acknowledged (under [`Durability::Always`], the default). One process at a
/// time holds a store: a second open of the same directory is [`Error::Locked`] until
/// every handle of the first (`Store`, `Queue`, `Dlq`) is dropped.
///
/// ```
/// use deadletter::{Config, Store};
///
/// # fn main() -> deadletter::Result<()> {
/// let dir = std::env::temp_dir().join(format!("deadletter-doc-store-{}", std::process::id()));
/// # let _ = std::fs::remove_dir_all(&dir);
/// let store = Store::open(&dir, Config::default())?;
/// let orders = store.queue("orders")?; // created on first use; its DLQ: "orders-dlq"
/// orders.enqueue(br#"{"orderId":"ORD-1"}"#)?;
/// assert_eq!(store.queue_names(), ["orders"]);
/// assert_eq!(store.dlq_name("orders"), "orders-dlq");
/// drop(orders);
/// store.close()?;
///
/// // Reopening replays the log: the message is still there.
/// let store = Store::open(&dir, Config::default())?;
/// assert_eq!(store.existing_queue("orders")?.len(), 1);
/// # drop(store);
/// # std::fs::remove_dir_all(&dir).ok();
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Store {
    inner: Arc<StoreInner>,
    /// Who this handle's changes to DLQs are recorded as (see [`Store::with_actor`]).
    pub(crate) actor: Actor,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("dir", &self.inner.engine.dir())
            .finish()
    }
}

/// A store held weakly (by the control socket's server): it does not keep the store open.
#[derive(Clone)]
pub(crate) struct WeakStore(std::sync::Weak<StoreInner>);

impl WeakStore {
    /// The store, while it is open.
    pub(crate) fn upgrade(&self) -> Option<Store> {
        self.0.upgrade().map(|inner| Store {
            inner,
            actor: Actor::library(),
        })
    }
}

impl Store {
    /// A weak handle on the store.
    pub(crate) fn downgrade(&self) -> WeakStore {
        WeakStore(Arc::downgrade(&self.inner))
    }

    /// The store's inner part, held weakly (by its own threads).
    pub(crate) fn downgrade_inner(&self) -> std::sync::Weak<StoreInner> {
        Arc::downgrade(&self.inner)
    }

    /// The store a weak inner part belongs to, while it is open, as the store itself (its
    /// own threads' handle: what they write names its actors itself).
    pub(crate) fn from_weak(inner: &std::sync::Weak<StoreInner>) -> Option<Store> {
        inner.upgrade().map(|inner| Store {
            inner,
            actor: Actor::store(),
        })
    }

    /// What drives the store's guarded replays.
    pub(crate) fn guard_driver(&self) -> &GuardDriver {
        &self.inner.guards
    }

    /// Opens (creating if needed) the store in `dir`, replaying its log.
    pub fn open(dir: impl AsRef<Path>, config: Config) -> Result<Store> {
        config.validate()?;
        let engine = Engine::open(dir.as_ref(), engine_options(&config))?;
        let store = Self::with_engine(engine, config);
        if let Some(every) = store.inner.config.compaction.interval {
            let handle = spawn_compactor(Arc::downgrade(&store.inner), every)?;
            *store.inner.compactor.lock() = Compactor(Some(handle));
        }
        if store.inner.config.control_socket {
            let server = crate::api::control::server::start(&store)?;
            *store.inner.control.lock() = Some(server);
        }
        let running = store
            .engine()
            .lock()
            .guards
            .all
            .values()
            .any(|g| g.status.is_active());
        if running {
            // A guarded replay resumes where the log left it.
            store.guards_due();
        }
        Ok(store)
    }

    /// Opens a read-only snapshot of the store in `dir`: what its log holds now, without
    /// taking its lock and without writing anything, so it works while another process
    /// holds the store (and on a read-only directory or a copy). Browsing, counting and
    /// analysing work as on a store opened with [`Store::open`]; every change is
    /// [`Error::ReadOnly`] (a change to a store another process holds goes through that
    /// process: see [`crate::control`]). The snapshot does not follow later writes: open it
    /// again to see them. It holds what the owner has written to its files: every
    /// acknowledged change under [`Durability::Always`] (the default), and under
    /// `Interval` or `Never` what was flushed so far. Leases stay as the log has them (their
    /// holder may be alive), and no compaction runs.
    ///
    /// ```
    /// use deadletter::{Config, Error, Store};
    ///
    /// # fn main() -> deadletter::Result<()> {
    /// # let dir = std::env::temp_dir().join(format!("deadletter-doc-ro-{}", std::process::id()));
    /// # let _ = std::fs::remove_dir_all(&dir);
    /// let owner = Store::open(&dir, Config::fast())?;
    /// owner.queue("orders")?.enqueue(b"ORD-1")?;
    /// owner.sync()?; // without fsync (`fast`), records reach the file at a flush
    ///
    /// // While `owner` holds the store, a snapshot reads it...
    /// let snapshot = Store::open_read_only(&dir, Config::fast())?;
    /// assert_eq!(snapshot.existing_queue("orders")?.len(), 1);
    /// // ...and refuses changes.
    /// let err = snapshot.existing_queue("orders")?.enqueue(b"ORD-2").unwrap_err();
    /// assert!(matches!(err, Error::ReadOnly { .. }));
    /// # drop((snapshot, owner));
    /// # std::fs::remove_dir_all(&dir).ok();
    /// # Ok(())
    /// # }
    /// ```
    pub fn open_read_only(dir: impl AsRef<Path>, config: Config) -> Result<Store> {
        config.validate()?;
        let engine = Engine::open_read_only(dir.as_ref(), engine_options(&config))?;
        Ok(Self::with_engine(engine, config))
    }

    /// True for a snapshot opened by [`Store::open_read_only`].
    pub fn is_read_only(&self) -> bool {
        self.inner.engine.is_read_only()
    }

    fn with_engine(engine: Engine, config: Config) -> Store {
        let high_water = engine.lock().latest_time.max(config.clock.now_ms());
        Store {
            inner: Arc::new(StoreInner {
                engine,
                config,
                queue_options: RwLock::new(IdMap::default()),
                refused: Mutex::new(IdMap::default()),
                alerts: Alerts::default(),
                compaction_run: Mutex::new(()),
                expiry_high_water: Mutex::new(high_water),
                compactor: Mutex::new(Compactor::default()),
                control: Mutex::new(None),
                guards: GuardDriver::default(),
                durations: RwLock::new(IdMap::default()),
            }),
            actor: Actor::library(),
        }
    }

    /// True when `dir` holds a store: at least one segment file. Only the directory
    /// listing is read; no lock is taken. An error is the listing's (no such directory,
    /// not a directory, no permission).
    pub fn exists(dir: impl AsRef<Path>) -> std::io::Result<bool> {
        for entry in std::fs::read_dir(dir)? {
            let name = entry?.file_name();
            if segment::parse_segment_name(&name.to_string_lossy()).is_some() {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Runs one compaction now: TTL expiry, DLQ retention, relocation of live records out
    /// of sparse segments, a checkpoint, and deletion of segments nothing needs. The
    /// background thread does the same every [`CompactionOptions::interval`].
    ///
    /// [`CompactionOptions::interval`]: crate::CompactionOptions::interval
    pub fn compact_now(&self) -> Result<CompactionReport> {
        if self.is_read_only() {
            return Err(Error::ReadOnly {
                path: self.dir().to_path_buf(),
            });
        }
        let _run = self.inner.compaction_run.lock();
        let mut report = CompactionReport::default();
        let now = self.advance_expiry_clock();
        let expired = expiry::expire_ttl(self, now, &mut report)
            .and_then(|()| expiry::expire_retention(self, now, &mut report));
        match expired {
            // Expiry writes records; what compaction frees needs none: go on, and expire
            // the rest at the next run. (Unless a batch cut short poisoned the log: see
            // `Engine::compact`.)
            Err(Error::DiskFull { .. }) if !self.inner.engine.log().is_poisoned() => {
                report.full_disk = true
            }
            other => other?,
        }
        self.inner.engine.compact(&mut report)?;
        Ok(report)
    }

    /// The time expiry decisions use: the clock, but never earlier than a time already
    /// used or recorded, and at most [`CompactionOptions::max_forward_jump`] past it. Each
    /// compaction run moves that mark forward once, so a clock set wrongly far ahead
    /// expires messages at most one jump's worth per run, and a clock set back resurrects
    /// nothing.
    ///
    /// [`CompactionOptions::max_forward_jump`]: crate::CompactionOptions::max_forward_jump
    pub(crate) fn expiry_now(&self) -> u64 {
        let high = *self.inner.expiry_high_water.lock();
        self.expiry_time(high)
    }

    fn expiry_time(&self, high: u64) -> u64 {
        let wall = self.now();
        let max_jump = self.inner.config.compaction.max_forward_jump.as_millis() as u64;
        if high == 0 {
            wall
        } else if wall <= high {
            high
        } else {
            wall.min(high.saturating_add(max_jump))
        }
    }

    /// Moves the expiry clock's mark to [`Store::expiry_now`] and returns it (once per
    /// compaction run).
    fn advance_expiry_clock(&self) -> u64 {
        let mut high = self.inner.expiry_high_water.lock();
        *high = self.expiry_time(*high);
        *high
    }

    /// A handle on queue `q` (the caller holds the state lock and passes it).
    pub(crate) fn queue_handle(&self, q: QueueId, st: &State) -> Queue {
        let name = st
            .queues
            .get(q as usize)
            .map(|qs| qs.name.clone())
            .unwrap_or_default();
        Queue::new(self.clone(), q, name)
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        self.inner.engine.dir()
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// What the log's recovery found at open.
    pub fn recovery_report(&self) -> &RecoveryReport {
        self.inner.engine.recovery_report()
    }

    /// The handler-duration histogram of queue `q`, created at its first use.
    pub(crate) fn handler_durations(&self, q: QueueId) -> Arc<HandlerDurations> {
        if let Some(h) = self.inner.durations.read().get(&q) {
            return Arc::clone(h);
        }
        Arc::clone(self.inner.durations.write().entry(q).or_default())
    }

    /// The handler durations recorded for queue `q`, if any.
    pub(crate) fn handler_duration_snapshot(&self, q: QueueId) -> Option<DurationHistogram> {
        self.inner.durations.read().get(&q)?.snapshot()
    }

    /// Bytes of the files in the store's directory (segments, which are preallocated,
    /// checkpoints and the checkpoint reserve, the lock), or `None` if the directory
    /// cannot be read.
    pub fn disk_bytes(&self) -> Option<u64> {
        let mut total = 0u64;
        for entry in std::fs::read_dir(self.dir()).ok()? {
            let meta = entry.ok()?.metadata().ok()?;
            if meta.is_file() {
                total += meta.len();
            }
        }
        Some(total)
    }

    /// The log's segment files and positions, and what it has done since open: disk use,
    /// fsyncs, and whether a failed write stopped it. Nothing is read from disk.
    pub fn storage_stats(&self) -> StorageStats {
        let log = self.inner.engine.log();
        let stats = log.stats();
        StorageStats {
            segments: log.segments(),
            first_position: log.first_position(),
            end_position: log.end_position(),
            durable_position: log.durable_position(),
            fsyncs: stats.fsyncs,
            appends: stats.appends,
            writes: stats.writes,
            poisoned: log.is_poisoned(),
        }
    }

    /// Opens queue `name` with the configured defaults, creating it if new.
    pub fn queue(&self, name: &str) -> Result<Queue> {
        self.queue_with(name, self.inner.config.queue_defaults.clone())
    }

    /// Opens queue `name` with its own options, creating it if new.
    pub fn queue_with(&self, name: &str, options: QueueOptions) -> Result<Queue> {
        if options.max_attempts == 0 {
            return Err(Error::InvalidConfig("max_attempts of zero".into()));
        }
        let id = self.declare(name)?;
        self.inner.queue_options.write().insert(id, options);
        Ok(Queue::new(self.clone(), id, name.to_string()))
    }

    /// An existing queue, or [`Error::UnknownQueue`].
    pub fn existing_queue(&self, name: &str) -> Result<Queue> {
        let id = self.queue_id(name)?;
        Ok(Queue::new(self.clone(), id, name.to_string()))
    }

    /// The names of all queues, in creation order.
    pub fn queue_names(&self) -> Vec<String> {
        let st = self.inner.engine.lock();
        st.queues
            .iter()
            .filter(|q| !q.name.is_empty())
            .map(|q| q.name.clone())
            .collect()
    }

    /// The DLQ named `name` (such as `"orders-dlq"`), or the DLQ of queue `name`.
    pub fn dlq(&self, name: &str) -> Result<Dlq> {
        for queue in self.queue_names() {
            if self.dlq_name(&queue) == name || queue == name {
                let id = self.queue_id(&queue)?;
                return Ok(Dlq::new(self.clone(), id, queue));
            }
        }
        Err(Error::UnknownQueue(name.to_string()))
    }

    /// The DLQ name of queue `queue` under the configured pattern.
    pub fn dlq_name(&self, queue: &str) -> String {
        let c = &self.inner.config;
        c.dlq_name_pattern
            .replace("{queue_name}", queue)
            .replace("{environment}", c.environment.as_deref().unwrap_or(""))
    }

    /// Writes and fsyncs everything.
    pub fn sync(&self) -> Result<()> {
        self.inner.engine.sync()
    }

    /// Syncs everything and drops this handle. The directory stays locked until the last
    /// handle on the store (every `Store`, `Queue` and `Dlq` clone) is dropped; dropping
    /// the last one syncs too, ignoring errors.
    pub fn close(self) -> Result<()> {
        self.inner.engine.close()
    }

    /// Drops the store as a crash would: nothing buffered is written, nothing synced (see
    /// `sim::StoreHooks::abandon`).
    #[cfg(feature = "sim")]
    pub(crate) fn abandon_inner(self) {
        if let Ok(inner) = Arc::try_unwrap(self.inner) {
            inner.engine.abandon();
        }
    }

    pub(crate) fn queue_id(&self, name: &str) -> Result<QueueId> {
        self.inner
            .engine
            .lock()
            .names
            .get(name)
            .copied()
            .ok_or_else(|| Error::UnknownQueue(name.to_string()))
    }

    /// Wakes every thread waiting in [`Queue::lease_wait`] (they lease again or time out).
    pub fn wake_consumers(&self) {
        self.inner.engine.wake();
    }

    /// The options in force for queue `id`.
    pub(crate) fn queue_options(&self, id: QueueId) -> QueueOptions {
        self.inner
            .queue_options
            .read()
            .get(&id)
            .cloned()
            .unwrap_or_else(|| self.inner.config.queue_defaults.clone())
    }

    /// Counts `n` messages refused by queue `id`'s limit.
    pub(crate) fn count_refused(&self, id: QueueId, n: u64) {
        *self.inner.refused.lock().entry(id).or_insert(0) += n;
    }

    /// Messages refused by queue `id`'s limit since the store opened.
    pub(crate) fn refused(&self, id: QueueId) -> u64 {
        self.inner.refused.lock().get(&id).copied().unwrap_or(0)
    }

    /// The time now, by the configured clock.
    pub(crate) fn now(&self) -> u64 {
        self.inner.config.clock.now_ms()
    }

    /// The engine: the log, the index and the write path.
    pub(crate) fn engine(&self) -> &Engine {
        &self.inner.engine
    }

    /// The queue id of `name`, declaring the queue (one record) if it is new.
    pub(crate) fn declare(&self, name: &str) -> Result<QueueId> {
        validate_queue_name(name)?;
        self.commit_with(|st| {
            if let Some(&id) = st.names.get(name) {
                return Ok((Vec::new(), id));
            }
            if let Some(existing) = self.clashing_queue(name, st.names.keys()) {
                return Err(Error::NameClash {
                    name: name.to_string(),
                    existing,
                });
            }
            let id = QueueId::try_from(st.queues.len())
                .ok()
                .filter(|&id| id < MAX_QUEUES)
                .ok_or(Error::TooManyQueues { limit: MAX_QUEUES })?;
            let batch = vec![op_entry(Op::DeclareQueue {
                queue: id,
                name: name.to_string(),
            })?];
            Ok((batch, id))
        })
    }

    /// The existing queue (among `names`) that a new queue `name` would clash with: one whose
    /// name is `name`'s DLQ name, whose DLQ name is `name`, or whose DLQ name is `name`'s.
    fn clashing_queue<'n>(
        &self,
        name: &str,
        names: impl Iterator<Item = &'n String>,
    ) -> Option<String> {
        let dlq = self.dlq_name(name);
        names
            .filter(|q| !q.is_empty())
            .find(|q| {
                let q_dlq = self.dlq_name(q);
                q.as_str() == dlq || q_dlq == name || q_dlq == dlq
            })
            .cloned()
    }

    /// One write: see [`Engine::commit_with`]; the store reacts to its effects by checking
    /// the DLQ alert hooks.
    pub(crate) fn commit_with<'a, T>(
        &self,
        build: impl FnOnce(&mut State) -> Result<(Batch<'a>, T)>,
    ) -> Result<T> {
        self.inner.engine.commit_with(build, |e| self.react(e))
    }

    /// One write settled as `mode` says: see [`Engine::commit_as`] (the second value is
    /// the position to pass to [`Store::sync_to`], 0 when there is nothing to wait for).
    pub(crate) fn commit_as<'a, T>(
        &self,
        mode: Settle,
        build: impl FnOnce(&mut State) -> Result<(Batch<'a>, T)>,
    ) -> Result<(T, u64)> {
        self.inner.engine.commit_as(mode, build, |e| self.react(e))
    }

    /// Returns once everything below log position `pos` is durable: for writes settled as
    /// [`Settle::Written`].
    pub(crate) fn sync_to(&self, pos: u64) -> Result<()> {
        self.inner.engine.sync_to(pos)
    }

    /// What follows a write made with [`Engine::write_locked`] once the lock is released.
    pub(crate) fn finish(&self, effects: Effects) -> Result<()> {
        self.inner
            .engine
            .settle(Settle::Durable, effects, |e| self.react(e))
    }

    /// Like [`Store::finish`], but a durable store only hands the write to the operating
    /// system (no fsync): for a worker pool's start records.
    pub(crate) fn finish_written(&self, effects: Effects) -> Result<()> {
        self.inner
            .engine
            .settle(Settle::Written, effects, |e| self.react(e))
    }

    fn react(&self, effects: Effects) {
        if effects.dlq_changed {
            self.check_alerts();
        }
        if effects.guard {
            self.guards_due();
        }
    }

    /// Registers an alert hook; fires at once if the DLQ is already at the threshold.
    pub(crate) fn add_alert(&self, queue: QueueId, threshold: u64, callback: AlertFn) {
        self.inner.alerts.add(queue, threshold, callback);
        self.check_alerts();
    }

    fn check_alerts(&self) {
        self.inner
            .alerts
            .check(|| self.inner.engine.lock(), |q| self.dlq_name(q));
    }
}

/// One message as the index sees it (see `sim::StoreHooks::debug_messages`).
#[cfg(feature = "sim")]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DebugMessage {
    /// Its id.
    pub id: crate::engine::envelope::MessageId,
    /// Its queue (for a DLQ entry: the queue whose DLQ holds it).
    pub queue: String,
    /// Where it is.
    pub place: crate::engine::state::Place,
    /// Deliveries counted.
    pub attempts: u32,
    /// Visible-at while ready, the lease deadline while leased, dead-lettered-at when dead.
    pub visible_at_ms: u64,
    /// Replay generation.
    pub generation: u32,
    /// True while it is a suspect (leased when the process died, no outcome since).
    pub suspect: bool,
}

/// The log's segment files and positions, and what the log has done since the store was
/// opened (see [`Store::storage_stats`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct StorageStats {
    /// The segment files, oldest first; the last one is being appended to.
    pub segments: Vec<SegmentInfo>,
    /// Log position of the oldest record still kept (compaction moves it forward).
    pub first_position: u64,
    /// Log position just past the newest record.
    pub end_position: u64,
    /// Log position up to which the log is known durable.
    pub durable_position: u64,
    /// fsync calls on segment data since open.
    pub fsyncs: u64,
    /// Records appended since open.
    pub appends: u64,
    /// `write` calls since open (appends are buffered and written together).
    pub writes: u64,
    /// True after a write or an fsync failed: the store refuses writes
    /// ([`Error::Poisoned`]) until it is reopened.
    pub poisoned: bool,
}

/// Queue names: 1 to 200 bytes, no control characters. A name that clashes with another
/// queue or DLQ is refused by [`Store::declare`] ([`Error::NameClash`]).
fn validate_queue_name(name: &str) -> Result<()> {
    if name.is_empty() || name.len() > 200 || name.chars().any(|c| c.is_control()) {
        return Err(Error::InvalidQueueName(name.to_string()));
    }
    Ok(())
}
