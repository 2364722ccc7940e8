//! The segmented log: append, group commit, roll, read by position, iterate, delete.
//!
//! One log per store directory. Records are opaque byte strings framed by [`crate::format`];
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

use std::collections::BTreeMap;
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::{Condvar, Mutex, RwLock};

use crate::error::{CorruptionKind, Error, Result};
use crate::format::{self, FrameError, FRAME_HEADER_LEN, SEGMENT_HEADER_LEN};
use crate::segment::{self, Segment};
use crate::vfs::{LockGuard, MappedView, RealFs, Vfs, VfsFile};

/// The largest base position a segment may have; a header claiming more is a bad header.
pub const MAX_BASE: u64 = 1 << 63;

/// Name of the lock file in a log directory.
pub const LOCK_FILE: &str = "LOCK";

/// When appends are made durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// fsync before every append returns; concurrent appends share one fsync.
    Always,
    /// Written and fsynced by a background thread at this interval; a crash loses at most
    /// about one interval of acknowledged appends.
    Interval(Duration),
    /// Never fsynced except when a segment is sealed; appends are buffered in the process
    /// until the buffer fills, a read needs them, or [`Log::flush`] / [`Log::sync`] is called.
    Never,
}

/// What recovery does with damaged committed data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecoveryMode {
    /// Refuse to open, returning [`Error::Corruption`] with the location.
    Strict,
    /// Open, skipping damaged ranges, and list them in [`RecoveryReport::quarantined`].
    Quarantine,
}

/// Log settings.
#[derive(Debug, Clone)]
pub struct LogOptions {
    /// Size of a segment file, header included.
    pub segment_size: u64,
    /// Largest record body accepted.
    pub max_record_size: usize,
    /// When appends become durable.
    pub durability: Durability,
    /// Fill new segments with zeros up front, so that `fdatasync` after an append has no
    /// metadata to write and appends cannot fail for lack of space inside a segment.
    pub preallocate: bool,
    /// What to do with damaged committed data found at open.
    pub recovery: RecoveryMode,
    /// Bytes buffered in the process before a write under `Never` or `Interval`.
    pub write_buffer: usize,
    /// Bytes at the end of each segment that only appends allowed to use the reserve (see
    /// [`Log::append_each_with`]) may fill; others roll to a new segment first. When the
    /// disk is full and a roll fails, those appends (the store's acks, leases, failures:
    /// records that carry no payload) can go on. 0: no reserve.
    pub reserve: u64,
}

impl Default for LogOptions {
    fn default() -> Self {
        LogOptions {
            segment_size: 64 << 20,
            max_record_size: 16 << 20,
            durability: Durability::Always,
            preallocate: true,
            recovery: RecoveryMode::Strict,
            write_buffer: 256 << 10,
            reserve: 0,
        }
    }
}

impl LogOptions {
    fn validate(&self) -> Result<()> {
        let room = self
            .segment_size
            .saturating_sub((SEGMENT_HEADER_LEN + FRAME_HEADER_LEN) as u64);
        if self.max_record_size == 0 || self.max_record_size as u64 > room {
            return Err(Error::InvalidConfig(format!(
                "max_record_size {} must be between 1 and segment_size - {} = {room}",
                self.max_record_size,
                SEGMENT_HEADER_LEN + FRAME_HEADER_LEN
            )));
        }
        if self.max_record_size > format::MAX_FRAME_BODY {
            return Err(Error::InvalidConfig("max_record_size above 4 GiB".into()));
        }
        if let Durability::Interval(d) = self.durability {
            if d.is_zero() {
                return Err(Error::InvalidConfig("durability interval of zero".into()));
            }
        }
        Ok(())
    }
}

/// A torn write found and removed at open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TornTail {
    /// The segment it was in.
    pub path: PathBuf,
    /// File offset where the dropped bytes began.
    pub offset: u64,
    /// How many bytes were dropped (up to the last non-zero byte).
    pub dropped_bytes: u64,
}

/// A damaged range skipped under [`RecoveryMode::Quarantine`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuarantinedRange {
    /// The segment.
    pub path: PathBuf,
    /// What is wrong.
    pub kind: CorruptionKind,
    /// First log position of the range.
    pub start: u64,
    /// Log position just past the range.
    pub end: u64,
}

/// What opening the log found and did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Segments opened.
    pub segments: usize,
    /// Valid records found.
    pub records: u64,
    /// A torn tail that was truncated, if any.
    pub torn_tail: Option<TornTail>,
    /// Damaged ranges skipped (only under [`RecoveryMode::Quarantine`]).
    pub quarantined: Vec<QuarantinedRange>,
    /// Leftover temporary files from an interrupted segment creation, removed.
    pub removed_temp_files: Vec<String>,
    /// A last segment that held no record (zero-filled), removed.
    pub removed_empty_segments: Vec<String>,
    /// Files that are not the log's, left untouched.
    pub ignored_files: Vec<String>,
}

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

/// A record read from the log: its body, borrowed from the segment's memory map.
#[derive(Clone)]
pub struct Record {
    view: Arc<dyn MappedView>,
    start: usize,
    len: usize,
}

impl Deref for Record {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.view.bytes()[self.start..self.start + self.len]
    }
}

impl std::fmt::Debug for Record {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Record").field("len", &self.len).finish()
    }
}

/// Where a segment is and how much of it is used (for compaction and tools).
#[derive(Debug, Clone, PartialEq, Eq)]
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
    segments: RwLock<BTreeMap<u64, Arc<Segment>>>,
    writer: Mutex<Writer>,
    /// Log position up to which bytes were written to files.
    flushed: AtomicU64,
    /// Log position up to which bytes are durable.
    synced: AtomicU64,
    /// True while one thread leads an fsync; the others wait on `sync_done`.
    sync_busy: Mutex<bool>,
    sync_done: Condvar,
    poisoned: AtomicBool,
    fsyncs: AtomicU64,
    appends: AtomicU64,
    writes: AtomicU64,
    /// A zero-filled file ready to become the next segment (see [`segment::SPARE_NAME`]).
    spare: Mutex<Option<Arc<dyn VfsFile>>>,
    /// True once the spare for the next roll was asked for.
    spare_requested: AtomicBool,
    /// Wakes the thread that prepares spares.
    preparer: crossbeam_channel::Sender<PrepMsg>,
    /// Whole segments quarantined at open (bad header): `[start, end)` and the file.
    lost_segments: Vec<(u64, u64, PathBuf)>,
    _lock: Box<dyn LockGuard>,
}

/// Messages to the spare-preparing thread.
enum PrepMsg {
    Prepare,
    Stop,
}

/// The append-only segmented log. Cheap to share behind an `Arc`; all methods take `&self`.
pub struct Log {
    inner: Arc<Inner>,
    flusher: Mutex<Option<(crossbeam_channel::Sender<()>, JoinHandle<()>)>>,
    preparer: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for Log {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Log").field("dir", &self.inner.dir).finish()
    }
}

impl Log {
    /// Opens (creating if needed) the log in `dir` on the real file system.
    pub fn open(dir: impl AsRef<Path>, opts: LogOptions) -> Result<(Log, RecoveryReport)> {
        Self::open_with(Arc::new(RealFs), dir, opts)
    }

    /// Opens the log in `dir` through the given file system.
    pub fn open_with(
        fs: Arc<dyn Vfs>,
        dir: impl AsRef<Path>,
        opts: LogOptions,
    ) -> Result<(Log, RecoveryReport)> {
        opts.validate()?;
        let dir = dir.as_ref().to_path_buf();
        let existed = fs.list(&dir).is_ok();
        fs.create_dir_all(&dir)
            .map_err(|e| Error::io("create dir", &dir, e))?;
        if !existed {
            // Make the new directory's own name durable in its parent.
            let parent = match dir.parent() {
                Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
                _ => PathBuf::from("."),
            };
            fs.sync_dir(&parent)
                .map_err(|e| Error::io("fsync dir", &parent, e))?;
        }
        let lock_path = dir.join(LOCK_FILE);
        let lock = match fs.lock(&lock_path) {
            Ok(l) => l,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                return Err(Error::Locked { path: dir });
            }
            Err(e) => return Err(Error::io("lock", &lock_path, e)),
        };
        let (segments, report) = recover(fs.as_ref(), &dir, &opts)?;
        let active = match segments.values().next_back() {
            Some(s) => Arc::clone(s),
            None => return Err(Error::InvalidConfig("recovery left no segment".into())),
        };
        let end = active.end_position();
        let (prep_tx, prep_rx) = crossbeam_channel::unbounded();
        let inner = Arc::new(Inner {
            dir,
            fs,
            opts,
            segments: RwLock::new(segments),
            writer: Mutex::new(Writer {
                active,
                buf: Vec::new(),
            }),
            flushed: AtomicU64::new(end),
            synced: AtomicU64::new(end),
            sync_busy: Mutex::new(false),
            sync_done: Condvar::new(),
            poisoned: AtomicBool::new(false),
            fsyncs: AtomicU64::new(0),
            appends: AtomicU64::new(0),
            writes: AtomicU64::new(0),
            spare: Mutex::new(None),
            spare_requested: AtomicBool::new(false),
            preparer: prep_tx,
            lost_segments: report
                .quarantined
                .iter()
                .filter(|q| q.kind == CorruptionKind::BadHeader)
                .map(|q| (q.start, q.end, q.path.clone()))
                .collect(),
            _lock: lock,
        });
        let preparer = spawn_preparer(Arc::downgrade(&inner), prep_rx)
            .map_err(|e| Error::io("spawn preparer", &inner.dir, e))?;
        let flusher = match inner.opts.durability {
            Durability::Interval(every) => Some(
                spawn_flusher(Arc::downgrade(&inner), every)
                    .map_err(|e| Error::io("spawn flusher", &inner.dir, e))?,
            ),
            _ => None,
        };
        Ok((
            Log {
                inner,
                flusher: Mutex::new(flusher),
                preparer: Mutex::new(Some(preparer)),
            },
            report,
        ))
    }

    /// The directory of the log.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// The options the log was opened with.
    pub fn options(&self) -> &LogOptions {
        &self.inner.opts
    }

    /// Appends one record; returns its position.
    pub fn append(&self, body: &[u8]) -> Result<u64> {
        let mut pos = 0;
        self.append_each(std::iter::once(body), |p| pos = p)?;
        Ok(pos)
    }

    /// Appends records as one batch sharing one write and one fsync; returns their positions.
    pub fn append_batch<B: AsRef<[u8]>>(&self, bodies: &[B]) -> Result<Vec<u64>> {
        let mut positions = Vec::with_capacity(bodies.len());
        self.append_each(bodies.iter().map(|b| b.as_ref()), |p| positions.push(p))?;
        Ok(positions)
    }

    /// Appends records as one batch, calling `on_position` with each record's position.
    pub fn append_each<'a>(
        &self,
        bodies: impl Iterator<Item = &'a [u8]> + Clone,
        on_position: impl FnMut(u64),
    ) -> Result<()> {
        self.append_each_with(bodies, on_position, true)
    }

    /// Like [`Log::append_each`]; unless `may_use_reserve`, the batch does not go into the
    /// last [`LogOptions::reserve`] bytes of a segment (it rolls first).
    pub fn append_each_with<'a>(
        &self,
        bodies: impl Iterator<Item = &'a [u8]> + Clone,
        mut on_position: impl FnMut(u64),
        may_use_reserve: bool,
    ) -> Result<()> {
        let inner = &*self.inner;
        let reserve = if may_use_reserve {
            0
        } else {
            inner.opts.reserve
        };
        if inner.poisoned.load(Ordering::Acquire) {
            return Err(Error::Poisoned);
        }
        let mut total = 0u64;
        let mut count = 0u64;
        for body in bodies.clone() {
            if body.is_empty() {
                return Err(Error::EmptyRecord);
            }
            if body.len() > inner.opts.max_record_size {
                return Err(Error::TooLarge {
                    size: body.len(),
                    max: inner.opts.max_record_size,
                });
            }
            total += format::frame_len(body.len()) as u64;
            count += 1;
        }
        let end = {
            let mut w = inner.writer.lock();
            let used = w.active.end() + w.buf.len() as u64;
            let limit = w.active.capacity.saturating_sub(reserve);
            if used + total > limit && total <= limit && used > 0 {
                inner.roll(&mut w)?;
            }
            let start_buf = w.buf.len();
            let start_base = w.active.base;
            for (appended, body) in bodies.enumerate() {
                let flen = format::frame_len(body.len()) as u64;
                let used = w.active.end() + w.buf.len() as u64;
                // An empty segment takes any record (it fits: the options say so).
                if used > 0 && used + flen > w.active.capacity.saturating_sub(reserve) {
                    if let Err(e) = inner.roll(&mut w) {
                        if w.active.base == start_base {
                            w.buf.truncate(start_buf);
                        }
                        if appended > 0 {
                            // The roll wrote (and synced) the part of this batch appended so
                            // far, but the caller will not apply a batch that failed: more
                            // appends would put records after it that reuse its ids. Refuse
                            // writes until a reopen replays the written part.
                            return inner.poison(e);
                        }
                        return Err(e);
                    }
                }
                let pos = w.appended_end();
                let synced = inner.synced.load(Ordering::Acquire);
                format::encode_frame(&mut w.buf, pos, body, synced);
                on_position(pos);
            }
            if inner.opts.durability != Durability::Always && w.buf.len() >= inner.opts.write_buffer
            {
                inner.flush_locked(&mut w)?;
            }
            // Past half of the active segment, have the next one prepared in the background
            // so that the roll does not stall appenders on filling a segment with zeros.
            if (w.active.end() + w.buf.len() as u64) * 2 >= w.active.capacity
                && !inner.spare_requested.load(Ordering::Relaxed)
                && !inner.spare_requested.swap(true, Ordering::AcqRel)
            {
                if inner.fs.allows_background_io() {
                    let _ = inner.preparer.send(PrepMsg::Prepare);
                } else {
                    inner.prepare_spare();
                }
            }
            w.appended_end()
        };
        inner.appends.fetch_add(count, Ordering::Relaxed);
        if inner.opts.durability == Durability::Always {
            inner.sync_to(end)?;
        }
        Ok(())
    }

    /// Writes buffered records to the file (no fsync).
    pub fn flush(&self) -> Result<()> {
        let mut w = self.inner.writer.lock();
        self.inner.flush_locked(&mut w)
    }

    /// Writes and fsyncs everything appended so far.
    pub fn sync(&self) -> Result<()> {
        let end = self.inner.writer.lock().appended_end();
        self.inner.sync_to(end)
    }

    /// Reads the record at `pos`.
    pub fn read(&self, pos: u64) -> Result<Record> {
        let inner = &*self.inner;
        if pos >= inner.flushed.load(Ordering::Acquire) {
            self.flush()?;
        }
        // A record inside a segment quarantined whole is damaged data, not a bad position.
        if let Some((_, _, path)) = inner
            .lost_segments
            .iter()
            .find(|(s, e, _)| pos >= *s && pos < *e)
        {
            return Err(Error::Corruption {
                kind: CorruptionKind::BadHeader,
                path: path.clone(),
                offset: 0,
            });
        }
        let seg = inner.segment_for(pos).ok_or(Error::InvalidPosition(pos))?;
        let d = pos - seg.base;
        if d >= seg.end() {
            return Err(Error::InvalidPosition(pos));
        }
        if seg.quarantine_at(d).is_some() {
            return Err(Error::Corruption {
                kind: CorruptionKind::BadRecord,
                path: seg.path.clone(),
                offset: SEGMENT_HEADER_LEN as u64 + d,
            });
        }
        let view = seg.view()?;
        decode_in(&seg, Arc::clone(&view), d, inner.opts.max_record_size)
            .map_err(|_| decode_error(&seg, view.bytes(), d))
    }

    /// Iterates over the records from `pos` (a record's position, the end position, or any
    /// position at or below the log's first position) to the end of the log. A `pos` past
    /// the end is [`Error::InvalidPosition`]; one inside a record yields that error from the
    /// iterator.
    pub fn iter_from(&self, pos: u64) -> Result<LogIter<'_>> {
        self.flush()?;
        if pos > self.end_position() {
            return Err(Error::InvalidPosition(pos));
        }
        Ok(LogIter {
            log: self,
            pos: pos.max(self.first_position()),
            seg: None,
            view: None,
            done: false,
        })
    }

    /// Position of the first record still in the log.
    pub fn first_position(&self) -> u64 {
        self.inner
            .segments
            .read()
            .keys()
            .next()
            .copied()
            .unwrap_or(0)
    }

    /// Position just past the last appended record.
    pub fn end_position(&self) -> u64 {
        self.inner.writer.lock().appended_end()
    }

    /// Position up to which the log is known durable.
    pub fn durable_position(&self) -> u64 {
        self.inner.synced.load(Ordering::Acquire)
    }

    /// Deletes every whole segment that ends at or below `pos` (never the active one).
    /// Returns how many were deleted.
    pub fn delete_below(&self, pos: u64) -> Result<usize> {
        let inner = &*self.inner;
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
            inner
                .fs
                .sync_dir(&inner.dir)
                .map_err(|e| Error::io("fsync dir", &inner.dir, e))?;
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

    /// Drops the log as a crash would: buffered records are discarded, nothing is synced.
    /// The lock is released. For crash-simulation tests.
    #[doc(hidden)]
    pub fn abandon(self) {
        self.inner.writer.lock().buf.clear();
        self.inner.poisoned.store(true, Ordering::Release);
    }

    /// Writes and fsyncs everything, stops the background flusher. Dropping the log does the
    /// same, ignoring errors.
    pub fn close(&self) -> Result<()> {
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

fn decode_in(
    seg: &Segment,
    view: Arc<dyn MappedView>,
    d: u64,
    max_body: usize,
) -> std::result::Result<Record, FrameError> {
    let start = SEGMENT_HEADER_LEN + d as usize;
    // A sealed segment whose lost tail is quarantined has an end past its file's bytes.
    let stop = (SEGMENT_HEADER_LEN + seg.end() as usize).min(view.bytes().len());
    let bytes = view.bytes().get(start..stop).ok_or(FrameError::Short)?;
    let frame = format::decode_frame(bytes, seg.base + d, max_body)?;
    let len = frame.body.len();
    Ok(Record {
        view,
        start: start + FRAME_HEADER_LEN,
        len,
    })
}

/// The error for a record at data offset `d` that does not decode: corruption when a record
/// starts there (recovery verified it, so its bytes changed since), otherwise an invalid
/// position (a position inside a record, or past the data).
fn decode_error(seg: &Segment, bytes: &[u8], d: u64) -> Error {
    if is_record_start(seg, bytes, d) {
        Error::Corruption {
            kind: CorruptionKind::BadRecord,
            path: seg.path.clone(),
            offset: SEGMENT_HEADER_LEN as u64 + d,
        }
    } else {
        Error::InvalidPosition(seg.base + d)
    }
}

/// True when walking the frame lengths of `seg` from its first record lands on data offset
/// `d`. Used only on error paths: it costs one step per record before `d`.
fn is_record_start(seg: &Segment, bytes: &[u8], d: u64) -> bool {
    let end = seg.end();
    if d >= end {
        return false;
    }
    let mut o = 0u64;
    while o < d {
        if let Some((_, e)) = seg.quarantine_at(o) {
            o = e;
            continue;
        }
        let at = SEGMENT_HEADER_LEN + o as usize;
        let Some(head) = bytes.get(at..at + 4) else {
            return false;
        };
        let len = u32::from_le_bytes([head[0], head[1], head[2], head[3]]) as u64;
        if len == 0 {
            return false;
        }
        o += FRAME_HEADER_LEN as u64 + len;
    }
    o == d
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

    fn flush_locked(&self, w: &mut Writer) -> Result<()> {
        if w.buf.is_empty() {
            return Ok(());
        }
        if self.poisoned.load(Ordering::Acquire) {
            return Err(Error::Poisoned);
        }
        let offset = SEGMENT_HEADER_LEN as u64 + w.active.end();
        if let Err(e) = w.active.file.write_at(&w.buf, offset) {
            return self.poison(Error::io("write", &w.active.path, e));
        }
        self.writes.fetch_add(1, Ordering::Relaxed);
        let new_end = w.active.end() + w.buf.len() as u64;
        w.active.set_end(new_end);
        w.buf.clear();
        self.flushed
            .store(w.active.end_position(), Ordering::Release);
        Ok(())
    }

    /// Prepares the spare for the next roll, unless one is ready.
    fn prepare_spare(&self) {
        if self.spare.lock().is_some() {
            return;
        }
        // A failure here is harmless: the roll then creates the segment itself and
        // reports any error to the appender.
        if let Ok(file) = segment::prepare_spare(
            self.fs.as_ref(),
            &self.dir,
            self.opts.segment_size,
            self.opts.preallocate,
        ) {
            *self.spare.lock() = Some(file);
        }
    }

    /// Seals the active segment (write, fsync) and starts a new one after it.
    fn roll(&self, w: &mut Writer) -> Result<()> {
        self.flush_locked(w)?;
        if let Err(e) = w.active.file.sync() {
            return self.poison(Error::io("fsync", &w.active.path, e));
        }
        self.fsyncs.fetch_add(1, Ordering::Relaxed);
        let base = w.active.end_position();
        self.synced.fetch_max(base, Ordering::AcqRel);
        let size = self.opts.segment_size;
        // The spare slot stays locked until the spare is renamed: the preparing thread,
        // finding the slot empty, creates a new spare under the same name, and would
        // otherwise truncate the file being installed (losing its header, or giving it the
        // next segment's header at the next roll).
        let mut slot = self.spare.lock();
        let spare = slot.take();
        self.spare_requested.store(false, Ordering::Release);
        let installed = spare.filter(|f| {
            segment::install_spare(self.fs.as_ref(), &self.dir, f.as_ref(), base).is_ok()
        });
        drop(slot);
        let file = match installed {
            Some(f) => f,
            // No spare ready (or installing it failed): create the segment here.
            None => match segment::create(
                self.fs.as_ref(),
                &self.dir,
                base,
                size,
                self.opts.preallocate,
            ) {
                Ok(f) => f,
                Err(e) => {
                    // A failure after the new segment got its name (its directory sync
                    // failed) may leave it on disk for good: appending on to the old segment
                    // would then run past its base, and the two would overlap at the next
                    // open. Refuse writes until a reopen. A failure before (no space for the
                    // file, say) leaves no segment behind, and appends may go on.
                    let name = segment::segment_name(base);
                    let named = self.fs.list(&self.dir).map_or(true, |n| n.contains(&name));
                    return if named { self.poison(e) } else { Err(e) };
                }
            },
        };
        let seg = Arc::new(Segment::new(
            base,
            self.dir.join(segment::segment_name(base)),
            file,
            size - SEGMENT_HEADER_LEN as u64,
            0,
            Vec::new(),
        )?);
        self.segments.write().insert(base, Arc::clone(&seg));
        w.active = seg;
        Ok(())
    }

    /// Returns once everything up to `target` is durable, leading an fsync or waiting for
    /// the one under way (group commit).
    fn sync_to(&self, target: u64) -> Result<()> {
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

fn spawn_flusher(
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

fn spawn_preparer(
    inner: Weak<Inner>,
    requests: crossbeam_channel::Receiver<PrepMsg>,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("deadletter-prealloc".into())
        .spawn(move || {
            while let Ok(PrepMsg::Prepare) = requests.recv() {
                let Some(inner) = inner.upgrade() else { return };
                inner.prepare_spare();
            }
        })
}

/// Iterator over records from a position; see [`Log::iter_from`].
pub struct LogIter<'a> {
    log: &'a Log,
    pos: u64,
    seg: Option<Arc<Segment>>,
    view: Option<Arc<dyn MappedView>>,
    done: bool,
}

impl Iterator for LogIter<'_> {
    type Item = Result<(u64, Record)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let inner = &*self.log.inner;
        loop {
            let seg = match &self.seg {
                Some(s) if self.pos >= s.base && self.pos < s.base + s.capacity => Arc::clone(s),
                _ => {
                    let s = inner.segment_for(self.pos)?;
                    self.view = None;
                    self.seg = Some(Arc::clone(&s));
                    s
                }
            };
            let d = self.pos - seg.base;
            if d >= seg.end() {
                let next = inner
                    .segments
                    .read()
                    .range(seg.base + 1..)
                    .next()
                    .map(|(_, s)| Arc::clone(s));
                match next {
                    Some(n) => {
                        self.pos = n.base;
                        self.seg = Some(n);
                        self.view = None;
                        continue;
                    }
                    _ => return None,
                }
            }
            if let Some((_, e)) = seg.quarantine_at(d) {
                self.pos = seg.base + e;
                continue;
            }
            // A snapshot view is checked by the segment, which knows what it covers.
            let view = match &self.view {
                Some(v) if v.is_live() => Arc::clone(v),
                _ => match seg.view() {
                    Ok(v) => {
                        self.view = Some(Arc::clone(&v));
                        v
                    }
                    Err(e) => {
                        self.done = true;
                        return Some(Err(e));
                    }
                },
            };
            return match decode_in(&seg, Arc::clone(&view), d, inner.opts.max_record_size) {
                Ok(rec) => {
                    let pos = self.pos;
                    self.pos += format::frame_len(rec.len) as u64;
                    Some(Ok((pos, rec)))
                }
                Err(_) => {
                    self.done = true;
                    Some(Err(decode_error(&seg, view.bytes(), d)))
                }
            };
        }
    }
}

/// Scans the directory, verifies every segment and returns them ready to use.
fn recover(
    fs: &dyn Vfs,
    dir: &Path,
    opts: &LogOptions,
) -> Result<(BTreeMap<u64, Arc<Segment>>, RecoveryReport)> {
    let mut report = RecoveryReport::default();
    let names = fs.list(dir).map_err(|e| Error::io("list", dir, e))?;
    let mut bases = Vec::new();
    for name in names {
        if let Some(base) = segment::parse_segment_name(&name) {
            bases.push(base);
        } else if segment::parse_temp_name(&name).is_some() || name == segment::SPARE_NAME {
            let path = dir.join(&name);
            fs.remove(&path)
                .map_err(|e| Error::io("remove", &path, e))?;
            report.removed_temp_files.push(name);
        } else if name != LOCK_FILE {
            report.ignored_files.push(name);
        }
    }
    bases.sort_unstable();
    let strict = opts.recovery == RecoveryMode::Strict;
    let corrupt = |kind, path: &Path, offset| Error::Corruption {
        kind,
        path: path.to_path_buf(),
        offset,
    };
    let header_len = SEGMENT_HEADER_LEN as u64;
    let mut segments = BTreeMap::new();
    // Lowest position a new active segment may start at.
    let mut next_free = 0u64;
    for (i, &base) in bases.iter().enumerate() {
        let is_last = i + 1 == bases.len();
        let path = dir.join(segment::segment_name(base));
        let file = fs
            .open(&path, false)
            .map_err(|e| Error::io("open", &path, e))?;
        let len = file.len().map_err(|e| Error::io("stat", &path, e))?;
        let view = file.map().map_err(|e| Error::io("mmap", &path, e))?;
        let bytes = view.bytes();
        if is_last && bytes.iter().all(|&b| b == 0) {
            // A never-written last segment holds nothing: remove it.
            drop(view);
            fs.remove(&path)
                .map_err(|e| Error::io("remove", &path, e))?;
            report
                .removed_empty_segments
                .push(segment::segment_name(base));
            continue;
        }
        match format::decode_segment_header(bytes) {
            // Positions stay below 2^63, so position arithmetic can never overflow.
            Ok(h) if h.base == base && base <= MAX_BASE => {}
            _ => {
                // Quarantine cannot step past a damaged file that claims positions beyond
                // the largest base: the log could not continue after it.
                if strict || base > MAX_BASE {
                    return Err(corrupt(CorruptionKind::BadHeader, &path, 0));
                }
                let end = bases
                    .get(i + 1)
                    .copied()
                    .unwrap_or(base + len.saturating_sub(header_len));
                // Never reuse the damaged file's name for a new segment.
                next_free = next_free.max(end).max(base + 1);
                report.quarantined.push(QuarantinedRange {
                    path,
                    kind: CorruptionKind::BadHeader,
                    start: base,
                    end,
                });
                continue;
            }
        }
        let data = &bytes[SEGMENT_HEADER_LEN..];
        let scan = segment::scan(data, base, opts.max_record_size, !is_last);
        let mut quarantined = Vec::new();
        for &(s, e) in &scan.damaged {
            if strict {
                return Err(corrupt(CorruptionKind::BadRecord, &path, header_len + s));
            }
            quarantined.push((s, e));
            report.quarantined.push(QuarantinedRange {
                path: path.clone(),
                kind: CorruptionKind::BadRecord,
                start: base + s,
                end: base + e,
            });
        }
        report.records += scan.records;
        let mut end = scan.end;
        if let Some(&next) = bases.get(i + 1) {
            let expected = next.saturating_sub(base);
            if end != expected {
                // Records running past the next segment's base: the sequence overlaps. A file
                // whose data runs into its end, shorter than both its successor implies and a
                // full segment: it was cut. A bad frame ending the data: damage. Data that
                // ends cleanly before the successor's base: a segment between is missing.
                let kind = if end > expected {
                    CorruptionKind::MissingSegment
                } else if scan.reaches_eof && len < header_len + expected && len < opts.segment_size
                {
                    CorruptionKind::TruncatedSegment
                } else if scan.torn_at.is_some() {
                    CorruptionKind::BadRecord
                } else {
                    CorruptionKind::MissingSegment
                };
                if strict {
                    return Err(corrupt(kind, &path, header_len + end.min(expected)));
                }
                if end < expected {
                    quarantined.push((end, expected));
                }
                report.quarantined.push(QuarantinedRange {
                    path: path.clone(),
                    kind,
                    start: base + end.min(expected),
                    end: base + end.max(expected),
                });
                end = expected;
            }
            drop(view);
            let capacity = len.saturating_sub(header_len).max(end);
            let seg = Segment::new(base, path, file, capacity, end, quarantined)?;
            segments.insert(base, Arc::new(seg));
            continue;
        }
        // The last segment: cut a torn tail, make sure it has room, sync what it holds.
        drop(view);
        if let Some(torn) = scan.torn_at {
            let at = header_len + torn;
            file.set_len(at)
                .map_err(|e| Error::io("truncate", &path, e))?;
            report.torn_tail = Some(TornTail {
                path: path.clone(),
                offset: at,
                dropped_bytes: scan.torn_bytes,
            });
            end = torn;
        }
        let size = opts.segment_size.max(len);
        let current = file.len().map_err(|e| Error::io("stat", &path, e))?;
        if current < size {
            let grown = if opts.preallocate {
                segment::write_zeros(file.as_ref(), current, size)
            } else {
                file.set_len(size)
            };
            grown.map_err(|e| Error::io("preallocate", &path, e))?;
        }
        file.sync().map_err(|e| Error::io("fsync", &path, e))?;
        let seg = Segment::new(base, path, file, size - header_len, end, quarantined)?;
        segments.insert(base, Arc::new(seg));
    }
    report.segments = segments.len();
    // Make the directory durable as it is now. A name an earlier process created or renamed
    // (a segment, a checkpoint slot) whose directory sync failed, or that died before it, is
    // in the listing but could still vanish at a power cut: nothing may be appended to it or
    // relied on until it is durable.
    fs.sync_dir(dir)
        .map_err(|e| Error::io("fsync dir", dir, e))?;
    let needs_active = match segments.values().next_back() {
        None => true,
        Some(last) => last.base != *bases.last().unwrap_or(&u64::MAX),
    };
    if needs_active {
        let base = segments
            .values()
            .next_back()
            .map(|s| s.end_position())
            .unwrap_or(0)
            .max(next_free);
        let file = segment::create(fs, dir, base, opts.segment_size, opts.preallocate)?;
        let seg = Segment::new(
            base,
            dir.join(segment::segment_name(base)),
            file,
            opts.segment_size - header_len,
            0,
            Vec::new(),
        )?;
        segments.insert(base, Arc::new(seg));
        report.segments = segments.len();
    }
    Ok((segments, report))
}
