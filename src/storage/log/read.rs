//! Reading: one record by position, many records in a row ([`Reader`]), or every record
//! from a position on. Records are borrowed from the segment's read view; every byte
//! returned passed its checksum. Only bytes below the segment's written end are ever asked
//! of a view, and a record hands out exactly its body's range (see `storage/mmap.rs` for
//! why that keeps live maps sound while appends write to the same file).

use std::ops::{Deref, Range};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::Log;
use crate::error::{CorruptionKind, Error, Result};
use crate::storage::format::{self, FrameError, FRAME_HEADER_LEN};
use crate::storage::segment::Segment;
use crate::storage::vfs::MappedView;

/// A record read from the log: its body, borrowed from the segment's memory map (a slice
/// of exactly the body, never of the whole map), and the format version of the segment it
/// is in (the version its body is decoded by).
#[derive(Clone)]
pub struct Record {
    view: Arc<dyn MappedView>,
    start: usize,
    len: usize,
    version: u16,
}

impl Record {
    /// The format version the record's body was written in.
    pub fn version(&self) -> u16 {
        self.version
    }
}

impl Deref for Record {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // The range was checked when the record was decoded; a view never shrinks.
        self.view
            .range(self.start, self.start + self.len)
            .unwrap_or_default()
    }
}

impl std::fmt::Debug for Record {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Record")
            .field("len", &self.len)
            .field("version", &self.version)
            .finish()
    }
}

impl Log {
    /// Reads the record at `pos`.
    pub fn read(&self, pos: u64) -> Result<Record> {
        let mut seg = None;
        let d = self.locate(pos, &mut seg)?;
        let seg = seg.ok_or(Error::InvalidPosition(pos))?;
        let view = seg.view()?;
        decode_in(&seg, Arc::clone(&view), d).map_err(|_| decode_error(&seg, view.as_ref(), d))
    }

    /// The offset in its segment's data of the record at `pos`, with the checks every read
    /// makes first: flushed, not in a lost segment or a quarantined range, below the
    /// segment's written end. `seg` is left holding the record's segment: kept when it
    /// already does (no lock taken, no count changed), looked up otherwise.
    fn locate(&self, pos: u64, seg: &mut Option<Arc<Segment>>) -> Result<u64> {
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
            return Err(Error::corrupt_file(CorruptionKind::BadHeader, path, 0));
        }
        if !seg.as_ref().is_some_and(|s| holds(s, pos)) {
            *seg = Some(inner.segment_for(pos).ok_or(Error::InvalidPosition(pos))?);
        }
        let seg = seg.as_ref().ok_or(Error::InvalidPosition(pos))?;
        let d = pos - seg.base;
        if d >= seg.end() {
            return Err(Error::InvalidPosition(pos));
        }
        if seg.quarantine_at(d).is_some() {
            return Err(bad_record(seg, d));
        }
        Ok(d)
    }

    /// A reader for many records in a row (see [`Reader`]).
    pub fn reader(&self) -> Reader<'_> {
        Reader {
            log: self,
            segs: [None, None],
            views: [None, None],
        }
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
}

/// Reads records one after another, keeping the segments and read views of the last
/// records read: a read in a kept segment takes no lock and changes no reference count,
/// where [`Log::read`] takes the segment table's lock and the segment's, and clones both
/// (about half the cost of reading a small record). Two are kept, the most recent first:
/// a DLQ listing alternates between payload records and the later records that
/// dead-lettered them, often in different segments. The same checks and errors as
/// [`Log::read`], except that a kept segment compaction has removed since still reads (a
/// position is never reused, so its records are what they were); a body is borrowed from
/// the reader until its next read.
pub struct Reader<'a> {
    log: &'a Log,
    segs: [Option<Arc<Segment>>; 2],
    views: [Option<Arc<dyn MappedView>>; 2],
}

impl Reader<'_> {
    /// The body of the record at `pos`, and the format version it was written in.
    pub fn read(&mut self, pos: u64) -> Result<(u16, &[u8])> {
        // The slot of the segment holding `pos` first; on a miss the older slot is reused.
        let held = |s: &Option<Arc<Segment>>| s.as_ref().is_some_and(|s| holds(s, pos));
        if !held(&self.segs[0]) {
            self.segs.swap(0, 1);
            self.views.swap(0, 1);
        }
        let base = self.segs[0].as_ref().map(|s| s.base);
        let d = self.log.locate(pos, &mut self.segs[0])?;
        let seg = self.segs[0].as_ref().ok_or(Error::InvalidPosition(pos))?;
        if base != Some(seg.base) {
            self.views[0] = None;
        }
        // A kept view that is a snapshot may end before the record: map again then (a live
        // one shows every byte written).
        let held = self.views[0].as_ref();
        let kept = held.and_then(|v| frame_in(seg, v.as_ref(), d).ok());
        let range = match kept {
            Some(range) => range,
            None => {
                let view = seg.view()?;
                let range = frame_in(seg, view.as_ref(), d)
                    .map_err(|_| decode_error(seg, view.as_ref(), d))?;
                self.views[0] = Some(view);
                range
            }
        };
        let version = seg.version;
        let body = self.views[0]
            .as_ref()
            .and_then(|v| v.range(range.start, range.end))
            .ok_or(Error::InvalidPosition(pos))?;
        Ok((version, body))
    }
}

/// True when `pos` is below the written end of `seg` (the next segment may start before
/// its capacity).
fn holds(seg: &Segment, pos: u64) -> bool {
    pos >= seg.base && pos - seg.base < seg.end()
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
                    .map(|(_, s)| Arc::clone(s))?;
                self.pos = next.base;
                self.seg = Some(next);
                self.view = None;
                continue;
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
            return match decode_in(&seg, Arc::clone(&view), d) {
                Ok(rec) => {
                    let pos = self.pos;
                    self.pos += format::frame_len(rec.len) as u64;
                    Some(Ok((pos, rec)))
                }
                Err(_) => {
                    self.done = true;
                    Some(Err(decode_error(&seg, view.as_ref(), d)))
                }
            };
        }
    }
}

fn decode_in(
    seg: &Segment,
    view: Arc<dyn MappedView>,
    d: u64,
) -> std::result::Result<Record, FrameError> {
    let range = frame_in(seg, view.as_ref(), d)?;
    Ok(Record {
        view,
        start: range.start,
        len: range.len(),
        version: seg.version,
    })
}

/// Where the body of the record at data offset `d` of `seg` lies in `view`, its checksum
/// checked. Its length is bounded by the segment's own size, never by the opener's record
/// limit (a writer with a larger one may have written it).
fn frame_in(
    seg: &Segment,
    view: &dyn MappedView,
    d: u64,
) -> std::result::Result<Range<usize>, FrameError> {
    let header = seg.header_len as usize;
    let start = header + d as usize;
    // A sealed segment whose lost tail is quarantined has an end past its file's bytes.
    let stop = (header + seg.end() as usize).min(view.len());
    let bytes = view.range(start, stop).ok_or(FrameError::Short)?;
    let frame = format::decode_frame(bytes, seg.base + d, seg.max_body())?;
    let body = start + FRAME_HEADER_LEN;
    Ok(body..body + frame.body.len())
}

/// The error for a record at data offset `d` that does not decode: corruption when a record
/// starts there (recovery verified it, so its bytes changed since), otherwise an invalid
/// position (a position inside a record, or past the data).
fn decode_error(seg: &Segment, view: &dyn MappedView, d: u64) -> Error {
    if is_record_start(seg, view, d) {
        bad_record(seg, d)
    } else {
        Error::InvalidPosition(seg.base + d)
    }
}

/// A damaged record at data offset `d` of `seg`.
fn bad_record(seg: &Segment, d: u64) -> Error {
    let offset = seg.header_len + d;
    Error::corrupt_file(CorruptionKind::BadRecord, &seg.path, offset)
}

/// True when walking the frame lengths of `seg` from its first record lands on data offset
/// `d`. Used only on error paths: it costs one step per record before `d`.
fn is_record_start(seg: &Segment, view: &dyn MappedView, d: u64) -> bool {
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
        // Never past the written end: bytes there may be being written.
        if o + 4 > end {
            return false;
        }
        let at = (seg.header_len + o) as usize;
        let Some(head) = view.range(at, at + 4) else {
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
