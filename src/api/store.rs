//! The store: one directory, one log, any number of queues and their DLQs.
//!
//! The store owns the write path. Every change follows the same steps under the state lock:
//! validate against the index, encode the record(s), append them to the log's buffer (which
//! assigns positions in log order), apply them to the index; then, outside the lock, wait
//! until they are durable (group commit: concurrent writers share one fsync). Because records
//! are applied in log order, replaying the log at open rebuilds the same index.
//!
//! Invariants:
//! - the index only ever reflects records that were appended to the log;
//! - under [`Durability::Always`] a call returns only after its records are durable, and any
//!   record it depended on (earlier in the log) is durable too;
//! - leases do not survive a reopen: the directory lock guarantees that the process that held
//!   them is gone, so their messages are ready again at once (their delivery stays counted).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::{Condvar, Mutex, MutexGuard, RwLock};

use crate::checkpoint;
use crate::clock::{Clock, SystemClock};
use crate::compaction::{self, CompactionOptions, CompactionReport};
use crate::dlq::Dlq;
use crate::error::{CorruptionKind, Error, Result};
use crate::log::{Durability, Log, LogOptions, RecoveryMode, RecoveryReport};
use crate::queue::Queue;
use crate::record::{self, Decoded, History, Op, QueueId};
use crate::state::{Effects, IdMap, State};
use crate::vfs::{RealFs, Vfs};

/// Settings of one queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueOptions {
    /// Deliveries before a message goes to the DLQ (the seed design's default: 5).
    pub max_attempts: u32,
    /// How long a lease lasts before the message is visible again.
    pub visibility_timeout: Duration,
    /// Time to live given to messages enqueued without one (`None`: no expiry).
    pub default_ttl: Option<Duration>,
    /// Expired messages go to the DLQ with reason `expired` (true) or are dropped (false).
    pub expired_to_dlq: bool,
}

impl Default for QueueOptions {
    fn default() -> Self {
        QueueOptions {
            max_attempts: 5,
            visibility_timeout: Duration::from_secs(30),
            default_ttl: None,
            expired_to_dlq: true,
        }
    }
}

/// Store settings. `Config::default()` is durable (`Always`).
#[derive(Clone)]
pub struct Config {
    /// When writes become durable.
    pub durability: Durability,
    /// Size of a log segment file.
    pub segment_size: u64,
    /// Largest payload accepted.
    pub max_message_size: usize,
    /// DLQ naming pattern: `{queue_name}` and `{environment}` are replaced.
    pub dlq_name_pattern: String,
    /// Environment name recorded with failures.
    pub environment: Option<String>,
    /// Code version recorded with failures.
    pub code_version: Option<String>,
    /// How long DLQ entries are kept (`None`: until deleted). Default 30 days.
    pub retention: Option<Duration>,
    /// How long an idempotency key makes a repeated enqueue a no-op.
    pub idempotency_window: Duration,
    /// Failed attempts kept per message (older ones are counted, not kept).
    pub max_history: usize,
    /// Keep stack traces of failures (off by default: they may hold private data).
    pub include_stack_traces: bool,
    /// Settings of queues opened with [`Store::queue`].
    pub queue_defaults: QueueOptions,
    /// What to do with damaged committed data at open.
    pub recovery: RecoveryMode,
    /// Preallocate segment files with zeros.
    pub preallocate: bool,
    /// The clock.
    pub clock: Arc<dyn Clock>,
    /// The file system.
    pub fs: Arc<dyn Vfs>,
    /// Compaction: expiry, retention, checkpoints, disk reclaim.
    pub compaction: CompactionOptions,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("durability", &self.durability)
            .field("segment_size", &self.segment_size)
            .field("max_message_size", &self.max_message_size)
            .field("dlq_name_pattern", &self.dlq_name_pattern)
            .field("retention", &self.retention)
            .finish_non_exhaustive()
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            durability: Durability::Always,
            segment_size: 64 << 20,
            max_message_size: 4 << 20,
            dlq_name_pattern: "{queue_name}-dlq".into(),
            environment: None,
            code_version: None,
            retention: Some(Duration::from_secs(30 * 24 * 3600)),
            idempotency_window: Duration::from_secs(3600),
            max_history: 10,
            include_stack_traces: false,
            queue_defaults: QueueOptions::default(),
            recovery: RecoveryMode::Strict,
            preallocate: true,
            clock: Arc::new(SystemClock),
            fs: Arc::new(RealFs),
            compaction: CompactionOptions::default(),
        }
    }
}

impl Config {
    /// The default configuration without fsync (fast; a crash may lose recent writes).
    ///
    /// Segments are not preallocated either: preallocation exists so that an fsync after an
    /// append has no block allocation to write, and without fsyncs it would only write every
    /// segment twice (zeros, then data). Segment files are still sized up front (sparse).
    pub fn fast() -> Self {
        Config {
            durability: Durability::Never,
            preallocate: false,
            ..Config::default()
        }
    }

    /// Sets the durability.
    pub fn durability(mut self, d: Durability) -> Self {
        self.durability = d;
        self
    }

    /// Sets the clock.
    pub fn clock(mut self, clock: impl Clock + 'static) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    fn validate(&self) -> Result<()> {
        if self.max_message_size == 0 {
            return Err(Error::InvalidConfig("max_message_size of zero".into()));
        }
        if !self.dlq_name_pattern.contains("{queue_name}") {
            return Err(Error::InvalidConfig(
                "dlq_name_pattern must contain {queue_name}".into(),
            ));
        }
        if self.queue_defaults.max_attempts == 0 {
            return Err(Error::InvalidConfig("max_attempts of zero".into()));
        }
        let c = &self.compaction;
        if !(0.0..=1.0).contains(&c.relocate_below) || c.batch == 0 {
            return Err(Error::InvalidConfig(
                "compaction: relocate_below must be in [0, 1] and batch above 0".into(),
            ));
        }
        if c.interval.is_some_and(|d| d.is_zero()) {
            return Err(Error::InvalidConfig("compaction interval of zero".into()));
        }
        if self.max_history == 0 {
            return Err(Error::InvalidConfig("max_history of zero".into()));
        }
        Ok(())
    }
}

/// An alert about a DLQ's size crossing its threshold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DlqAlert {
    /// The DLQ's name.
    pub dlq: String,
    /// Its size now.
    pub size: u64,
    /// The threshold.
    pub threshold: u64,
    /// True when the size rose to the threshold or above; false when it fell back under.
    pub above: bool,
}

type AlertFn = Arc<dyn Fn(&DlqAlert) + Send + Sync>;

struct AlertHook {
    queue: QueueId,
    threshold: u64,
    above: bool,
    callback: AlertFn,
}

pub(crate) struct StoreInner {
    pub(crate) log: Log,
    pub(crate) state: Mutex<State>,
    pub(crate) ready: Condvar,
    pub(crate) config: Config,
    dir: PathBuf,
    queue_options: RwLock<IdMap<QueueId, QueueOptions>>,
    alerts: Mutex<Vec<AlertHook>>,
    report: RecoveryReport,
    /// Records read from the log since open (to show which calls read nothing).
    reads: AtomicU64,
    /// Positions of the two checkpoint slots.
    slots: Mutex<CheckpointSlots>,
    /// Held by a compaction run; holds compaction's own index, rebuilt from the log.
    compacting: Mutex<Option<compaction::Shadow>>,
    /// The latest time expiry has used (see [`Store::expiry_now`]).
    expiry_high_water: Mutex<u64>,
    /// The background compaction thread.
    compactor: Mutex<Compactor>,
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

/// Which checkpoint slots hold which positions, and which one is written next.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct CheckpointSlots {
    /// The position each slot covers, if it holds a valid checkpoint.
    pub positions: [Option<u64>; 2],
    /// The slot the next checkpoint goes to (the older one).
    pub next: usize,
}

/// Loads the newest usable checkpoint: the state it holds, the position to replay from,
/// and the slots. Without one, replays from the start of the log, which is only possible
/// while the log still starts at position 0.
///
/// A checkpoint is usable when its position lies within the log. One past the log's end
/// covers records the log no longer has (compaction makes its position durable before
/// writing it, so the log lost durable records): under [`RecoveryMode::Strict`] that is
/// [`CorruptionKind::BadCheckpoint`]; otherwise the file is removed, since once the log grew
/// past its position again it would describe records it never saw. One before the log's
/// start is ignored (the next checkpoint overwrites it).
pub(crate) fn load_checkpoint(
    fs: &dyn Vfs,
    dir: &Path,
    log: &Log,
    strict: bool,
) -> Result<(State, u64, CheckpointSlots)> {
    let mut slots = CheckpointSlots::default();
    let mut candidates = Vec::new();
    let mut damage = None;
    let (first, end) = (log.first_position(), log.end_position());
    for slot in 0..2 {
        match checkpoint::read(fs, dir, slot)? {
            checkpoint::SlotState::Valid(pos, _) if pos > end => {
                let path = dir.join(checkpoint::SLOTS[slot]);
                let err = Error::Corruption {
                    kind: CorruptionKind::BadCheckpoint,
                    path: path.clone(),
                    offset: 16,
                };
                if strict {
                    return Err(err);
                }
                fs.remove(&path)
                    .map_err(|e| Error::io("remove", &path, e))?;
                fs.sync_dir(dir)
                    .map_err(|e| Error::io("fsync dir", dir, e))?;
                damage = Some(err);
            }
            checkpoint::SlotState::Valid(pos, _) if pos < first => {}
            checkpoint::SlotState::Valid(pos, snap) => {
                slots.positions[slot] = Some(pos);
                candidates.push((pos, slot, snap));
            }
            checkpoint::SlotState::Damaged(e) => damage = Some(e),
            checkpoint::SlotState::Missing => {}
        }
    }
    candidates.sort_by_key(|c| std::cmp::Reverse(c.0));
    slots.next = match slots.positions {
        [Some(a), Some(b)] => usize::from(a > b),
        [Some(_), None] => 1,
        _ => 0,
    };
    if let Some((pos, _, snap)) = candidates.into_iter().next() {
        return Ok((State::restore(*snap), pos, slots));
    }
    if first == 0 {
        return Ok((State::default(), 0, slots));
    }
    Err(damage.unwrap_or(Error::Corruption {
        kind: CorruptionKind::BadCheckpoint,
        path: dir.join(checkpoint::SLOTS[0]),
        offset: 0,
    }))
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
            let store = Store { inner };
            // An error here (a full disk, say) is retried at the next interval; the same
            // error reaches callers of the failing operation directly.
            let _ = store.compact_now();
        })
        .map_err(|e| Error::io("spawn compaction thread", "", e))?;
    Ok((stop, handle))
}

/// A store: a directory holding durable queues and their DLQs. Cheap to clone.
#[derive(Clone)]
pub struct Store {
    pub(crate) inner: Arc<StoreInner>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("dir", &self.inner.dir)
            .finish()
    }
}

/// Records to append in one batch, with their decoded form for the index.
pub(crate) type Batch<'a> = Vec<(Vec<u8>, Decoded<'a>)>;

/// Builds the batch entry of an [`Op`].
pub(crate) fn op_entry<'a>(op: Op) -> Result<(Vec<u8>, Decoded<'a>)> {
    Ok((record::encode_op(&op)?, Decoded::Op(op)))
}

impl Store {
    /// Opens (creating if needed) the store in `dir`, replaying its log.
    pub fn open(dir: impl AsRef<Path>, config: Config) -> Result<Store> {
        config.validate()?;
        let dir = dir.as_ref().to_path_buf();
        let log_durability = match config.durability {
            // The store waits for durability itself, outside its lock (group commit).
            Durability::Always => Durability::Never,
            other => other,
        };
        let opts = LogOptions {
            segment_size: config.segment_size,
            // Room for the payload plus its metadata.
            max_record_size: config.max_message_size + (64 << 10),
            durability: log_durability,
            preallocate: config.preallocate,
            recovery: config.recovery,
            // The last 1/32 of each segment is kept for records that carry no payload, so
            // that on a full disk, once a roll fails, consumers can still lease, ack and
            // dead-letter (and free what producers wait for).
            reserve: config.segment_size / 32,
            ..LogOptions::default()
        };
        let (log, report) = Log::open_with(Arc::clone(&config.fs), &dir, opts)?;
        let (mut state, from, slots) = load_checkpoint(
            config.fs.as_ref(),
            &dir,
            &log,
            config.recovery == RecoveryMode::Strict,
        )?;
        for item in log.iter_from(from)? {
            let (pos, rec) = item?;
            let decoded = record::decode_for_apply(&rec).map_err(|_| Error::Corruption {
                kind: CorruptionKind::BadContent,
                path: dir.clone(),
                offset: pos,
            })?;
            state.apply(&decoded, pos);
        }
        state.release_all_leases();
        let high_water = state.latest_time.max(config.clock.now_ms());
        let interval = config.compaction.interval;
        let store = Store {
            inner: Arc::new(StoreInner {
                log,
                state: Mutex::new(state),
                ready: Condvar::new(),
                config,
                dir,
                queue_options: RwLock::new(IdMap::default()),
                alerts: Mutex::new(Vec::new()),
                report,
                reads: AtomicU64::new(0),
                slots: Mutex::new(slots),
                compacting: Mutex::new(None),
                expiry_high_water: Mutex::new(high_water),
                compactor: Mutex::new(Compactor::default()),
            }),
        };
        if let Some(every) = interval {
            let handle = spawn_compactor(Arc::downgrade(&store.inner), every)?;
            *store.inner.compactor.lock() = Compactor(Some(handle));
        }
        Ok(store)
    }

    /// Runs one compaction now: TTL expiry, DLQ retention, relocation of live records out
    /// of sparse segments, a checkpoint, and deletion of segments nothing needs. The
    /// background thread does the same every [`CompactionOptions::interval`].
    pub fn compact_now(&self) -> Result<CompactionReport> {
        let mut shadow = self.inner.compacting.lock();
        compaction::run(self, &mut shadow)
    }

    /// The time expiry decisions use: the clock, but never earlier than a time already
    /// used or recorded, and at most [`CompactionOptions::max_forward_jump`] past it. Each
    /// compaction run moves that mark forward once (see [`Store::advance_expiry_clock`]),
    /// so a clock set wrongly far ahead expires messages at most one jump's worth per run,
    /// and a clock set back resurrects nothing.
    pub fn expiry_now(&self) -> u64 {
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

    pub(crate) fn checkpoint_slots(&self) -> MutexGuard<'_, CheckpointSlots> {
        self.inner.slots.lock()
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
        &self.inner.dir
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// What the log's recovery found at open.
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.inner.report
    }

    /// The log (for tools: verification, segment listing).
    pub fn log(&self) -> &Log {
        &self.inner.log
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
        let st = self.inner.state.lock();
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
        self.inner.log.sync()
    }

    /// Syncs everything and drops this handle. The directory stays locked until the last
    /// handle on the store (every `Store`, `Queue` and `Dlq` clone) is dropped; dropping
    /// the last one syncs too, ignoring errors.
    pub fn close(self) -> Result<()> {
        self.inner.log.close()
    }

    /// Drops the store as a crash would: nothing buffered is written, nothing synced.
    #[doc(hidden)]
    pub fn abandon(self) {
        if let Ok(inner) = Arc::try_unwrap(self.inner) {
            inner.log.abandon();
        }
    }

    pub(crate) fn queue_id(&self, name: &str) -> Result<QueueId> {
        self.inner
            .state
            .lock()
            .names
            .get(name)
            .copied()
            .ok_or_else(|| Error::UnknownQueue(name.to_string()))
    }

    /// The options in force for `queue`.
    pub fn queue_options_of(&self, queue: &Queue) -> QueueOptions {
        self.queue_options(queue.id())
    }

    /// Wakes every thread waiting in [`Queue::lease_wait`] (they lease again or time out).
    pub fn wake_consumers(&self) {
        self.inner.ready.notify_all();
    }

    pub(crate) fn queue_options(&self, id: QueueId) -> QueueOptions {
        self.inner
            .queue_options
            .read()
            .get(&id)
            .cloned()
            .unwrap_or_else(|| self.inner.config.queue_defaults.clone())
    }

    pub(crate) fn now(&self) -> u64 {
        self.inner.config.clock.now_ms()
    }

    /// The queue id of `name`, declaring the queue (one record) if it is new.
    pub(crate) fn declare(&self, name: &str) -> Result<QueueId> {
        validate_queue_name(name)?;
        let mut st = self.inner.state.lock();
        if let Some(&id) = st.names.get(name) {
            return Ok(id);
        }
        let id = st.queues.len() as QueueId;
        let batch = vec![op_entry(Op::DeclareQueue {
            queue: id,
            name: name.to_string(),
        })?];
        self.write_locked(&mut st, batch)?;
        drop(st);
        self.wait_durable()?;
        Ok(id)
    }

    /// Appends `batch` and applies it to the index; the caller holds the state lock.
    pub(crate) fn write_locked(&self, st: &mut State, batch: Batch<'_>) -> Result<Effects> {
        let mut positions = Vec::with_capacity(batch.len());
        // Payloads (new, corrected, imported, relocated) stay out of the segment's reserve.
        let consumer = !batch
            .iter()
            .any(|(_, d)| matches!(d, Decoded::Put(_) | Decoded::Relocated(_)));
        self.inner.log.append_each_with(
            batch.iter().map(|(b, _)| b.as_slice()),
            |p| positions.push(p),
            consumer,
        )?;
        let mut effects = Effects::default();
        for ((_, decoded), pos) in batch.iter().zip(positions) {
            let e = st.apply(decoded, pos);
            effects.ready |= e.ready;
            effects.dlq_changed |= e.dlq_changed;
        }
        Ok(effects)
    }

    /// The write path of one call: under the state lock, `build` validates and returns the
    /// records to write and the call's result; the records are appended and applied; then,
    /// outside the lock, the call waits for durability and reacts to the effects.
    pub(crate) fn commit_with<'a, T>(
        &self,
        build: impl FnOnce(&mut State) -> Result<(Batch<'a>, T)>,
    ) -> Result<T> {
        let mut st = self.inner.state.lock();
        let (batch, out) = build(&mut st)?;
        if batch.is_empty() {
            return Ok(out);
        }
        let effects = self.write_locked(&mut st, batch)?;
        drop(st);
        self.finish(effects)?;
        Ok(out)
    }

    /// What follows a write once the lock is released.
    pub(crate) fn finish(&self, effects: Effects) -> Result<()> {
        let durable = self.wait_durable();
        if effects.ready {
            self.inner.ready.notify_all();
        }
        if effects.dlq_changed {
            self.check_alerts();
        }
        durable
    }

    pub(crate) fn wait_durable(&self) -> Result<()> {
        if self.inner.config.durability == Durability::Always {
            self.inner.log.sync()?;
        }
        Ok(())
    }

    pub(crate) fn lock_state(&self) -> MutexGuard<'_, State> {
        self.inner.state.lock()
    }

    /// Reads the failure history a retry record, or a dead-letter envelope (a dead-letter
    /// record, or the payload record of an imported entry), holds.
    pub(crate) fn read_history(&self, pos: Option<u64>) -> Result<History> {
        let Some(pos) = pos else {
            return Ok(History::default());
        };
        let rec = self.read_record(pos)?;
        let (failure, first_received_at) = match record::decode(&rec) {
            Ok(Decoded::Op(Op::Retry { history, .. })) => return Ok(history),
            Ok(Decoded::Op(Op::DeadLetter {
                failure,
                first_received_at,
                ..
            })) => (failure, first_received_at),
            Ok(Decoded::Put(put)) => match put.meta.cause {
                record::PutCause::Imported(entry) => (entry.failure, entry.first_received_at),
                _ => return Err(self.bad_content(pos)),
            },
            _ => return Err(self.bad_content(pos)),
        };
        Ok(History {
            first_received_at,
            attempts: failure.attempts,
            dropped: failure.attempts_dropped,
        })
    }

    /// Reads the record at `pos`, counting the read.
    pub(crate) fn read_record(&self, pos: u64) -> Result<crate::log::Record> {
        self.inner.reads.fetch_add(1, Ordering::Relaxed);
        self.inner.log.read(pos)
    }

    /// An estimate of the memory the in-memory index holds, in bytes (see
    /// [`State::index_bytes`]); payloads are not in it, they stay in the log.
    pub fn index_bytes(&self) -> u64 {
        self.inner.state.lock().index_bytes()
    }

    /// How many records the store has read from its log since open (replay excluded).
    pub fn records_read(&self) -> u64 {
        self.inner.reads.load(Ordering::Relaxed)
    }

    /// Every message the index holds, by id, as the index sees it (no record is read). A
    /// test and debugging hook: model-based tests compare it with their model.
    #[doc(hidden)]
    pub fn debug_messages(&self) -> Vec<DebugMessage> {
        let st = self.inner.state.lock();
        let mut out: Vec<DebugMessage> = st
            .msgs
            .iter()
            .map(|(id, m)| {
                let extra = st.extras.get(&id);
                DebugMessage {
                    id,
                    queue: st
                        .queues
                        .get(m.queue as usize)
                        .map(|q| q.name.clone())
                        .unwrap_or_default(),
                    place: m.place,
                    attempts: m.attempts,
                    visible_at_ms: m.visible_at,
                    generation: extra.map_or(0, |e| e.generation),
                    suspect: st.suspects.contains(&id),
                }
            })
            .collect();
        out.sort_by_key(|m| m.id);
        out
    }

    /// The payload of message `id` (in a queue or a DLQ), read from the log. A test and
    /// debugging hook.
    #[doc(hidden)]
    pub fn debug_payload(&self, id: crate::types::MessageId) -> Result<Vec<u8>> {
        let pos = self
            .inner
            .state
            .lock()
            .msgs
            .get(&id)
            .map(|m| m.payload_pos)
            .ok_or(Error::NotFound(id))?;
        let rec = self.read_record(pos)?;
        let range = record::put_payload(&rec)?;
        Ok(rec[range].to_vec())
    }

    /// Reads and decodes the non-payload record at `pos`.
    pub(crate) fn decode_at(&self, pos: u64) -> Result<Op> {
        let rec = self.read_record(pos)?;
        match record::decode(&rec) {
            Ok(Decoded::Op(op)) => Ok(op),
            _ => Err(self.bad_content(pos)),
        }
    }

    pub(crate) fn bad_content(&self, pos: u64) -> Error {
        Error::Corruption {
            kind: CorruptionKind::BadContent,
            path: self.inner.dir.clone(),
            offset: pos,
        }
    }

    /// Registers an alert hook; fires at once if the DLQ is already at the threshold.
    pub(crate) fn add_alert(
        &self,
        queue: QueueId,
        threshold: u64,
        callback: AlertFn,
    ) -> Result<()> {
        self.inner.alerts.lock().push(AlertHook {
            queue,
            threshold,
            above: false,
            callback,
        });
        self.check_alerts();
        Ok(())
    }

    fn check_alerts(&self) {
        let mut fired = Vec::new();
        {
            let mut hooks = self.inner.alerts.lock();
            if hooks.is_empty() {
                return;
            }
            let st = self.inner.state.lock();
            for hook in hooks.iter_mut() {
                let size = st
                    .queues
                    .get(hook.queue as usize)
                    .map(|q| q.dlq_order.len() as u64)
                    .unwrap_or(0);
                let above = size >= hook.threshold;
                if above != hook.above {
                    hook.above = above;
                    let name = st
                        .queues
                        .get(hook.queue as usize)
                        .map(|q| self.dlq_name(&q.name))
                        .unwrap_or_default();
                    fired.push((
                        Arc::clone(&hook.callback),
                        DlqAlert {
                            dlq: name,
                            size,
                            threshold: hook.threshold,
                            above,
                        },
                    ));
                }
            }
        }
        for (callback, alert) in fired {
            callback(&alert);
        }
    }

    /// Counts of every queue and DLQ, for metrics.
    pub fn metrics(&self) -> Vec<crate::queue::QueueStats> {
        self.queue_names()
            .iter()
            .filter_map(|n| self.existing_queue(n).ok())
            .map(|q| q.stats())
            .collect()
    }
}

/// One message as the index sees it (see [`Store::debug_messages`]).
#[doc(hidden)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DebugMessage {
    /// Its id.
    pub id: crate::types::MessageId,
    /// Its queue (for a DLQ entry: the queue whose DLQ holds it).
    pub queue: String,
    /// Where it is.
    pub place: crate::state::Place,
    /// Deliveries counted.
    pub attempts: u32,
    /// Visible-at while ready, the lease deadline while leased, dead-lettered-at when dead.
    pub visible_at_ms: u64,
    /// Replay generation.
    pub generation: u32,
    /// True while it is a suspect (leased when the process died, no outcome since).
    pub suspect: bool,
}

/// Queue names: 1 to 200 bytes, no control characters.
fn validate_queue_name(name: &str) -> Result<()> {
    if name.is_empty() || name.len() > 200 || name.chars().any(|c| c.is_control()) {
        return Err(Error::InvalidQueueName(name.to_string()));
    }
    Ok(())
}

/// Bounded history: keeps the newest `max` attempts, counting the dropped ones.
pub(crate) fn push_attempt(history: &mut History, attempt: crate::types::Attempt, max: usize) {
    history.attempts.push(attempt);
    while history.attempts.len() > max {
        history.attempts.remove(0);
        history.dropped += 1;
    }
}

/// Attributes type used by the API.
pub type Attributes = BTreeMap<String, String>;
