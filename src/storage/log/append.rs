//! Appending: frames go into the writer's buffer (positions are assigned there, in
//! order), which is written with one `pwrite` per commit, or when it fills, or when a reader
//! needs it. A full segment is sealed (written, fsynced) and the next one started, from a
//! spare segment a background thread prepared ahead of time when there is one.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;

use super::{Durability, Inner, Log, Writer};
use crate::error::{Error, Result};
use crate::storage::format::{self, SegmentHeader};
use crate::storage::segment::{self, Segment};
use crate::storage::tail_hint::HintKeeper;

/// Messages to the spare-preparing thread.
pub(super) enum PrepMsg {
    /// Prepare a spare of this many bytes.
    Prepare(u64),
    Stop,
}

/// How [`Log::append_each_with`] takes a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendRules {
    /// The batch may go into the segment's reserve (records that carry no payload).
    pub may_use_reserve: bool,
    /// The batch holds copies of records the store already holds (compaction's): bounded
    /// by what a segment holds, not by the record limit for new records.
    pub copies: bool,
}

impl Log {
    /// Appends one record; returns its position.
    #[cfg(feature = "sim")]
    pub fn append(&self, body: &[u8]) -> Result<u64> {
        let mut pos = 0;
        self.append_each(std::iter::once(body), |p| pos = p)?;
        Ok(pos)
    }

    /// Appends records as one batch sharing one write and one fsync; returns their positions.
    #[cfg(feature = "sim")]
    pub fn append_batch<B: AsRef<[u8]>>(&self, bodies: &[B]) -> Result<Vec<u64>> {
        let mut positions = Vec::with_capacity(bodies.len());
        self.append_each(bodies.iter().map(|b| b.as_ref()), |p| positions.push(p))?;
        Ok(positions)
    }

    /// Appends records as one batch, calling `on_position` with each record's position.
    #[cfg(feature = "sim")]
    pub fn append_each<'a>(
        &self,
        bodies: impl Iterator<Item = &'a [u8]> + Clone,
        on_position: impl FnMut(u64),
    ) -> Result<()> {
        let rules = AppendRules {
            may_use_reserve: true,
            copies: false,
        };
        self.append_each_with(bodies, on_position, rules)
    }

    /// Like [`Log::append_each`]; unless `rules.may_use_reserve`, the batch does not go
    /// into the last [`LogOptions::reserve`](super::LogOptions::reserve) bytes of a segment
    /// (it rolls first). With `rules.copies` the bodies are copies of records the store
    /// already holds (compaction's relocations): they are bounded by what a new segment can
    /// hold, not by [`LogOptions::max_record_size`](super::LogOptions::max_record_size),
    /// which limits what is new (a record written by a process with a larger limit is
    /// carried forward by one with a smaller one).
    pub fn append_each_with<'a>(
        &self,
        bodies: impl Iterator<Item = &'a [u8]> + Clone,
        mut on_position: impl FnMut(u64),
        rules: AppendRules,
    ) -> Result<()> {
        let may_use_reserve = rules.may_use_reserve;
        let inner = &*self.inner;
        let opts = &inner.opts;
        if inner.read_only {
            return Err(Error::ReadOnly {
                path: inner.dir.clone(),
            });
        }
        if inner.poisoned.load(Ordering::Acquire) {
            return Err(Error::Poisoned);
        }
        let mut total = 0u64;
        let mut count = 0u64;
        for body in bodies.clone() {
            if body.is_empty() {
                return Err(Error::EmptyRecord);
            }
            let max = if rules.copies {
                let header = format::header_len(opts.format_version);
                format::max_body_in(opts.segment_size, header)
            } else {
                opts.max_record_size
            };
            if body.len() > max {
                return Err(Error::TooLarge {
                    size: body.len(),
                    max,
                });
            }
            total += format::frame_len(body.len()) as u64;
            count += 1;
        }
        // What the largest segment takes: a batch up to that goes into one segment.
        let most = opts.room_in(opts.segment_size, may_use_reserve);
        let end = {
            let mut w = inner.writer.lock();
            let used = w.active.end() + w.buf.len() as u64;
            let limit = inner.room(&w.active, may_use_reserve);
            if used + total > limit && total <= most {
                if used > 0 {
                    let size = opts.next_segment_size(w.active.size(), total, may_use_reserve);
                    inner.roll(&mut w, size)?;
                } else if w.active.size() < opts.segment_size {
                    // An empty segment too small for the batch (segments start small): a
                    // larger one takes its place, under its name.
                    let size = opts.next_segment_size(w.active.size() / 2, total, may_use_reserve);
                    inner.replace_empty(&mut w, size)?;
                }
            }
            let start_buf = w.buf.len();
            let start_base = w.active.base;
            for (appended, body) in bodies.enumerate() {
                let flen = format::frame_len(body.len()) as u64;
                let used = w.active.end() + w.buf.len() as u64;
                // An empty segment takes any record: the batch's first one was given a
                // segment that holds it above, and a roll below sizes the next one for the
                // record that does not fit (the options say the largest holds any).
                if used > 0 && used + flen > inner.room(&w.active, may_use_reserve) {
                    let size = opts.next_segment_size(w.active.size(), flen, may_use_reserve);
                    if let Err(e) = inner.roll(&mut w, size) {
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
                let synced = inner.commit.synced();
                format::encode_frame(&mut w.buf, pos, body, synced);
                on_position(pos);
            }
            if opts.durability != Durability::Always && w.buf.len() >= opts.write_buffer {
                inner.flush_locked(&mut w)?;
            }
            // Past half of the active segment, have the next one prepared in the background
            // (created, allocated, synced) so that the roll does less on the appenders' path.
            if (w.active.end() + w.buf.len() as u64) * 2 >= w.active.capacity
                && !inner.spare_requested.load(Ordering::Relaxed)
                && !inner.spare_requested.swap(true, Ordering::AcqRel)
            {
                let size = opts.next_segment_size(w.active.size(), 0, true);
                if inner.fs.allows_background_io() {
                    let _ = inner.preparer.send(PrepMsg::Prepare(size));
                } else {
                    inner.prepare_spare(size);
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

    /// Starts a segment of the first size ([`LogOptions::start_size`](super::LogOptions::start_size)) to append to, unless
    /// the active segment is one already: the active one is sealed and a small one starts
    /// after it (or, when it holds no record, a small one takes its place). For compaction,
    /// once nothing before the log's end is needed: the segments before the new one can then
    /// all be deleted, and the store is back to its starting size. Returns true when it
    /// started one.
    pub fn restart_small(&self) -> Result<bool> {
        let inner = &*self.inner;
        if inner.read_only {
            return Err(Error::ReadOnly {
                path: inner.dir.clone(),
            });
        }
        if inner.poisoned.load(Ordering::Acquire) {
            return Err(Error::Poisoned);
        }
        let size = inner.opts.start_size();
        let mut w = inner.writer.lock();
        if w.active.size() <= size {
            return Ok(false);
        }
        if w.active.end() == 0 && w.buf.is_empty() {
            inner.replace_empty(&mut w, size)?;
        } else {
            inner.roll(&mut w, size)?;
        }
        Ok(true)
    }

    /// Writes buffered records to the file (no fsync).
    pub fn flush(&self) -> Result<()> {
        let mut w = self.inner.writer.lock();
        self.inner.flush_locked(&mut w)
    }
}

impl Inner {
    pub(super) fn flush_locked(&self, w: &mut Writer) -> Result<()> {
        if w.buf.is_empty() {
            return Ok(());
        }
        if self.poisoned.load(Ordering::Acquire) {
            return Err(Error::Poisoned);
        }
        // Nothing is written past the active segment's tail hint (storage/tail_hint.rs).
        let new_end = w.active.end() + w.buf.len() as u64;
        let (base, capacity) = (w.active.base, w.active.capacity);
        if let Err(e) = w
            .hint
            .make_room(self.fs.as_ref(), &self.dir, base, new_end, capacity)
        {
            return self.poison(e);
        }
        let offset = w.active.header_len + w.active.end();
        if let Err(e) = w.active.file.write_at(&w.buf, offset) {
            return self.poison(Error::io("write", &w.active.path, e));
        }
        self.writes.fetch_add(1, Ordering::Relaxed);
        w.active.set_end(new_end);
        w.buf.clear();
        self.flushed
            .store(w.active.end_position(), Ordering::Release);
        Ok(())
    }

    /// The bytes records may fill in `seg` (its reserve too when `may_use_reserve`).
    fn room(&self, seg: &Segment, may_use_reserve: bool) -> u64 {
        let reserve = if may_use_reserve {
            0
        } else {
            self.opts.reserve_in(seg.size())
        };
        seg.capacity.saturating_sub(reserve)
    }

    /// Prepares a spare of `size` bytes for the next roll, unless one is ready.
    pub(super) fn prepare_spare(&self, size: u64) {
        if self.spare.lock().is_some() {
            return;
        }
        // A failure here is harmless: the roll then creates the segment itself and
        // reports any error to the appender.
        if let Ok(file) =
            segment::prepare_spare(self.fs.as_ref(), &self.dir, size, self.opts.preallocate)
        {
            *self.spare.lock() = Some((file, size));
        }
    }

    /// Replaces the active segment, which holds no record, by one of `size` bytes under the
    /// same name (its base), numbered one more: for a batch the small segment could not
    /// take. [`segment::create`] renames the new file over it, so a crash leaves the old or
    /// the new one, both empty; the tail hint, whose name the creation writes through, is
    /// written again for the new one at the next write.
    pub(super) fn replace_empty(&self, w: &mut Writer, size: u64) -> Result<()> {
        debug_assert!(w.active.end() == 0 && w.buf.is_empty());
        let base = w.active.base;
        let header = SegmentHeader::new(base, self.opts.format_version, size)
            .identified(self.store_id, w.active.seq + 1);
        let file = match segment::create(
            self.fs.as_ref(),
            &self.dir,
            header,
            size,
            self.opts.preallocate,
        ) {
            Ok(f) => f,
            Err(e) => {
                // The creation wrote through the hint's name: the hint is gone or torn (an
                // open does not use it). The empty segment needs none until a write.
                w.hint = HintKeeper::new(base, None);
                // No space for the new file's blocks: it never got the name, and the empty
                // segment stays as it was. Anything else may have come after the rename
                // (its directory sync failed): the segment on disk may then be the new
                // one, which this log does not hold.
                if matches!(e, Error::DiskFull { .. }) {
                    self.out_of_space.store(true, Ordering::Release);
                    return Err(e);
                }
                return self.poison(e);
            }
        };
        let seg = match Segment::new(
            base,
            header.version,
            header.seq,
            self.dir.join(segment::segment_name(base)),
            file,
            size - header.len() as u64,
            0,
            Vec::new(),
        ) {
            Ok(seg) => Arc::new(seg),
            Err(e) => return self.poison(e),
        };
        self.segments.write().insert(base, Arc::clone(&seg));
        w.active = seg;
        w.hint = HintKeeper::new(base, None);
        Ok(())
    }

    /// Seals the active segment (write, fsync) and starts a new one of `size` bytes after
    /// it.
    pub(super) fn roll(&self, w: &mut Writer, size: u64) -> Result<()> {
        self.flush_locked(w)?;
        if let Err(e) = w.active.file.sync() {
            return self.poison(Error::io("fsync", &w.active.path, e));
        }
        self.fsyncs.fetch_add(1, Ordering::Relaxed);
        let base = w.active.end_position();
        self.commit.advance(base);
        // The spare slot stays locked until the spare is renamed: the preparing thread,
        // finding the slot empty, creates a new spare under the same name, and would
        // otherwise truncate the file being installed (losing its header, or giving it the
        // next segment's header at the next roll).
        let mut slot = self.spare.lock();
        let spare = slot.take();
        self.spare_requested.store(false, Ordering::Release);
        // The next segment of this store: its id, the next sequence number.
        let header = SegmentHeader::new(base, self.opts.format_version, size)
            .identified(self.store_id, w.active.seq + 1);
        // A spare of another size (the roll needed more room than the one asked for, or
        // starts small again) is not used, and removed: its blocks are allocated.
        let installed = match spare {
            Some((f, len)) if len == size => {
                segment::install_spare(self.fs.as_ref(), &self.dir, f.as_ref(), header)
                    .is_ok()
                    .then_some(f)
            }
            Some(_) => {
                // Best effort: recovery removes a leftover spare anyway.
                let _ = self.fs.remove(&self.dir.join(segment::SPARE_NAME));
                None
            }
            None => None,
        };
        drop(slot);
        let file = match installed {
            Some(f) => f,
            // No spare ready (or installing it failed): create the segment here.
            None => match segment::create(
                self.fs.as_ref(),
                &self.dir,
                header,
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
                    if matches!(e, Error::DiskFull { .. }) {
                        self.out_of_space.store(true, Ordering::Release);
                    }
                    let name = segment::segment_name(base);
                    let named = self.fs.list(&self.dir).map_or(true, |n| n.contains(&name));
                    return if named { self.poison(e) } else { Err(e) };
                }
            },
        };
        let seg = match Segment::new(
            base,
            header.version,
            header.seq,
            self.dir.join(segment::segment_name(base)),
            file,
            size - header.len() as u64,
            0,
            Vec::new(),
        ) {
            Ok(seg) => Arc::new(seg),
            // The new segment has its name (a read error mapping it, say): appending on to
            // the old one would run past its base, as above.
            Err(e) => return self.poison(e),
        };
        self.segments.write().insert(base, Arc::clone(&seg));
        w.active = seg;
        self.out_of_space.store(false, Ordering::Release);
        Ok(())
    }
}

pub(super) fn spawn_preparer(
    inner: Weak<Inner>,
    requests: crossbeam_channel::Receiver<PrepMsg>,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("deadletter-prealloc".into())
        .spawn(move || {
            while let Ok(PrepMsg::Prepare(size)) = requests.recv() {
                let Some(inner) = inner.upgrade() else { return };
                inner.prepare_spare(size);
            }
        })
}
