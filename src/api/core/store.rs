//! The store's shared state and the handle on it: the bottom of the API layer.
//!
//! [`StoreInner`] is the [`Engine`] (the log, the index, the write path) and what every
//! handle on it shares: the configuration, per-queue options, counts of refused enqueues,
//! DLQ alert hooks, handler durations, the expiry clock's mark and the compaction lock, and
//! the hook through which a guarded-replay driver hears of the writes that make a release
//! due. It starts no thread and knows no service: the control socket, the guarded-replay
//! driver and the compaction schedule (`api::services`) are started on a store from
//! outside and hold it weakly on their threads.
//!
//! [`Store`] is the handle every other one (`Queue`, `Dlq`, `Importer`) is made from. The
//! operations live with the layers that own them, as `impl Store` blocks above this one
//! (queues and DLQs in `api::queue` and `api::dlq`, guarded replays in `api::guarded`,
//! opening in `api::open`); here are the write path they all go through and the plain
//! reads of the store's shape.
//!
//! Invariants:
//! - under [`Durability::Always`](crate::store::Durability::Always) a call returns only after its
//!   records are durable, and any record it depended on (earlier in the log) is durable
//!   too (the engine waits);
//! - the expiry clock never goes backwards (see [`Store::expiry_now`]);
//! - the services a handle keeps running ([`Services`]) are dropped before its engine
//!   reference: when the last handle goes, they stop (the control socket's file is removed,
//!   their threads joined) before the engine closes and releases the directory lock.

use std::path::Path;
use std::sync::{Arc, Weak};

use parking_lot::{Mutex, RwLock};

use crate::api::core::actor::Actor;
use crate::api::core::alert::{AlertFn, Alerts};
use crate::api::core::config::{Config, QueueOptions};
use crate::api::core::durations::{DurationHistogram, HandlerDurations};
use crate::api::core::holders::Holders;
use crate::api::core::pools::{AttachedPool, PoolAttachment, PoolPresence, PoolRegistry};
use crate::api::core::types::MessageId;
use crate::engine::op_entry;
use crate::engine::record::{Decoded, Op, QueueId};
use crate::engine::state::{AuditAction, AuditEntry, Effects, IdMap, IdSet, State, MAX_QUEUES};
use crate::engine::{Batch, Engine, Settle};
use crate::error::{Error, NameProblem, Result};
use crate::storage::log::{RecoveryReport, SegmentInfo};
use crate::storage::segment;

/// The engine and what the handles on it share.
pub(crate) struct StoreInner {
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
    /// Handler durations per queue, recorded by worker pools (not persisted).
    durations: RwLock<IdMap<QueueId, Arc<HandlerDurations>>>,
    /// Told of each write that made guarded-replay work due (the driver registers it).
    replay_hook: RwLock<Option<Arc<dyn ReplayHook>>>,
    /// The worker pools running on the store's queues in this process (not persisted).
    pools: PoolRegistry,
    /// The worker pools of this process, asked who holds a leased message (not persisted).
    holders: Holders,
}

/// What drives a store's guarded replays, as the write path sees it: the guarded-replay
/// driver service registers one ([`Store::attach_replay_hook`]) while it runs.
pub(crate) trait ReplayHook: Send + Sync {
    /// A write (made through `store`) left a guarded replay with something to release.
    fn due(&self, store: &Store);
    /// Releases what is due now, waiting for a drive that runs on another thread.
    fn drive_now(&self, store: &Store) -> Result<()>;
}

/// Guards of services a handle keeps running: every handle made from the one the guards
/// were attached to ([`Store::with_services`]) shares them, and the last one to go drops
/// them, in order, before it lets go of the engine.
pub(crate) struct Services {
    _guards: Vec<Box<dyn Send + Sync>>,
}

/// A store: a directory holding durable queues and their DLQs. Cheap to clone.
///
/// Opening replays the directory's log, so a store reopened after a crash holds exactly
/// what was acknowledged (under [`Durability::Always`](crate::store::Durability::Always), the
/// default). One process at a time holds a store: a second open of the same directory is
/// [`Error::Locked`] until every handle of the first (`Store`, `Queue`, `Dlq`, and the
/// guard of a service started on it) is dropped.
///
/// [`Store::open`] also starts the services the [`Config`] asks for (background
/// compaction and expiry, the guarded-replay driver, the control socket: see
/// [`crate::services`]); they run until the last handle goes.
///
/// ```
/// use deadletter::{Config, Store};
///
/// let dir = tempfile::tempdir().unwrap(); // a fresh directory (Store::open creates one)
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
/// # Ok::<(), deadletter::Error>(())
/// ```
#[derive(Clone)]
pub struct Store {
    /// The services started with this handle (by [`Store::open`]), shared with the handles
    /// made from it. Declared first: dropped before `inner`.
    services: Option<Arc<Services>>,
    inner: Arc<StoreInner>,
    /// Who this handle's changes to DLQs are recorded as (see [`Store::with_actor`]).
    actor: Actor,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("dir", &self.inner.engine.dir())
            .finish()
    }
}

/// A store held weakly (by a service's thread): it does not keep the store open.
#[derive(Clone)]
pub(crate) struct WeakStore(Weak<StoreInner>);

impl WeakStore {
    /// The store while it is open, as a handle without services, whose changes are
    /// recorded as made by `actor`.
    pub(crate) fn upgrade(&self, actor: &Actor) -> Option<Store> {
        self.0.upgrade().map(|inner| Store {
            services: None,
            inner,
            actor: actor.clone(),
        })
    }
}

impl Store {
    /// A store over `engine`, opened with `config`, with no service running.
    pub(crate) fn with_engine(engine: Engine, config: Config) -> Store {
        let high_water = engine.lock().latest_time.max(config.clock.now_ms());
        Store {
            services: None,
            inner: Arc::new(StoreInner {
                engine,
                config,
                queue_options: RwLock::new(IdMap::default()),
                refused: Mutex::new(IdMap::default()),
                alerts: Alerts::default(),
                compaction_run: Mutex::new(()),
                expiry_high_water: Mutex::new(high_water),
                durations: RwLock::new(IdMap::default()),
                replay_hook: RwLock::new(None),
                pools: PoolRegistry::default(),
                holders: Holders::default(),
            }),
            actor: Actor::library(),
        }
    }

    /// This handle, keeping `guards` running for as long as it or a handle made from it
    /// lives (they are dropped in order): the facade's, `Store::open`.
    pub(crate) fn with_services(mut self, guards: Vec<Box<dyn Send + Sync>>) -> Store {
        if !guards.is_empty() {
            self.services = Some(Arc::new(Services { _guards: guards }));
        }
        self
    }

    /// A handle on the same store that keeps no service running: what a service holds, so
    /// that it never keeps itself running.
    pub(crate) fn without_services(&self) -> Store {
        Store {
            services: None,
            ..self.clone()
        }
    }

    /// A weak handle on the store.
    pub(crate) fn downgrade(&self) -> WeakStore {
        WeakStore(Arc::downgrade(&self.inner))
    }

    /// The hook a write that makes guarded-replay work due calls, if a driver runs.
    pub(crate) fn replay_hook(&self) -> Option<Arc<dyn ReplayHook>> {
        self.inner.replay_hook.read().clone()
    }

    /// Registers `hook` as the store's guarded-replay driver, unless one is registered
    /// (then false).
    pub(crate) fn attach_replay_hook(&self, hook: Arc<dyn ReplayHook>) -> bool {
        let mut slot = self.inner.replay_hook.write();
        if slot.is_some() {
            return false;
        }
        *slot = Some(hook);
        true
    }

    /// Unregisters `hook`, if it is the store's guarded-replay driver.
    pub(crate) fn detach_replay_hook(&self, hook: &Arc<dyn ReplayHook>) {
        let mut slot = self.inner.replay_hook.write();
        if slot.as_ref().is_some_and(|h| Arc::ptr_eq(h, hook)) {
            *slot = None;
        }
    }

    /// True for a snapshot opened by [`Store::open_read_only`].
    pub fn is_read_only(&self) -> bool {
        self.inner.engine.log().is_read_only()
    }

    /// [`Error::ReadOnly`] on a snapshot: for the calls that change a store.
    pub(crate) fn writable(&self) -> Result<()> {
        if self.is_read_only() {
            return Err(Error::ReadOnly {
                path: self.dir().to_path_buf(),
            });
        }
        Ok(())
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

    /// This store, as a handle whose changes to DLQs (and those of the queue, DLQ and
    /// importer handles made from it) are recorded as made by `actor`. Handles share
    /// everything else.
    pub fn with_actor(&self, actor: Actor) -> Store {
        let mut store = self.clone();
        store.actor = actor;
        store
    }

    /// Who this handle's changes are recorded as.
    pub fn actor(&self) -> &Actor {
        &self.actor
    }

    /// The audit record of a change to `ids` made at `at` by this handle's actor, with what
    /// more the change was when there is more to say ([`AuditEntry::detail`]: a replay's
    /// transform, an operator's reason): the last record of the change's batch.
    pub(crate) fn audit_record<'a>(
        &self,
        at: u64,
        action: AuditAction,
        ids: &[MessageId],
        detail: Option<&str>,
    ) -> Result<(Vec<u8>, Decoded<'a>)> {
        let mut entry = AuditEntry::new(at, self.actor.name(), action, IdSet::of(ids));
        entry.detail = detail.map(str::to_owned);
        op_entry(Op::Audit(entry))
    }

    /// The worker pools of this process that hold leased messages (see `core::holders`).
    pub(crate) fn holders(&self) -> &Holders {
        &self.inner.holders
    }

    /// Held by a compaction run, so that one runs at a time.
    pub(crate) fn compaction_lock(&self) -> parking_lot::MutexGuard<'_, ()> {
        self.inner.compaction_run.lock()
    }

    /// The time expiry decisions use: the clock, but never earlier than a time already
    /// used or recorded, and at most [`CompactionOptions::max_forward_jump`] past it. Each
    /// compaction run moves that mark forward once, so a clock set wrongly far ahead
    /// expires messages at most one jump's worth per run, and a clock set back resurrects
    /// nothing.
    ///
    /// [`CompactionOptions::max_forward_jump`]: crate::store::CompactionOptions::max_forward_jump
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
    pub(crate) fn advance_expiry_clock(&self) -> u64 {
        let mut high = self.inner.expiry_high_water.lock();
        *high = self.expiry_time(*high);
        *high
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

    /// The handler durations of queue `q`, if its histogram exists (a pool declared it or
    /// a run was recorded).
    pub(crate) fn handler_duration_snapshot(&self, q: QueueId) -> Option<DurationHistogram> {
        Some(self.inner.durations.read().get(&q)?.snapshot())
    }

    /// Lists `pool` among the store's attached pools until the returned attachment is
    /// dropped.
    pub(crate) fn attach_pool(&self, pool: Arc<PoolPresence>) -> PoolAttachment {
        self.inner.pools.attach(pool)
    }

    /// The worker pools running on this store's queues in this process, in start order:
    /// each [`WorkerPool`](crate::WorkerPool) and async pool from its start until it stops
    /// (in memory only; nothing is written). A read-only snapshot has none: the pools of
    /// the process that holds the store are read through its control socket
    /// ([`Client::workers`](crate::control::Client::workers)).
    ///
    /// ```
    /// use std::time::Duration;
    /// use deadletter::{Config, Message, Store, WorkerPool};
    ///
    /// # let dir = tempfile::tempdir().unwrap();
    /// let store = Store::open(&dir, Config::fast())?;
    /// let orders = store.queue("orders")?;
    /// let pool = WorkerPool::new(&orders)
    ///     .workers(3)
    ///     .name("billing")
    ///     .start(|_: &Message| Ok(()))?;
    /// let attached = store.attached_pools();
    /// assert_eq!(attached.len(), 1);
    /// assert_eq!((attached[0].queue.as_str(), attached[0].workers), ("orders", 3));
    /// assert_eq!(attached[0].name.as_deref(), Some("billing"));
    ///
    /// pool.shutdown(Duration::from_secs(5))?;
    /// assert!(store.attached_pools().is_empty());
    /// # Ok::<(), deadletter::Error>(())
    /// ```
    pub fn attached_pools(&self) -> Vec<AttachedPool> {
        self.inner.pools.list()
    }

    /// Bytes of the files in the store's directory (segments, which are preallocated,
    /// checkpoints and the checkpoint reserve, the lock), or `None` if the directory
    /// cannot be read.
    pub fn disk_bytes(&self) -> Option<u64> {
        let files = std::fs::read_dir(self.dir()).ok()?.map(|entry| {
            let meta = entry.ok()?.metadata().ok()?;
            Some(if meta.is_file() { meta.len() } else { 0 })
        });
        files.sum()
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

    /// The names of all queues, in creation order.
    pub fn queue_names(&self) -> Vec<String> {
        let st = self.inner.engine.lock();
        st.queues
            .iter()
            .filter(|q| !q.name.is_empty())
            .map(|q| q.name.clone())
            .collect()
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
        self.inner.engine.log().sync()
    }

    /// Syncs everything and drops this handle. The directory stays locked until the last
    /// handle on the store (every `Store`, `Queue` and `Dlq` clone, and the guard of a
    /// service started on it) is dropped; dropping the last one syncs too, ignoring errors.
    pub fn close(self) -> Result<()> {
        self.inner.engine.log().close()
    }

    /// Drops the store as a crash would: nothing buffered is written, nothing synced (see
    /// `sim::StoreHooks::abandon`).
    #[cfg(feature = "sim")]
    pub(crate) fn abandon_inner(self) {
        let Store {
            services, inner, ..
        } = self;
        drop(services);
        if let Ok(inner) = Arc::try_unwrap(inner) {
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

    /// Wakes every thread waiting in [`Queue::lease_wait`](crate::Queue::lease_wait) (they
    /// lease again or time out).
    pub fn wake_consumers(&self) {
        self.inner.engine.wake();
    }

    /// Sets the options of queue `id` (as [`Store::queue_with`] opened it).
    pub(crate) fn set_queue_options(&self, id: QueueId, options: QueueOptions) {
        self.inner.queue_options.write().insert(id, options);
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

    /// [`Error::TooLarge`] for a payload of `len` bytes over the configured
    /// `max_message_size`.
    pub(crate) fn check_size(&self, len: usize) -> Result<()> {
        let max = self.inner.config.max_message_size;
        if len > max {
            return Err(Error::TooLarge { size: len, max });
        }
        Ok(())
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
        self.commit_with(|st| {
            if let Some(&id) = st.names.get(name) {
                // A queue the store holds keeps its name, even one the rules for new names
                // refuse (an older release allowed more).
                return Ok((Vec::new(), id));
            }
            if let Some(problem) = NameProblem::of(name) {
                return Err(Error::InvalidQueueName {
                    name: name.to_string(),
                    problem,
                });
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
        self.inner.engine.log().sync_to(pos)
    }

    /// What follows a write made with [`Engine::write_locked`] once the lock is released,
    /// settled as `mode` says ([`Settle::Written`], for a worker pool's start records, only
    /// hands the write to the operating system: no fsync).
    pub(crate) fn finish(&self, mode: Settle, effects: Effects) -> Result<()> {
        self.inner.engine.settle(mode, effects, |e| self.react(e))
    }

    fn react(&self, effects: Effects) {
        if effects.dlq_changed {
            self.check_alerts();
        }
        if effects.guard && !self.is_read_only() {
            if let Some(hook) = self.replay_hook() {
                hook.due(self);
            }
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

/// The name of queue `q` in `st` (empty for an id the index does not know).
pub(crate) fn queue_name(st: &State, q: QueueId) -> String {
    st.queues
        .get(q as usize)
        .map(|qs| qs.name.clone())
        .unwrap_or_default()
}
