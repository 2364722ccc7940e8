//! Read-only verification of a store directory: every segment header and every record's
//! checksum, with a report of what recovery would find.
//!
//! [`verify`] never opens the store through [`crate::storage::log::Log`]: that would take the
//! directory lock and truncate a torn tail. It lists the directory, reads each segment file
//! with plain read-only `std::fs` calls, checks its header, and runs the same recovery scan
//! ([`crate::storage::segment::scan`]) the log runs at open, so its verdicts match what an open would
//! do, without changing a byte. It takes no lock, so it works while another process holds
//! the store; a segment that process is appending to may then show a tail still being
//! written.
//!
//! What it reports, per segment: the header's state and the format version it names, the
//! valid records and the bytes they occupy, a torn tail (bad bytes after the last record,
//! which an open of the last segment truncates), damaged ranges (bad bytes followed by
//! valid records, which an open refuses or quarantines); and across segments: boundaries where one segment does not end exactly
//! where the next begins (a missing, truncated or overlapping segment). Checkpoint files
//! (index snapshots written by compaction) are checked against their checksum and decoded
//! too.
//!
//! A segment or checkpoint written in a newer format version than this build reads is not
//! damage, and is not counted as a problem: it is listed in
//! [`VerifyReport::newer_versions`], left unchecked (its layout is unknown here), and makes
//! the report not clean.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::api::config::DEFAULT_MAX_MESSAGE_SIZE;
use crate::engine::checkpoint;
use crate::engine::record::RECORD_OVERHEAD;
use crate::error::{Error, Result};
use crate::storage::format::{self, HeaderError, FORMAT_VERSION, SEGMENT_HEADER_LEN};
use crate::storage::log::{DEFAULT_SEGMENT_SIZE, LOCK_FILE};
use crate::storage::segment;

/// Settings of a verification.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct VerifyOptions {
    /// Largest record body to accept, as the store's log does: the store's
    /// `max_message_size` plus 64 KiB of metadata room.
    pub max_record_size: usize,
}

impl VerifyOptions {
    /// Sets the largest record body accepted (a store's `max_message_size` plus 64 KiB).
    pub fn max_record_size(mut self, bytes: usize) -> Self {
        self.max_record_size = bytes;
        self
    }
}

impl Default for VerifyOptions {
    fn default() -> Self {
        VerifyOptions {
            max_record_size: DEFAULT_MAX_MESSAGE_SIZE + RECORD_OVERHEAD,
        }
    }
}

/// The state of a segment's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum HeaderStatus {
    /// Valid, and its base matches the file name.
    Ok,
    /// The file is shorter than a header.
    Short,
    /// The magic number is not deadletter's.
    BadMagic,
    /// An intact header of a newer format version than this build reads
    /// ([`SegmentReport::version`] says which): not damage, but this build cannot check the
    /// records behind it, nor open the store.
    UnsupportedVersion,
    /// The header's checksum fails.
    BadChecksum,
    /// The header is valid but names another base position than the file name.
    BaseMismatch,
    /// The header's checksum passes, but it names a format version (0) or a header length
    /// that no version of deadletter writes.
    Invalid,
    /// The entry is named like a segment but is not a regular file (a directory, say).
    NotAFile,
    /// The file could not be read ([`SegmentReport::error`] says why).
    Unreadable,
}

/// A torn tail: bytes after the last valid record that do not form a record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct TornTailReport {
    /// Byte offset in the file where the bad bytes start.
    pub file_offset: u64,
    /// Log position where they start.
    pub position: u64,
    /// Bytes from there to the last non-zero byte.
    pub bytes: u64,
    /// Whole records (frames that pass their checksum) after the bad bytes, which go with
    /// them: written after the torn one and never proved durable.
    pub records: u64,
}

/// A damaged range: bytes that fail their checksum, followed by valid records.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct DamagedRange {
    /// Byte offset in the file where the damage starts.
    pub file_offset: u64,
    /// First log position of the range.
    pub start: u64,
    /// Log position just past the range (where the next valid record starts).
    pub end: u64,
}

/// What verification found in one segment file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct SegmentReport {
    /// The file's name.
    pub file: String,
    /// The log position of its first byte of data (from its name).
    pub base: u64,
    /// The file's size in bytes.
    pub file_len: u64,
    /// The size its header declares (format version 2 on). A file shorter than that was
    /// cut: a problem, in the last segment too.
    pub declared_len: Option<u64>,
    /// The header's state.
    pub header: HeaderStatus,
    /// The format version the header names, when the header is intact (a newer version
    /// than this build reads included).
    pub version: Option<u16>,
    /// True for the last segment (the one a writer appends to).
    pub last: bool,
    /// True when the whole file is zeros or empty: its header is lost (a segment's name
    /// always has a durable header, so this is damage).
    pub empty: bool,
    /// Records whose checksum passed.
    pub records: u64,
    /// Bytes those records occupy, frame headers included.
    pub record_bytes: u64,
    /// Log position just past the last valid record.
    pub end: u64,
    /// A torn tail, if any.
    pub torn_tail: Option<TornTailReport>,
    /// Damaged ranges.
    pub damaged: Vec<DamagedRange>,
    /// Why the entry could not be read, when [`SegmentReport::header`] is
    /// [`HeaderStatus::Unreadable`] or [`HeaderStatus::NotAFile`].
    pub error: Option<String>,
}

impl SegmentReport {
    /// True when nothing in this segment is damaged (a torn tail in the last segment is not
    /// damage: an open truncates it).
    pub fn is_sound(&self) -> bool {
        self.header == HeaderStatus::Ok
            && self.damaged.is_empty()
            && !self.is_short()
            && (self.last || self.torn_tail.is_none())
    }

    /// True when the file is shorter than its header declares: it was cut.
    pub fn is_short(&self) -> bool {
        self.declared_len.is_some_and(|d| self.file_len < d)
    }
}

/// What is wrong at the boundary between two consecutive segments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum BoundaryKind {
    /// The earlier segment's records end cleanly before the next one begins: a segment
    /// between them is missing.
    Missing,
    /// The earlier segment's file was cut short.
    Truncated,
    /// The earlier segment's records end in bad bytes before the next one begins.
    Damaged,
    /// The earlier segment's records run past the next one's base.
    Overlap,
}

/// A boundary problem between `file` and the segment after it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Boundary {
    /// The earlier segment's file.
    pub file: String,
    /// The next segment's file.
    pub next_file: String,
    /// What is wrong.
    pub kind: BoundaryKind,
    /// Where the earlier segment's records end.
    pub end: u64,
    /// Where the next segment begins.
    pub next_base: u64,
}

/// What verification found in one checkpoint file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct CheckpointReport {
    /// The file's name.
    pub file: String,
    /// The format version it was written in, when it is intact (a newer version than this
    /// build reads included: then it is not decoded, and neither `position` nor `error` is
    /// set).
    pub version: Option<u16>,
    /// The log position it covers, when it is valid.
    pub position: Option<u64>,
    /// Why it is not valid, when it is damaged.
    pub error: Option<String>,
}

/// The log ends before a position it had made durable (see [`VerifyReport::lost_tail`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct LostTailReport {
    /// The durable high-water mark: the highest position a valid checkpoint covers.
    pub expected: u64,
    /// Where the log's records end.
    pub actual: u64,
}

/// What [`verify`] found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct VerifyReport {
    /// The directory verified.
    pub dir: PathBuf,
    /// The newest format version this build reads ([`crate::FORMAT_VERSION`]).
    pub supported_version: u16,
    /// One report per segment file, in log order.
    pub segments: Vec<SegmentReport>,
    /// Boundary problems between consecutive segments.
    pub boundaries: Vec<Boundary>,
    /// Checkpoint files.
    pub checkpoints: Vec<CheckpointReport>,
    /// Set when the log's records end before the position a valid checkpoint covers (that
    /// position was durable in the log before the checkpoint was written): its tail was
    /// lost. An open refuses it ([`crate::CorruptionKind::LostTail`]).
    pub lost_tail: Option<LostTailReport>,
    /// Temporary files: leftovers of an interrupted segment creation or checkpoint (an open
    /// removes them) or the next segment being prepared.
    pub temp_files: Vec<String>,
    /// Files that are not the log's (left alone by an open too).
    pub other_files: Vec<String>,
    /// Valid records in all segments.
    pub records: u64,
    /// Bytes those records occupy.
    pub record_bytes: u64,
    /// Bytes of segment files read.
    pub bytes_read: u64,
}

impl VerifyReport {
    /// Problems found: bad headers, damaged ranges, torn tails in sealed segments, boundary
    /// problems and damaged checkpoints. A torn tail in the last segment is not counted (see
    /// [`VerifyReport::torn_tail`]), nor are files in a newer format version (see
    /// [`VerifyReport::newer_versions`]).
    pub fn problems(&self) -> usize {
        let in_segments: usize = self
            .segments
            .iter()
            .map(|s| {
                let bad_header = !matches!(
                    s.header,
                    HeaderStatus::Ok | HeaderStatus::UnsupportedVersion
                );
                usize::from(bad_header)
                    + usize::from(s.is_short())
                    + s.damaged.len()
                    + usize::from(!s.last && s.torn_tail.is_some())
            })
            .sum();
        let checkpoints = self
            .checkpoints
            .iter()
            .filter(|c| c.error.is_some())
            .count();
        in_segments + self.boundaries.len() + checkpoints + usize::from(self.lost_tail.is_some())
    }

    /// The files (segments, then checkpoints) written in a newer format version than this
    /// build reads, with that version. Such a store opens only with a newer deadletter
    /// ([`crate::Error::UnsupportedFormat`]), and this build did not check those files.
    pub fn newer_versions(&self) -> Vec<(&str, u16)> {
        let segments = self
            .segments
            .iter()
            .filter(|s| s.header == HeaderStatus::UnsupportedVersion)
            .filter_map(|s| Some((s.file.as_str(), s.version?)));
        let checkpoints = self.checkpoints.iter().filter_map(|c| match c.version {
            Some(v) if v > self.supported_version => Some((c.file.as_str(), v)),
            _ => None,
        });
        segments.chain(checkpoints).collect()
    }

    /// True when no problem was found and every file was checked (none is in a newer
    /// format version).
    pub fn is_clean(&self) -> bool {
        self.problems() == 0 && self.newer_versions().is_empty()
    }

    /// The torn tail of the last segment, which the next open truncates, if any.
    pub fn torn_tail(&self) -> Option<&TornTailReport> {
        self.segments
            .last()
            .filter(|s| s.last)
            .and_then(|s| s.torn_tail.as_ref())
    }
}

/// Progress of a verification, passed to the callback of [`verify_with`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct VerifyProgress {
    /// Segment files verified so far.
    pub segments_done: usize,
    /// Segment files in all.
    pub segments_total: usize,
    /// Bytes of segment files verified so far.
    pub bytes_done: u64,
    /// Bytes of segment files in all (their sizes when listed).
    pub bytes_total: u64,
}

/// Verifies the store in `dir` without changing anything: every segment header and every
/// record's checksum, the boundaries between segments and the checkpoint files, read with
/// plain read-only file calls. It takes no lock, so it also works on a store another process
/// holds (a segment that process is appending to may then show a tail being written). Its
/// verdicts are those an open would reach: a torn tail in the last segment (which an open
/// truncates) is reported but is not a problem; damage followed by valid records is.
///
/// ```
/// use std::io::{Seek, SeekFrom, Write};
/// use deadletter::{verify, Config, Store};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dir = std::env::temp_dir().join(format!("deadletter-doc-verify-{}", std::process::id()));
/// # let _ = std::fs::remove_dir_all(&dir);
/// let config = Config::default().segment_size(1 << 20).max_message_size(64 << 10);
/// let store = Store::open(&dir, config.clone())?;
/// store.queue("orders")?.enqueue_batch(&["ORD-1", "ORD-2"])?;
///
/// let report = verify(&dir)?; // while the store is open
/// assert!(report.is_clean());
/// assert!(report.records >= 2);
/// store.close()?;
///
/// // A write the crash interrupted: bytes after the last record that are not a record.
/// let segment = dir.join(&report.segments[0].file);
/// let mut file = std::fs::OpenOptions::new().write(true).open(&segment)?;
/// file.seek(SeekFrom::End(-64))?;
/// file.write_all(b"half a record")?;
/// let report = verify(&dir)?;
/// assert!(report.torn_tail().is_some());
/// assert_eq!(report.problems(), 0); // the next open cuts it off
///
/// drop(Store::open(&dir, config)?);
/// assert!(verify(&dir)?.torn_tail().is_none());
/// # std::fs::remove_dir_all(&dir).ok();
/// # Ok(())
/// # }
/// ```
pub fn verify(dir: impl AsRef<Path>) -> Result<VerifyReport> {
    verify_with(dir, &VerifyOptions::default(), |_| {})
}

/// Like [`verify`], with options and a callback called after each segment.
pub fn verify_with(
    dir: impl AsRef<Path>,
    options: &VerifyOptions,
    mut progress: impl FnMut(VerifyProgress),
) -> Result<VerifyReport> {
    let dir = dir.as_ref();
    let mut report = VerifyReport {
        dir: dir.to_path_buf(),
        supported_version: FORMAT_VERSION,
        segments: Vec::new(),
        boundaries: Vec::new(),
        checkpoints: Vec::new(),
        lost_tail: None,
        temp_files: Vec::new(),
        other_files: Vec::new(),
        records: 0,
        record_bytes: 0,
        bytes_read: 0,
    };
    let mut bases = Vec::new();
    let entries = std::fs::read_dir(dir).map_err(|e| Error::io("list", dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io("list", dir, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(base) = segment::parse_segment_name(&name) {
            let len = entry
                .metadata()
                .map_err(|e| Error::io("stat", entry.path(), e))?
                .len();
            bases.push((base, len));
        } else if checkpoint::SLOTS.contains(&name.as_str()) {
            report
                .checkpoints
                .push(check_checkpoint(&entry.path(), name));
        } else if segment::parse_temp_name(&name).is_some()
            || name == segment::SPARE_NAME
            || name == CHECKPOINT_TEMP
        {
            report.temp_files.push(name);
        } else if name != LOCK_FILE {
            report.other_files.push(name);
        }
    }
    bases.sort_unstable();
    report.checkpoints.sort_by(|a, b| a.file.cmp(&b.file));
    report.temp_files.sort();
    report.other_files.sort();
    let bytes_total = bases.iter().map(|(_, len)| len).sum();
    let mut done = VerifyProgress {
        segments_done: 0,
        segments_total: bases.len(),
        bytes_done: 0,
        bytes_total,
    };
    // An entry that cannot be read (a directory named like a segment, a read error) is
    // reported against itself, and the others are still checked.
    let mut scans = Vec::with_capacity(bases.len());
    for (i, &(base, _)) in bases.iter().enumerate() {
        let last = i + 1 == bases.len();
        let name = segment::segment_name(base);
        let path = dir.join(&name);
        let (seg, reaches_eof, read) = match read_file(&path) {
            Ok(bytes) => {
                let (seg, reaches_eof) = check_segment(&name, base, &bytes, last, options);
                (seg, reaches_eof, bytes.len() as u64)
            }
            Err(e) => (unreadable(&name, base, last, &e), false, 0),
        };
        report.bytes_read += read;
        report.records += seg.records;
        report.record_bytes += seg.record_bytes;
        done.segments_done += 1;
        done.bytes_done += read;
        progress(done);
        scans.push(reaches_eof);
        report.segments.push(seg);
    }
    let mut boundaries = Vec::new();
    for (i, pair) in report.segments.windows(2).enumerate() {
        let (cur, next) = (&pair[0], &pair[1]);
        // A bad entry is reported against itself, not against the segment before it.
        if cur.header != HeaderStatus::Ok || next.header != HeaderStatus::Ok {
            continue;
        }
        let expected = next.base;
        if cur.end == expected {
            continue;
        }
        let data_room = expected - cur.base.min(expected);
        let kind = if cur.end > expected {
            BoundaryKind::Overlap
        } else if scans[i]
            && cur.file_len < SEGMENT_HEADER_LEN as u64 + data_room
            && cur.file_len < DEFAULT_SEGMENT_SIZE
        {
            BoundaryKind::Truncated
        } else if cur.torn_tail.is_some() {
            BoundaryKind::Damaged
        } else {
            BoundaryKind::Missing
        };
        boundaries.push(Boundary {
            file: cur.file.clone(),
            next_file: next.file.clone(),
            kind,
            end: cur.end,
            next_base: expected,
        });
    }
    report.boundaries = boundaries;
    report.lost_tail = lost_tail(&report);
    Ok(report)
}

/// The log's end against the highest position a valid checkpoint covers.
fn lost_tail(report: &VerifyReport) -> Option<LostTailReport> {
    let expected = report.checkpoints.iter().filter_map(|c| c.position).max()?;
    // Only a log whose last segment could be read says where the records end.
    let last = report.segments.last()?;
    if last.header != HeaderStatus::Ok {
        return None;
    }
    (last.end < expected).then_some(LostTailReport {
        expected,
        actual: last.end,
    })
}

/// The temporary name a checkpoint is written under before its rename.
const CHECKPOINT_TEMP: &str = "checkpoint.tmp";

/// Reads and decodes one checkpoint file; a read error is reported as its error too (the
/// segments are what an open cannot do without).
fn check_checkpoint(path: &Path, file: String) -> CheckpointReport {
    let mut report = CheckpointReport {
        file,
        version: None,
        position: None,
        error: None,
    };
    match std::fs::read(path)
        .map_err(|e| Error::io("read", path, e))
        .and_then(|bytes| checkpoint::decode(&bytes, path))
    {
        Ok(checkpoint) => {
            report.version = Some(checkpoint.version);
            report.position = Some(checkpoint.position);
        }
        Err(Error::UnsupportedFormat { found, .. }) => report.version = Some(found),
        Err(e) => report.error = Some(e.to_string()),
    }
    report
}

/// The report of a segment entry that could not be read.
fn unreadable(name: &str, base: u64, last: bool, e: &std::io::Error) -> SegmentReport {
    let header = if e.kind() == std::io::ErrorKind::IsADirectory {
        HeaderStatus::NotAFile
    } else {
        HeaderStatus::Unreadable
    };
    SegmentReport {
        file: name.to_string(),
        base,
        file_len: 0,
        declared_len: None,
        header,
        version: None,
        last,
        empty: false,
        records: 0,
        record_bytes: 0,
        end: base,
        torn_tail: None,
        damaged: Vec::new(),
        error: Some(e.to_string()),
    }
}

fn read_file(path: &Path) -> std::io::Result<Vec<u8>> {
    let mut file = File::open(path)?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Checks one segment's bytes; also returns whether its data runs into the end of the file.
fn check_segment(
    name: &str,
    base: u64,
    bytes: &[u8],
    last: bool,
    options: &VerifyOptions,
) -> (SegmentReport, bool) {
    let mut seg = SegmentReport {
        file: name.to_string(),
        base,
        file_len: bytes.len() as u64,
        declared_len: None,
        header: HeaderStatus::Ok,
        version: None,
        last,
        empty: bytes.iter().all(|&b| b == 0),
        records: 0,
        record_bytes: 0,
        end: base,
        torn_tail: None,
        damaged: Vec::new(),
        error: None,
    };
    (seg.header, seg.version) = match format::decode_segment_header(bytes, FORMAT_VERSION) {
        Ok(h) if h.base == base => {
            seg.declared_len = h.size;
            (HeaderStatus::Ok, Some(h.version))
        }
        Ok(h) => (HeaderStatus::BaseMismatch, Some(h.version)),
        Err(HeaderError::Newer(v)) => (HeaderStatus::UnsupportedVersion, Some(v)),
        Err(HeaderError::Short) => (HeaderStatus::Short, None),
        Err(HeaderError::Magic) => (HeaderStatus::BadMagic, None),
        Err(HeaderError::Checksum) => (HeaderStatus::BadChecksum, None),
        Err(HeaderError::Invalid) => (HeaderStatus::Invalid, None),
    };
    if seg.header != HeaderStatus::Ok {
        return (seg, false);
    }
    let data = &bytes[SEGMENT_HEADER_LEN..];
    // A cut last segment is sealed where it is, as an open in quarantine does.
    let scan = segment::scan(data, base, options.max_record_size, !last || seg.is_short());
    let header_len = SEGMENT_HEADER_LEN as u64;
    seg.records = scan.records;
    seg.end = base + scan.end;
    let damaged_bytes: u64 = scan.damaged.iter().map(|(s, e)| e - s).sum();
    seg.record_bytes = scan.end - damaged_bytes;
    // In a cut segment, bad bytes at the cut are part of the cut, not a torn write.
    seg.torn_tail = scan
        .torn_at
        .filter(|_| !seg.is_short())
        .map(|at| TornTailReport {
            file_offset: header_len + at,
            position: base + at,
            bytes: scan.torn_bytes,
            records: scan.torn_records,
        });
    seg.damaged = scan
        .damaged
        .iter()
        .map(|&(s, e)| DamagedRange {
            file_offset: header_len + s,
            start: base + s,
            end: base + e,
        })
        .collect();
    (seg, scan.reaches_eof)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::format::{encode_frame, encode_segment_header, SegmentHeader};

    fn segment_bytes(base: u64, records: &[&[u8]], size: usize) -> Vec<u8> {
        let version = FORMAT_VERSION;
        let mut out =
            encode_segment_header(&SegmentHeader::new(base, version, size as u64)).to_vec();
        let mut data = Vec::new();
        for r in records {
            let pos = base + data.len() as u64;
            encode_frame(&mut data, pos, r, pos);
        }
        out.extend_from_slice(&data);
        out.resize(size, 0);
        out
    }

    #[test]
    fn clean_segment_counts_records() {
        let bytes = segment_bytes(0, &[b"one", b"two"], 4096);
        let (seg, _) = check_segment("x", 0, &bytes, true, &VerifyOptions::default());
        assert_eq!(seg.header, HeaderStatus::Ok);
        assert_eq!(seg.version, Some(FORMAT_VERSION));
        assert_eq!(seg.records, 2);
        assert_eq!(seg.record_bytes, 2 * (16 + 3));
        assert!(seg.torn_tail.is_none());
        assert!(seg.is_sound());
    }

    #[test]
    fn bad_magic_is_reported() {
        let mut bytes = segment_bytes(0, &[b"one"], 4096);
        bytes[0] = b'X';
        let (seg, _) = check_segment("x", 0, &bytes, true, &VerifyOptions::default());
        assert_eq!(seg.header, HeaderStatus::BadMagic);
        assert!(!seg.is_sound());
    }

    #[test]
    fn torn_tail_in_last_segment_is_not_damage() {
        let mut bytes = segment_bytes(0, &[b"one", b"two"], 4096);
        let second = SEGMENT_HEADER_LEN + 19 + 17;
        bytes[second] ^= 0xff;
        let (seg, _) = check_segment("x", 0, &bytes, true, &VerifyOptions::default());
        assert_eq!(seg.records, 1);
        let torn = seg.torn_tail.clone().expect("torn tail");
        assert_eq!(torn.position, 19);
        assert!(seg.is_sound());
    }
}
