//! The segmented log: append, group commit, roll, read by position, iterate, delete.
//!
//! One log per store directory. Records are opaque byte strings framed by [`crate::storage::format`];
//! a record's *position* is its byte position in the log's infinite address space, stable for
//! its whole life. Invariants:
//! - positions are assigned in append order and never reused;
//! - an append under [`Durability::Always`] returns only after an fsync covering it
//!   completed; concurrent appenders share one fsync (group commit);
//! - readers see only bytes that were written to the file (a read of a position still in the
//!   write buffer flushes it first);
//! - after an fsync or a write fails, every later write returns [`Error::Poisoned`] until the
//!   log is reopened: the page cache may have dropped the data, so retrying would lie;
//! - every byte returned by [`Log::read`] or [`Log::iter_from`] passed its checksum.
//!
//! This file holds the log's state and its open, position and segment bookkeeping; the
//! submodules hold one job each: `options` (settings), `append` (the writer, rolling and
//! the spare-segment thread), `sync` (group commit and the interval flusher), `read`
//! (reads and iteration) and `recovery` (the scan at open).

mod append;
#[cfg(feature = "async")]
mod committer;
mod group_commit;
mod options;
mod read;
mod recovery;
mod sync;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use parking_lot::{Mutex, RwLock};

use crate::error::{Error, IoContext, Result};
use crate::storage::segment::{self, Segment};
use crate::storage::tail_hint::{self, HintKeeper};
use crate::storage::vfs::{create_dir_durably, LockGuard, LockHolder, Vfs, VfsFile};

pub use append::AppendRules;
use append::{spawn_preparer, PrepMsg};
#[cfg(feature = "async")]
pub use committer::DurableWait;
use group_commit::GroupCommit;
pub use options::{
    CheckpointMark, Durability, LogOptions, RecoveryMode, DEFAULT_SEGMENT_SIZE, FIRST_SEGMENT_SIZE,
    MAX_SEGMENT_SIZE,
};
pub use read::{Reader, Record};
use recovery::recover;
pub use recovery::{QuarantinedRange, RecoveryReport, TornTail};
use sync::spawn_flusher;

/// The largest base position a segment may have; a header claiming more is a bad header.
pub const MAX_BASE: u64 = 1 << 63;

/// Name of the lock file in a log directory.
pub const LOCK_FILE: &str = "LOCK";

/// Name of the control socket a store's owner may serve in its directory (see
/// `api/control`); the log knows it only to leave it out of the files it reports.
pub const CONTROL_SOCKET: &str = "control.sock";

/// Counters of the log's work since open.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LogStats {
    /// fsync calls on segment data.
    pub fsyncs: u64,
    /// Records appended.
    pub appends: u64,
    /// `write` calls of buffered data.
    pub writes: u64,
    /// Segments currently open.
    pub segments: usize,
}

/// Where a segment is and how much of it is used (for compaction and tools).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SegmentInfo {
    /// First log position.
    pub base: u64,
    /// Log position past its last record.
    pub end: u64,
    /// Its file.
    pub path: PathBuf,
    /// True for the segment being appended to.
    pub active: bool,
}

struct Writer {
    active: Arc<Segment>,
    /// Frames not yet written; they start at data offset `active.end()`.
    buf: Vec<u8>,
    /// The active segment's tail hint, raised before a write passes it.
    hint: HintKeeper,
}

impl Writer {
    fn appended_end(&self) -> u64 {
        self.active.end_position() + self.buf.len() as u64
    }
}

struct Inner {
    dir: PathBuf,
    fs: Arc<dyn Vfs>,
    opts: LogOptions,
    /// The store's id, which every new segment's header names (0: none, a read-only
    /// snapshot of a store of format version 1).
    store_id: u128,
    segments: RwLock<BTreeMap<u64, Arc<Segment>>>,
    writer: Mutex<Writer>,
    /// Log position up to which bytes were written to files.
    flushed: AtomicU64,
    /// Log position up to which bytes are durable, and group commit's bookkeeping (who
    /// leads, who waits, the gathering).
    commit: GroupCommit,
    poisoned: AtomicBool,
    fsyncs: AtomicU64,
    appends: AtomicU64,
    writes: AtomicU64,
    /// An allocated file ready to become the next segment (see [`segment::SPARE_NAME`]),
    /// and its size.
    spare: Mutex<Option<(Arc<dyn VfsFile>, u64)>>,
    /// True once the spare for the next roll was asked for.
    spare_requested: AtomicBool,
    /// True from a roll that failed for want of space to the next roll that worked.
    out_of_space: AtomicBool,
    /// Wakes the thread that prepares spares.
    preparer: crossbeam_channel::Sender<PrepMsg>,
    /// Whole segments quarantined at open (bad header): `[start, end)` and the file.
    lost_segments: Vec<(u64, u64, PathBuf)>,
    /// True for a snapshot opened by [`Log::open_read_only`]: appends are refused.
    read_only: bool,
    /// The directory lock (`None` for a read-only snapshot, which takes none).
    _lock: Option<Box<dyn LockGuard>>,
}

/// A store directory's exclusive lock, held from [`Log::lock_dir`] until the log opened
/// with it (by [`Log::open_locked`]) is dropped.
pub struct DirLock {
    dir: PathBuf,
    guard: Box<dyn LockGuard>,
}

impl std::fmt::Debug for DirLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirLock").field("dir", &self.dir).finish()
    }
}

/// The append-only segmented log. Cheap to share behind an `Arc`; all methods take `&self`.
pub struct Log {
    inner: Arc<Inner>,
    flusher: Mutex<Option<(crossbeam_channel::Sender<()>, JoinHandle<()>)>>,
    preparer: Mutex<Option<JoinHandle<()>>>,
    /// The commit thread of [`Log::durable_at`], started by its first call.
    #[cfg(feature = "async")]
    committer: Mutex<Option<committer::Committer>>,
}

impl std::fmt::Debug for Log {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Log").field("dir", &self.inner.dir).finish()
    }
}

impl Log {
    /// Opens (creating if needed) the log in `dir` on the real file system.
    #[cfg(feature = "sim")]
    pub fn open(dir: impl AsRef<Path>, opts: LogOptions) -> Result<(Log, RecoveryReport)> {
        Self::open_with(Arc::new(crate::storage::vfs::RealFs), dir, opts)
    }

    /// Opens the log in `dir` through the given file system.
    #[cfg(feature = "sim")]
    pub fn open_with(
        fs: Arc<dyn Vfs>,
        dir: impl AsRef<Path>,
        opts: LogOptions,
    ) -> Result<(Log, RecoveryReport)> {
        opts.validate()?;
        let lock = Self::lock_dir(fs.as_ref(), dir)?;
        Self::open_locked(fs, lock, opts)
    }

    /// Creates `dir` if it does not exist (making its name, and those of the parents it
    /// creates, durable; [`Error::NotADirectory`] when it, or a parent, is a file) and takes its
    /// exclusive lock ([`Error::Locked`] when another handle holds it). Nothing else in the
    /// directory is read or changed: a caller that must look at other files before the
    /// log's recovery changes anything (the engine's checkpoints) does so holding this,
    /// then opens the log with [`Log::open_locked`].
    pub fn lock_dir(fs: &dyn Vfs, dir: impl AsRef<Path>) -> Result<DirLock> {
        let dir = dir.as_ref().to_path_buf();
        create_dir_durably(fs, &dir)?;
        let lock_path = dir.join(LOCK_FILE);
        let guard = match fs.lock(&lock_path) {
            Ok(l) => l,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                let holder = LockHolder::read(fs, &lock_path);
                return Err(Error::Locked {
                    path: dir,
                    pid: holder.pid,
                    host: holder.host,
                });
            }
            Err(e) => return Err(Error::io("lock", &lock_path, e)),
        };
        Ok(DirLock { dir, guard })
    }

    /// Opens the log in the directory `lock` holds, with `opts` checked before the lock was
    /// taken: recovery (see `docs/FORMAT.md`), then the log is ready to append.
    pub fn open_locked(
        fs: Arc<dyn Vfs>,
        lock: DirLock,
        opts: LogOptions,
    ) -> Result<(Log, RecoveryReport)> {
        let DirLock { dir, guard: lock } = lock;
        let (segments, report, hint) = recover(fs.as_ref(), &dir, &opts, false)?;
        Self::start(fs, dir, opts, segments, report, hint, Some(lock))
    }

    /// Opens a read-only snapshot of the log in `dir`, without its lock: the records
    /// that are complete now, up to a torn tail (which may be a record its owner is
    /// writing). Every file is opened read-only and nothing in the directory changes;
    /// appends are [`Error::ReadOnly`]. No background thread is started.
    pub fn open_read_only(
        fs: Arc<dyn Vfs>,
        dir: impl AsRef<Path>,
        opts: LogOptions,
    ) -> Result<(Log, RecoveryReport)> {
        opts.validate()?;
        let dir = dir.as_ref().to_path_buf();
        let (segments, report, _) = recover(fs.as_ref(), &dir, &opts, true)?;
        Self::start(fs, dir, opts, segments, report, None, None)
    }

    fn start(
        fs: Arc<dyn Vfs>,
        dir: PathBuf,
        opts: LogOptions,
        segments: BTreeMap<u64, Arc<Segment>>,
        report: RecoveryReport,
        hint: Option<u64>,
        lock: Option<Box<dyn LockGuard>>,
    ) -> Result<(Log, RecoveryReport)> {
        let read_only = lock.is_none();
        let active = match segments.values().next_back() {
            Some(s) => Arc::clone(s),
            None if read_only => {
                return Err(Error::io(
                    "open",
                    &dir,
                    std::io::Error::new(std::io::ErrorKind::NotFound, "no segment file"),
                ))
            }
            None => return Err(Error::InvalidConfig("recovery left no segment".into())),
        };
        let end = active.end_position();
        let mut hint = HintKeeper::new(active.base, hint);
        if !read_only {
            // An active segment recovery read whole (it had no usable hint: written by an
            // older build, its hint lost, a new segment) gets one now, so that the next open
            // is cheap even if nothing is appended before it. Best effort: nothing has been
            // written past it, so a failed attempt leaves no hint, a torn one (not used) or a
            // true one; the first append tries again or goes on without (see `make_room`).
            let _ = hint.make_room(
                fs.as_ref(),
                &dir,
                active.base,
                active.end(),
                active.capacity,
            );
        }
        let (prep_tx, prep_rx) = crossbeam_channel::unbounded();
        let inner = Arc::new(Inner {
            dir,
            fs,
            opts,
            store_id: report.store_id.unwrap_or_default(),
            segments: RwLock::new(segments),
            writer: Mutex::new(Writer {
                active,
                buf: Vec::new(),
                hint,
            }),
            flushed: AtomicU64::new(end),
            commit: GroupCommit::new(end),
            poisoned: AtomicBool::new(false),
            fsyncs: AtomicU64::new(0),
            appends: AtomicU64::new(0),
            writes: AtomicU64::new(0),
            spare: Mutex::new(None),
            spare_requested: AtomicBool::new(false),
            out_of_space: AtomicBool::new(false),
            preparer: prep_tx,
            lost_segments: report
                .quarantined
                .iter()
                .filter(|q| q.is_outside_segments())
                .map(|q| (q.start, q.end, q.path.clone()))
                .collect(),
            read_only,
            _lock: lock,
        });
        // A read-only snapshot starts no background thread.
        let (mut preparer, mut flusher) = (None, None);
        if !read_only {
            let weak = Arc::downgrade(&inner);
            preparer = Some(spawn_preparer(weak, prep_rx).io("spawn preparer", &inner.dir)?);
            if let Durability::Interval(every) = inner.opts.durability {
                let weak = Arc::downgrade(&inner);
                flusher = Some(spawn_flusher(weak, every).io("spawn flusher", &inner.dir)?);
            }
        }
        let log = Log {
            inner,
            flusher: Mutex::new(flusher),
            preparer: Mutex::new(preparer),
            #[cfg(feature = "async")]
            committer: Mutex::new(None),
        };
        Ok((log, report))
    }

    /// True for a snapshot opened by [`Log::open_read_only`].
    pub fn is_read_only(&self) -> bool {
        self.inner.read_only
    }

    /// The directory of the log.
    #[cfg(feature = "sim")]
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// The options the log was opened with.
    pub fn options(&self) -> &LogOptions {
        &self.inner.opts
    }

    /// The store's id (see `docs/FORMAT.md`, store identity): what every segment header
    /// of format version 2 on names, and every checkpoint. `None` for a read-only snapshot
    /// of a store that has none (all its segments of version 1).
    pub fn store_id(&self) -> Option<u128> {
        Some(self.inner.store_id).filter(|&id| id != 0)
    }

    /// The sequence number of the segment being appended to (0 in a log of format version
    /// 1, whose headers have none).
    pub fn active_seq(&self) -> u64 {
        self.inner.writer.lock().active.seq
    }

    /// Position of the first record still in the log.
    pub fn first_position(&self) -> u64 {
        let segments = self.inner.segments.read();
        segments.first_key_value().map_or(0, |(&base, _)| base)
    }

    /// Position just past the last appended record.
    pub fn end_position(&self) -> u64 {
        self.inner.writer.lock().appended_end()
    }

    /// Position up to which the log is known durable.
    pub fn durable_position(&self) -> u64 {
        self.inner.commit.synced()
    }

    /// Deletes every whole segment that ends at or below `pos` (never the active one).
    /// Returns how many were deleted.
    pub fn delete_below(&self, pos: u64) -> Result<usize> {
        let inner = &*self.inner;
        if inner.read_only {
            return Err(Error::ReadOnly {
                path: inner.dir.clone(),
            });
        }
        let active_base = inner.writer.lock().active.base;
        let doomed: Vec<Arc<Segment>> = inner
            .segments
            .read()
            .values()
            .filter(|s| s.base != active_base && s.end_position() <= pos)
            .cloned()
            .collect();
        // Oldest first, with a directory sync after each removal: removals are not assumed
        // to reach the disk in order, and a crash must leave a contiguous run of segments.
        for seg in &doomed {
            inner.segments.write().remove(&seg.base);
            if let Err(e) = inner.fs.remove(&seg.path) {
                // The file is still there: keep it in the log, or a later call would delete
                // the segments after it and leave a hole that no open gets past.
                inner.segments.write().insert(seg.base, Arc::clone(seg));
                return Err(Error::io("remove", &seg.path, e));
            }
            inner.fs.sync_dir(&inner.dir).io("fsync dir", &inner.dir)?;
        }
        Ok(doomed.len())
    }

    /// The segments, oldest first.
    pub fn segments(&self) -> Vec<SegmentInfo> {
        let active_base = self.inner.writer.lock().active.base;
        self.inner
            .segments
            .read()
            .values()
            .map(|s| SegmentInfo {
                base: s.base,
                end: s.end_position(),
                path: s.path.clone(),
                active: s.base == active_base,
            })
            .collect()
    }

    /// Counters since open.
    pub fn stats(&self) -> LogStats {
        let i = &*self.inner;
        LogStats {
            fsyncs: i.fsyncs.load(Ordering::Relaxed),
            appends: i.appends.load(Ordering::Relaxed),
            writes: i.writes.load(Ordering::Relaxed),
            segments: i.segments.read().len(),
        }
    }

    /// True after a failed write or fsync: the log must be reopened to write again.
    pub fn is_poisoned(&self) -> bool {
        self.inner.poisoned.load(Ordering::Acquire)
    }

    /// True when the last roll failed for want of space (ENOSPC creating the next
    /// segment) and none worked since: payload records are refused until space returns.
    pub fn is_out_of_space(&self) -> bool {
        self.inner.out_of_space.load(Ordering::Acquire)
    }

    /// Drops the log as a crash would: buffered records are discarded, nothing is synced.
    /// The lock is released. For crash-simulation tests.
    #[cfg(feature = "sim")]
    pub fn abandon(self) {
        self.inner.writer.lock().buf.clear();
        self.inner.poisoned.store(true, Ordering::Release);
    }

    /// Closes a log whose opener failed after its recovery (the store's state could not be
    /// rebuilt), removing the segment the open created (`created`, from its
    /// [`RecoveryReport::created_segment`]) and that segment's tail hint, then syncing the
    /// directory: a failed open leaves no new segment behind. Nothing is removed if a
    /// record was appended to it.
    pub fn discard_created(self, created: &Path) -> Result<()> {
        let (base, empty) = {
            let w = self.inner.writer.lock();
            (w.active.base, w.active.end() == 0 && w.buf.is_empty())
        };
        if !empty || self.inner.dir.join(segment::segment_name(base)) != created {
            return Ok(());
        }
        // Removed while the log still holds the directory's lock (its open files keep
        // their inodes until it is dropped, below).
        let (fs, dir) = (&self.inner.fs, &self.inner.dir);
        for name in [segment::segment_name(base), tail_hint::hint_name(base)] {
            let path = dir.join(name);
            match fs.remove(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(Error::io("remove", &path, e));
                }
                _ => {}
            }
        }
        fs.sync_dir(dir).io("fsync dir", dir)?;
        drop(self);
        Ok(())
    }

    /// Writes and fsyncs everything, stops the background flusher. Dropping the log does the
    /// same, ignoring errors.
    pub fn close(&self) -> Result<()> {
        // The commit thread serves what waits on it (one sync) before it stops.
        #[cfg(feature = "async")]
        if let Some(mut committer) = self.committer.lock().take() {
            committer.stop();
        }
        if let Some((stop, handle)) = self.flusher.lock().take() {
            drop(stop);
            let _ = handle.join();
        }
        if let Some(handle) = self.preparer.lock().take() {
            let _ = self.inner.preparer.send(PrepMsg::Stop);
            let _ = handle.join();
            if self.inner.spare.lock().take().is_some() {
                // Best effort: recovery removes a leftover spare anyway.
                let _ = self
                    .inner
                    .fs
                    .remove(&self.inner.dir.join(segment::SPARE_NAME));
            }
        }
        if self.is_poisoned() {
            return Err(Error::Poisoned);
        }
        self.sync()
    }
}

impl Drop for Log {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

impl Inner {
    fn segment_for(&self, pos: u64) -> Option<Arc<Segment>> {
        self.segments
            .read()
            .range(..=pos)
            .next_back()
            .map(|(_, s)| Arc::clone(s))
    }

    fn poison<T>(&self, err: Error) -> Result<T> {
        self.poisoned.store(true, Ordering::Release);
        Err(err)
    }
}
