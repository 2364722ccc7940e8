//! One segment file: its creation, its read view, and the recovery scan of its records.
//!
//! A segment is a file named `{base:020}.seg` holding a [`SegmentHeader`] and then records
//! back to back. Data offsets count from the end of the header; the log position of a record
//! is `base + data offset`. Invariants:
//! - a segment is created under a temporary name, given its header and its blocks
//!   (allocated, never written: [`VfsFile::allocate`]), synced, renamed into place and its
//!   directory synced, so a `.seg` name always has a durable header;
//! - `end` only grows while the segment is active, and only after the bytes below it were
//!   written; readers never look at bytes at or beyond `end`;
//! - [`scan`] never counts a record whose checksum fails.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::RwLock;

use crate::error::{IoContext, Result};
use crate::storage::format::{self, FrameError, SegmentHeader, FRAME_HEADER_LEN};
use crate::storage::vfs::{MappedView, Vfs, VfsFile};

/// File name suffix of a segment.
pub const SEGMENT_SUFFIX: &str = ".seg";
/// File name suffix of a segment being created.
pub const TEMP_SUFFIX: &str = ".tmp";
/// Name of the spare file a background thread allocates ahead of the next roll. It becomes
/// a segment only by being given a header, synced, and renamed (see `install_spare`).
pub const SPARE_NAME: &str = "next-segment.tmp";

/// The file name of the segment starting at `base`.
pub fn segment_name(base: u64) -> String {
    format!("{base:020}{SEGMENT_SUFFIX}")
}

/// The temporary name under which the segment starting at `base` is created.
pub fn temp_name(base: u64) -> String {
    format!("{base:020}{TEMP_SUFFIX}")
}

/// Parses a temporary segment name back into its base position.
pub fn parse_temp_name(name: &str) -> Option<u64> {
    parse_name(name, TEMP_SUFFIX)
}

/// Parses a segment file name back into its base position.
pub fn parse_segment_name(name: &str) -> Option<u64> {
    parse_name(name, SEGMENT_SUFFIX)
}

/// The base of `{base:020}{suffix}`.
fn parse_name(name: &str, suffix: &str) -> Option<u64> {
    let digits = name.strip_suffix(suffix)?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// An open segment.
pub struct Segment {
    /// Log position of its first byte of data.
    pub base: u64,
    /// The format version of its records (from its header).
    pub version: u16,
    /// The length of its header (its version's): data offset 0 is this file offset.
    pub header_len: u64,
    /// Its sequence number in the store (from a version-2 header; 0 in version 1's).
    pub seq: u64,
    /// Its path.
    pub path: PathBuf,
    /// Its file handle.
    pub file: Arc<dyn VfsFile>,
    /// The latest view, and the data end it was taken at (a snapshot view shows nothing
    /// written after it was taken).
    view: RwLock<(Arc<dyn MappedView>, u64)>,
    end: AtomicU64,
    /// Bytes available for records (file size minus the header).
    pub capacity: u64,
    /// Data ranges `[start, end)` that recovery quarantined (only with the quarantine option).
    pub quarantined: Vec<(u64, u64)>,
}

impl Segment {
    /// Wraps an opened file whose records, in format `version`, end at data offset `end`;
    /// `seq` is its sequence number in the store (0 for a version-1 segment).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        base: u64,
        version: u16,
        seq: u64,
        path: PathBuf,
        file: Arc<dyn VfsFile>,
        capacity: u64,
        end: u64,
        quarantined: Vec<(u64, u64)>,
    ) -> Result<Self> {
        let view = file.map().io("mmap", &path)?;
        Ok(Segment {
            base,
            version,
            header_len: format::header_len(version) as u64,
            seq,
            path,
            file,
            view: RwLock::new((view, end)),
            end: AtomicU64::new(end),
            capacity,
            quarantined,
        })
    }

    /// Data offset just past the last record written.
    pub fn end(&self) -> u64 {
        self.end.load(Ordering::Acquire)
    }

    /// Log position just past the last record written.
    pub fn end_position(&self) -> u64 {
        self.base + self.end()
    }

    /// Records that data up to `end` has been written.
    pub fn set_end(&self, end: u64) {
        self.end.store(end, Ordering::Release);
    }

    /// A view that covers at least the data written so far.
    ///
    /// A snapshot view (`is_live() == false`) is taken again once data was written past the
    /// end it was taken at. Its length cannot tell: a preallocated file's snapshot is full
    /// length from the start, with zeros where later records go.
    pub fn view(&self) -> Result<Arc<dyn MappedView>> {
        // Read the end before mapping: every byte below it was written before it was set.
        let end = self.end();
        {
            let v = self.view.read();
            if v.0.is_live() || v.1 >= end {
                return Ok(Arc::clone(&v.0));
            }
        }
        let fresh = self.file.map().io("mmap", &self.path)?;
        *self.view.write() = (Arc::clone(&fresh), end);
        Ok(fresh)
    }

    /// The segment's size, header included (its header's `size`, as created).
    pub fn size(&self) -> u64 {
        self.capacity + self.header_len
    }

    /// The longest record body this segment can hold, by its own size: the bound reads
    /// judge its frames by (see [`format::max_body_in`]).
    pub fn max_body(&self) -> usize {
        format::max_body_in(self.capacity + self.header_len, self.header_len as usize)
    }

    /// The quarantined range containing data offset `d`, if any.
    pub fn quarantine_at(&self, d: u64) -> Option<(u64, u64)> {
        self.quarantined
            .iter()
            .copied()
            .find(|&(s, e)| d >= s && d < e)
    }
}

/// Creates a segment file at `dir/{base}.seg`, for records in format `version`, through a
/// temporary name: header, its blocks allocated up to `size` bytes (with `preallocate`;
/// otherwise a sparse length), sync, rename (over a segment of the same name, if there is
/// one), directory sync. Nothing but the header is written: the allocated blocks read as
/// zeros.
pub fn create(
    fs: &dyn Vfs,
    dir: &Path,
    header: SegmentHeader,
    size: u64,
    preallocate: bool,
) -> Result<Arc<dyn VfsFile>> {
    let base = header.base;
    let final_path = dir.join(segment_name(base));
    let temp_path = dir.join(temp_name(base));
    let result = (|| -> Result<Arc<dyn VfsFile>> {
        let file = fs.create(&temp_path).io("create", &temp_path)?;
        file.write_at(&format::encode_segment_header(&header), 0)
            .io("write", &temp_path)?;
        if preallocate {
            file.allocate(size).io("preallocate", &temp_path)?;
        } else {
            file.set_len(size).io("set_len", &temp_path)?;
        }
        file.sync().io("fsync", &temp_path)?;
        fs.rename(&temp_path, &final_path)
            .io("rename", &temp_path)?;
        fs.sync_dir(dir).io("fsync dir", dir)?;
        Ok(file)
    })();
    if result.is_err() {
        // Best effort: a temporary file is removed by the next recovery anyway.
        let _ = fs.remove(&temp_path);
    }
    result
}

/// Prepares the spare file: `size` bytes allocated, never written (a sparse length without
/// `preallocate`), synced. It has no header yet, so until [`install_spare`] renames it, recovery treats it as
/// a leftover temporary file.
pub fn prepare_spare(
    fs: &dyn Vfs,
    dir: &Path,
    size: u64,
    preallocate: bool,
) -> Result<Arc<dyn VfsFile>> {
    let path = dir.join(SPARE_NAME);
    let file = fs.create(&path).io("create", &path)?;
    let filled = if preallocate {
        file.allocate(size)
    } else {
        file.set_len(size)
    };
    filled.io("preallocate", &path)?;
    file.sync().io("fsync", &path)?;
    Ok(file)
}

/// Turns the prepared spare into the segment `header` describes: header, sync, rename,
/// directory sync; the same protocol as [`create`], minus the allocation done beforehand.
pub fn install_spare(
    fs: &dyn Vfs,
    dir: &Path,
    file: &dyn VfsFile,
    header: SegmentHeader,
) -> Result<()> {
    let spare = dir.join(SPARE_NAME);
    file.write_at(&format::encode_segment_header(&header), 0)
        .io("write", &spare)?;
    file.sync().io("fsync", &spare)?;
    fs.rename(&spare, &dir.join(segment_name(header.base)))
        .io("rename", &spare)?;
    fs.sync_dir(dir).io("fsync dir", dir)
}

/// What a recovery scan of one segment's data found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScanResult {
    /// Valid records counted (outside quarantined ranges).
    pub records: u64,
    /// Data offset just past the last valid record.
    pub end: u64,
    /// Data offset of the first bad frame that ends the data, when the data does not end
    /// cleanly in zeros: a torn write if the segment is the last one.
    pub torn_at: Option<u64>,
    /// Bytes from `torn_at` to the last non-zero byte of the data region.
    pub torn_bytes: u64,
    /// Valid frames after `torn_at` that go with the torn tail (written after the torn
    /// frame, never proved durable).
    pub torn_records: u64,
    /// Damaged ranges followed by records that prove the damage hit committed data.
    pub damaged: Vec<(u64, u64)>,
}

/// Scans the record area `data` of a segment starting at log position `base`.
///
/// Rules (documented in `docs/FORMAT.md`):
/// - records decode one after another until a frame fails;
/// - a failing frame followed by nothing but zeros, or by valid frames that were all written
///   before the failing offset was known durable (their `synced_through` is at or below it),
///   ends the data there: a torn write when the segment is the last one;
/// - a failing frame followed by a valid frame whose `synced_through` lies past it, or any
///   failing frame followed by a valid frame in a sealed segment, is damage to committed data:
///   the range up to the next valid frame is reported in `damaged` and scanning resumes there.
pub fn scan(data: &[u8], base: u64, max_body: usize, sealed: bool) -> ScanResult {
    let mut result = ScanResult::default();
    let mut d = 0usize;
    while d < data.len() {
        match format::decode_frame(&data[d..], base.wrapping_add(d as u64), max_body) {
            Ok(frame) => {
                result.records += 1;
                d += frame.len();
                result.end = d as u64;
            }
            Err(err) => {
                let next = find_next_frame(data, base, d + 1, max_body);
                let bad = base.wrapping_add(d as u64);
                match next {
                    Some(next)
                        if sealed
                            || frames_from(data, base, next, max_body)
                                .any(|frame| frame.synced_through > bad) =>
                    {
                        result.damaged.push((d as u64, next as u64));
                        d = next;
                    }
                    _ => {
                        if next.is_some() || err != FrameError::Zero || !is_zero(&data[d..]) {
                            let last_nonzero = data.iter().rposition(|&b| b != 0).unwrap_or(d);
                            result.torn_at = Some(d as u64);
                            result.torn_bytes = (last_nonzero + 1).saturating_sub(d) as u64;
                            result.torn_records = next.map_or(0, |next| {
                                frames_from(data, base, next, max_body).count() as u64
                            });
                        }
                        return result;
                    }
                }
            }
        }
    }
    result
}

/// The common case of [`scan`], read from the file in small pieces instead of mapped
/// whole: records one after another up to an all-zero frame header, and nothing but zeros
/// from there to the end of the `data_len` bytes of data, which start at file offset
/// `header` (the segment's header length). Returns `None` when the data is
/// anything else (a frame that fails, a frame cut by the end of the file, non-zero bytes
/// after the end): the caller then runs [`scan`] over the whole data, which tells a torn
/// tail from damage. At most about 1 MiB is held at a time, whatever the segment's size,
/// so opening a store does not read a preallocated segment into memory.
pub fn scan_clean(
    file: &dyn VfsFile,
    header: u64,
    base: u64,
    data_len: u64,
    max_body: usize,
) -> std::io::Result<Option<ScanResult>> {
    const CHUNK: usize = 1 << 20;
    // Bytes of data from data offset `start`, read so far.
    let mut window: Vec<u8> = Vec::new();
    let mut start = 0u64;
    let mut records = 0u64;
    let mut d = 0u64;
    // Makes `window` cover `[d, d + need)`; false when the data ends first.
    let fill = |window: &mut Vec<u8>, start: &mut u64, d: u64, need: u64| {
        if d - *start > CHUNK as u64 {
            window.drain(..(d - *start) as usize);
            *start = d;
        }
        while *start + (window.len() as u64) < d + need {
            let at = *start + window.len() as u64;
            let n = (data_len - at.min(data_len)).min(CHUNK.max(need as usize) as u64) as usize;
            if n == 0 {
                return Ok(false);
            }
            let old = window.len();
            window.resize(old + n, 0);
            read_exact_at(file, &mut window[old..], header + at)?;
        }
        Ok::<bool, std::io::Error>(true)
    };
    while d < data_len {
        if !fill(
            &mut window,
            &mut start,
            d,
            FRAME_HEADER_LEN.min((data_len - d) as usize) as u64,
        )? {
            return Ok(None);
        }
        let at = (d - start) as usize;
        let head_len = FRAME_HEADER_LEN.min(window.len() - at);
        if window[at..at + head_len].iter().all(|&b| b == 0) {
            break;
        }
        if head_len < FRAME_HEADER_LEN {
            return Ok(None);
        }
        let len = u32::from_le_bytes([window[at], window[at + 1], window[at + 2], window[at + 3]]);
        if len == 0 || len as usize > max_body {
            return Ok(None);
        }
        let flen = format::frame_len(len as usize) as u64;
        if !fill(&mut window, &mut start, d, flen)? {
            return Ok(None);
        }
        let at = (d - start) as usize;
        if format::decode_frame(&window[at..], base.wrapping_add(d), max_body).is_err() {
            return Ok(None);
        }
        records += 1;
        d += flen;
    }
    let end = d;
    // Everything after the end must be zeros.
    let mut buf = vec![0u8; CHUNK];
    let mut at = end;
    while at < data_len {
        let n = ((data_len - at) as usize).min(CHUNK);
        read_exact_at(file, &mut buf[..n], header + at)?;
        if !is_zero(&buf[..n]) {
            return Ok(None);
        }
        at += n as u64;
    }
    Ok(Some(ScanResult {
        records,
        end,
        ..ScanResult::default()
    }))
}

/// True when every byte is zero (eight at a time).
fn is_zero(bytes: &[u8]) -> bool {
    let (words, rest) = bytes.split_at(bytes.len() / 8 * 8);
    words
        .chunks_exact(8)
        .all(|w| u64::from_ne_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]) == 0)
        && rest.iter().all(|&b| b == 0)
}

/// Fills `buf` from `offset` (an error if the file ends first).
pub(crate) fn read_exact_at(
    file: &dyn VfsFile,
    mut buf: &mut [u8],
    mut offset: u64,
) -> std::io::Result<()> {
    while !buf.is_empty() {
        match file.read_at(buf, offset)? {
            0 => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            n => {
                buf = &mut buf[n..];
                offset += n as u64;
            }
        }
    }
    Ok(())
}

/// Finds the first offset at or after `from` where a valid frame starts.
fn find_next_frame(data: &[u8], base: u64, from: usize, max_body: usize) -> Option<usize> {
    let mut off = from;
    while off + FRAME_HEADER_LEN <= data.len() {
        // A frame starts with a non-zero length, so its first non-zero byte is in its first
        // four bytes: skip runs of zeros quickly.
        if data[off] == 0 {
            let nz = data[off..].iter().position(|&b| b != 0)?;
            if nz > 3 {
                off += nz - 3;
                continue;
            }
        }
        if format::decode_frame(&data[off..], base.wrapping_add(off as u64), max_body).is_ok() {
            return Some(off);
        }
        off += 1;
    }
    None
}

/// The valid frames from `from` (a frame's start) to the end of `data`, skipping bytes that
/// hold none.
fn frames_from(
    data: &[u8],
    base: u64,
    from: usize,
    max_body: usize,
) -> impl Iterator<Item = format::Frame<'_>> {
    let mut off = Some(from);
    std::iter::from_fn(move || {
        while let Some(o) = off.filter(|&o| o < data.len()) {
            match format::decode_frame(&data[o..], base.wrapping_add(o as u64), max_body) {
                Ok(frame) => {
                    off = Some(o + frame.len());
                    return Some(frame);
                }
                Err(_) => off = find_next_frame(data, base, o + 1, max_body),
            }
        }
        None
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(records: &[(&[u8], u64)]) -> Vec<u8> {
        let mut out = Vec::new();
        for (body, synced) in records {
            let pos = out.len() as u64;
            format::encode_frame(&mut out, pos, body, *synced);
        }
        out.resize(out.len() + 100, 0);
        out
    }

    #[test]
    fn the_piecewise_scan_agrees_with_the_whole_one_or_leaves_it_to_it() {
        use crate::storage::vfs::{RealFs, Vfs};
        let dir = tempfile::tempdir().unwrap();
        let fs = RealFs;
        let clean = build(&[(b"aaaa", 0), (b"bbbbbbbb", 20), (b"cc", 40)]);
        let mut cases = vec![clean.clone(), vec![0u8; 300], Vec::new()];
        for at in [0, 5, 20, 21, 37, 60, clean.len() - 1] {
            let mut c = clean.clone();
            c[at] ^= 0x41;
            cases.push(c);
        }
        cases.push(clean[..30].to_vec());
        for (i, data) in cases.iter().enumerate() {
            let path = dir.path().join(format!("{i}.seg"));
            let file = fs.create(&path).unwrap();
            let mut bytes = vec![0u8; format::V1_HEADER_LEN];
            bytes.extend_from_slice(data);
            file.write_at(&bytes, 0).unwrap();
            let whole = scan(data, 0, 100, false);
            let header = format::V1_HEADER_LEN as u64;
            match scan_clean(file.as_ref(), header, 0, data.len() as u64, 100).unwrap() {
                Some(piecewise) => assert_eq!(piecewise, whole, "case {i}"),
                None => assert!(
                    whole.torn_at.is_some() || !whole.damaged.is_empty(),
                    "case {i}: {whole:?}"
                ),
            }
        }
    }
}
