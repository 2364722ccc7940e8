//! The engine layer: queue records in the log, the state machine that applies them to the
//! in-memory index, checkpoints of that index, compaction, and the write path that ties
//! them together: [`Engine`].
//!
//! The engine knows records and message state, not how users see queues: it stores the
//! records the API layer builds and keeps the index they describe. It uses only the storage
//! layer below it.
//!
//! Invariants:
//! - the index only ever reflects records that were appended to the log, applied in log
//!   order, so replaying the log at open rebuilds the same index;
//! - when the engine waits for durability ([`EngineOptions::wait_for_sync`]), a write
//!   returns only after its records are durable, and every record it depended on (earlier
//!   in the log) is durable too; except a write its caller settles as
//!   [`Settle::Written`] (the worker pool's start records and failure reports), which
//!   returns once it is handed to the operating system and is durable once a later fsync
//!   covers it (every fsync covers everything appended before it);
//! - leases do not survive a reopen: the directory lock guarantees that the process that
//!   held them is gone, so their messages are ready again at once (their delivery stays
//!   counted).

pub mod checkpoint;
mod commit;
pub mod compaction;
#[cfg(feature = "async")]
mod deferred;
pub mod envelope;
pub mod failpoint;
pub mod fingerprint;
mod read;
#[cfg(feature = "async")]
mod ready_signal;
pub mod record;
mod reserve;
pub mod state;
pub mod wire;

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Instant;

use parking_lot::{Condvar, Mutex, MutexGuard};

use crate::error::{Error, Result};
use crate::storage::log::{Log, LogOptions, RecoveryMode, RecoveryReport};
use crate::storage::vfs::Vfs;
use checkpoint::CheckpointSlots;
use compaction::Shadow;
use state::State;

pub(crate) use commit::{op_entry, Batch, Settle};
pub(crate) use read::{bad_content, RecordReader};

/// How to open an engine: the log's settings and the engine's own.
pub(crate) struct EngineOptions {
    /// The file system.
    pub fs: Arc<dyn Vfs>,
    /// The log's settings, as the log is opened.
    pub log: LogOptions,
    /// Wait for an fsync covering a write before it returns (group commit, outside the
    /// state lock). The log is then opened without its own fsync.
    pub wait_for_sync: bool,
    /// Relocate the oldest sealed segments while their live fraction is below this.
    pub relocate_below: f64,
    /// Records per compaction write batch.
    pub batch: usize,
    /// How long an idempotency key is remembered, in milliseconds.
    pub idempotency_window_ms: u64,
    /// Stack-trace frames in failure fingerprints.
    pub fingerprint_frames: usize,
    /// How much of the past the index keeps (lineage, tombstones, audit trail).
    pub audit: state::AuditLimits,
}

/// True for the errors a read-only open meets when the owner compacts under it: a segment
/// gone, a checkpoint the log no longer reaches (or that reaches past it).
fn may_be_a_race(e: &crate::error::Error) -> bool {
    match e {
        Error::Io { source, .. } => source.kind() == std::io::ErrorKind::NotFound,
        Error::Corruption { .. } | Error::InvalidPosition(_) => true,
        _ => false,
    }
}

/// A store's log and the index it describes, with the write path, reads, checkpoints and
/// compaction.
pub(crate) struct Engine {
    log: Log,
    state: Mutex<State>,
    /// Signalled when a write made a message ready.
    ready: Condvar,
    /// The same, for waiting futures.
    #[cfg(feature = "async")]
    ready_async: ready_signal::ReadySignal,
    dir: PathBuf,
    fs: Arc<dyn Vfs>,
    wait_for_sync: bool,
    strict: bool,
    relocate_below: f64,
    batch: usize,
    idempotency_window_ms: u64,
    /// Compaction's index keeps lineage with these limits and fingerprint frames.
    audit: (state::AuditLimits, usize),
    report: RecoveryReport,
    /// Records read from the log since open (to show which calls read nothing).
    reads: AtomicU64,
    /// Positions of the two checkpoint slots.
    slots: Mutex<CheckpointSlots>,
    /// Compaction's own index, rebuilt from disk when `None`.
    shadow: Mutex<Option<Shadow>>,
}

impl Engine {
    /// Opens the log in `dir`, loads the newest usable checkpoint, replays the records after
    /// it, and releases every lease (their holder died with the process that held the lock).
    ///
    /// The checkpoint slots are read under the directory's lock before the log's recovery
    /// changes anything, so that a store written in a newer format version, whether its
    /// segments or its checkpoints say so, is refused untouched.
    pub(crate) fn open(dir: &Path, options: EngineOptions) -> Result<Engine> {
        let fs = Arc::clone(&options.fs);
        options.log.validate()?;
        let lock = Log::lock_dir(fs.as_ref(), dir)?;
        let engine = Engine::recover(dir, &options, false, |o| {
            Log::open_locked(Arc::clone(&fs), lock, o)
        })?;
        // The checkpoint reserve, if the disk has room for it (a store on a full disk opens
        // without it; compaction makes it once it has freed space).
        reserve::keep(fs.as_ref(), dir, reserve::size_at_open(fs.as_ref(), dir))?;
        Ok(engine)
    }

    /// The engine over the log `open_log` opens (the slots are read first: a checkpoint
    /// never covers records the log does not hold yet), the newest usable checkpoint and
    /// the log's records after it; the restored DLQ entries are given their fingerprints.
    /// Leases are released, or, in a read-only snapshot, kept as the log has them.
    fn recover(
        dir: &Path,
        options: &EngineOptions,
        read_only: bool,
        open_log: impl FnOnce(LogOptions) -> Result<(Log, RecoveryReport)>,
    ) -> Result<Engine> {
        let strict = options.log.recovery == RecoveryMode::Strict;
        let fs = options.fs.as_ref();
        let slots = checkpoint::read_slots(fs, dir)?;
        // A checkpoint's position was durable in the log before the checkpoint was written:
        // a log that ends before it lost its tail. For a snapshot that is also what a
        // checkpoint written after the slots were read looks like, which the caller tries
        // again.
        let mut log_options = options.log.clone();
        log_options.checkpoints = checkpoint::marks(&slots);
        let (log, mut report) = open_log(log_options)?;
        let rebuilt = (|| {
            let (mut state, from, slots, lost) =
                checkpoint::load_newest(fs, dir, slots, &log, &report, strict, read_only)?;
            // Reported with what recovery found, so later loads (compaction's) and the
            // ids skipped past lost ranges take it into account.
            report.quarantined.extend(lost);
            state.fingerprints.enable(options.fingerprint_frames);
            state.audit.set_limits(options.audit);
            state.audit_frames = options.fingerprint_frames;
            Engine::replay(&log, from, u64::MAX, &mut state)?;
            // Every record the index refers to must be in the log: one below the first
            // segment (or the first range recovery quarantined) was in a segment that is
            // gone (a first segment deleted).
            let first = checkpoint::log_start(&log, &report);
            if let Some(low) = state.lowest_position().filter(|&low| low < first) {
                let lost = checkpoint::missing_range(&log, dir, low, first, strict || read_only)?;
                report.quarantined.extend(lost);
            }
            Ok((state, slots))
        })();
        let (mut state, slots) = match rebuilt {
            Ok(rebuilt) => rebuilt,
            Err(e) => {
                // A failed open leaves no new segment behind: the next open finds the
                // directory as this one did (its error is the one reported).
                if let Some(created) = &report.created_segment {
                    let _ = log.discard_created(created);
                }
                return Err(e);
            }
        };
        if read_only {
            state.rebuild_ready_lists();
        } else {
            state.release_all_leases();
        }
        state.skip_lost_ids(&report);
        let engine = Engine {
            log,
            state: Mutex::new(state),
            ready: Condvar::new(),
            #[cfg(feature = "async")]
            ready_async: ready_signal::ReadySignal::default(),
            dir: dir.to_path_buf(),
            fs: Arc::clone(&options.fs),
            wait_for_sync: options.wait_for_sync && !read_only,
            strict,
            relocate_below: options.relocate_below,
            batch: options.batch,
            idempotency_window_ms: options.idempotency_window_ms,
            audit: (options.audit, options.fingerprint_frames),
            report,
            reads: AtomicU64::new(0),
            slots: Mutex::new(slots),
            shadow: Mutex::new(None),
        };
        if let Err(e) = engine.fingerprint_restored_entries() {
            if let Some(created) = &engine.report.created_segment {
                let created = created.clone();
                let _ = engine.log.discard_created(&created);
            }
            return Err(e);
        }
        Ok(engine)
    }

    /// Applies every record of `log` from position `from` up to `until` to `state`.
    fn replay(log: &Log, from: u64, until: u64, state: &mut State) -> Result<()> {
        for item in log.iter_from(from)? {
            let (pos, rec) = item?;
            if pos >= until {
                break;
            }
            let decoded =
                wire::decode_for_apply(rec.version(), &rec).map_err(|_| bad_content(pos))?;
            state.apply(&decoded, pos);
        }
        Ok(())
    }

    /// Gives DLQ entries restored from a checkpoint their fingerprints, read from their
    /// envelopes (fingerprints are not persisted; entries applied from the log have theirs).
    fn fingerprint_restored_entries(&self) -> Result<()> {
        let mut st = self.state.lock();
        let missing: Vec<(u64, state::DeadInfo)> = st
            .fingerprints
            .missing(st.dead.keys().copied())
            .filter_map(|id| st.dead.get(&id).map(|d| (id, *d)))
            .collect();
        for (id, info) in missing {
            let Some(queue) = st.msgs.get(&id).map(|m| m.queue()) else {
                continue;
            };
            let failure = match self.read_failure(info.envelope_pos) {
                Ok(failure) => failure,
                // Under quarantine an envelope in a range recovery skipped (a cut segment
                // whose records a checkpoint covers) is lost: the entry stays, without a
                // fingerprint, and reading it is `Corruption`, as for any quarantined
                // record. A strict open has no such range, and refuses.
                Err(Error::Corruption { .. }) if !self.strict => continue,
                Err(e) => return Err(e),
            };
            st.add_fingerprint(queue, id, info.dead_at, &failure);
        }
        Ok(())
    }

    /// Opens a read-only snapshot of the store in `dir` without its lock (see
    /// [`Log::open_read_only`]): the newest checkpoint and the log's complete records after
    /// it. Nothing is written, and leases stay as the log has them (their holder may be
    /// alive). The owner may write a checkpoint and delete the segments below it between
    /// the reads of the slots and of the segments: the open then sees a checkpoint the log
    /// no longer reaches, or a segment vanish, and starts again (a few times; damage that
    /// stays is reported).
    pub(crate) fn open_read_only(dir: &Path, options: EngineOptions) -> Result<Engine> {
        options.log.validate()?;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let fs = &options.fs;
            let open_log = |o| Log::open_read_only(Arc::clone(fs), dir, o);
            match Engine::recover(dir, &options, true, open_log) {
                Err(e) if attempt < 5 && may_be_a_race(&e) => {
                    std::thread::sleep(std::time::Duration::from_millis(10 * attempt));
                }
                result => return result,
            }
        }
    }

    /// The store directory.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// What the log's recovery found at open.
    pub(crate) fn recovery_report(&self) -> &RecoveryReport {
        &self.report
    }

    /// The log: for the storage statistics the store reports, and for syncing and closing
    /// it (a read-only snapshot's log is read-only).
    pub(crate) fn log(&self) -> &Log {
        &self.log
    }

    /// True when every write waits for its fsync (`Durability::Always`).
    pub(crate) fn waits_for_sync(&self) -> bool {
        self.wait_for_sync
    }

    /// Locks the index. Writes go through [`Engine::commit_with`] or
    /// [`Engine::write_locked`] while it is held.
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock()
    }

    /// Waits, with the index unlocked, until a write makes a message ready, `wake` is
    /// called, or `until` passes.
    pub(crate) fn wait_ready(&self, st: &mut MutexGuard<'_, State>, until: Instant) {
        self.ready.wait_until(st, until);
    }

    /// Wakes every thread in [`Engine::wait_ready`] (and every future waiting on
    /// [`Engine::ready_signal`]).
    pub(crate) fn wake(&self) {
        self.ready.notify_all();
        #[cfg(feature = "async")]
        self.ready_async.notify();
    }

    /// What waiting futures wait on: notified whenever [`Engine::wait_ready`]'s threads
    /// are woken.
    #[cfg(feature = "async")]
    pub(crate) fn ready_signal(&self) -> &ready_signal::ReadySignal {
        &self.ready_async
    }

    /// Drops the engine as a crash would: nothing buffered is written, nothing synced.
    #[cfg(feature = "sim")]
    pub(crate) fn abandon(self) {
        self.log.abandon();
    }

    /// How many records have been read from the log since open (replay excluded).
    #[cfg(feature = "sim")]
    pub(crate) fn records_read(&self) -> u64 {
        self.reads.load(std::sync::atomic::Ordering::Relaxed)
    }
}
