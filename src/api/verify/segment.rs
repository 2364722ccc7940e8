//! One segment file checked on its own: its header, its records' checksums, a torn tail and
//! damaged ranges, by the same recovery scan ([`crate::storage::segment::scan`]) the log runs
//! at open, so the verdicts match what an open would do. Reading is plain read-only `std::fs`;
//! an entry that cannot be read (a directory named like a segment, a read error) is reported
//! against itself ([`unreadable`]).

use serde::{Deserialize, Serialize};

use crate::storage::format::{self, HeaderError, FORMAT_VERSION};
use crate::storage::segment;

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
    /// An intact header of a development build before release 0.1.0
    /// ([`SegmentReport::version`] is that build's format version): not damage, but no
    /// release reads such a store, and its records were not checked.
    PreRelease,
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
    /// The size its header declares (when it is intact and of this build's format). A file
    /// shorter than that was cut: a problem, in the last segment too.
    pub declared_len: Option<u64>,
    /// The header's state.
    pub header: HeaderStatus,
    /// The format version the header names, when the header is intact (a newer version
    /// than this build reads, or a development build's, included).
    pub version: Option<u16>,
    /// The length of its header (its version's: 32 bytes for version 1, 56 from version
    /// 2 on), where its records start; 0 when the header is not intact.
    #[serde(default)]
    pub header_len: u64,
    /// The id of the store its header names (format version 2 on), as 32 hex digits.
    #[serde(default)]
    pub store_id: Option<String>,
    /// Its sequence number in the store (format version 2 on).
    #[serde(default)]
    pub seq: Option<u64>,
    /// True when its header names another store than the one most of the store's files
    /// name (see [`VerifyReport::store_id`](super::VerifyReport::store_id)): its records
    /// are not checked, and no open reads them.
    #[serde(default)]
    pub foreign: bool,
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
            && !self.foreign
            && self.damaged.is_empty()
            && !self.is_short()
            && (self.last || self.torn_tail.is_none())
    }

    /// True when the file is shorter than its header declares: it was cut.
    pub fn is_short(&self) -> bool {
        self.declared_len.is_some_and(|d| self.file_len < d)
    }
}

/// The report of a segment entry that could not be read.
pub(super) fn unreadable(name: &str, base: u64, last: bool, e: &std::io::Error) -> SegmentReport {
    let header = if e.kind() == std::io::ErrorKind::IsADirectory {
        HeaderStatus::NotAFile
    } else {
        HeaderStatus::Unreadable
    };
    SegmentReport {
        header,
        error: Some(e.to_string()),
        ..SegmentReport::nothing_read(name, base, last)
    }
}

impl SegmentReport {
    /// The report of segment `name` at `base` before anything of it is read: no records,
    /// no damage, ending where it starts.
    fn nothing_read(name: &str, base: u64, last: bool) -> SegmentReport {
        SegmentReport {
            file: name.to_string(),
            base,
            file_len: 0,
            declared_len: None,
            header: HeaderStatus::Ok,
            version: None,
            header_len: 0,
            store_id: None,
            seq: None,
            foreign: false,
            last,
            empty: false,
            records: 0,
            record_bytes: 0,
            end: base,
            torn_tail: None,
            damaged: Vec::new(),
            error: None,
        }
    }
}

/// Checks one segment's bytes.
pub(super) fn check_segment(name: &str, base: u64, bytes: &[u8], last: bool) -> SegmentReport {
    let mut seg = SegmentReport {
        file_len: bytes.len() as u64,
        empty: bytes.iter().all(|&b| b == 0),
        ..SegmentReport::nothing_read(name, base, last)
    };
    (seg.header, seg.version) = match format::decode_segment_header(bytes, FORMAT_VERSION) {
        Ok(h) if h.base == base => {
            seg.declared_len = Some(h.size);
            seg.header_len = h.len() as u64;
            if h.has_identity() {
                seg.store_id = Some(format!("{:032x}", h.store_id));
                seg.seq = Some(h.seq);
            }
            (HeaderStatus::Ok, Some(h.version))
        }
        Ok(h) => (HeaderStatus::BaseMismatch, Some(h.version)),
        Err(HeaderError::Newer(v)) => (HeaderStatus::UnsupportedVersion, Some(v)),
        Err(HeaderError::PreRelease(v)) => (HeaderStatus::PreRelease, Some(v)),
        Err(HeaderError::Short) => (HeaderStatus::Short, None),
        Err(HeaderError::Magic) => (HeaderStatus::BadMagic, None),
        Err(HeaderError::Checksum) => (HeaderStatus::BadChecksum, None),
        Err(HeaderError::Invalid) => (HeaderStatus::Invalid, None),
    };
    if seg.header != HeaderStatus::Ok {
        return seg;
    }
    let header_len = seg.header_len;
    let data = &bytes[header_len as usize..];
    // A cut last segment is sealed where it is, as an open in quarantine does.
    // Frames are judged by the segment's own size, as recovery judges them: never by a
    // record limit of whoever reads the store.
    let max_body = format::max_body_in(
        seg.declared_len.unwrap_or(0).max(seg.file_len),
        header_len as usize,
    );
    let scan = segment::scan(data, base, max_body, !last || seg.is_short());
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
    seg
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::format::{encode_frame, encode_segment_header, SegmentHeader};

    fn segment_bytes(base: u64, records: &[&[u8]], size: usize) -> Vec<u8> {
        let version = FORMAT_VERSION;
        let mut out =
            encode_segment_header(&SegmentHeader::new(base, version, size as u64).identified(7, 0));
        let mut data = Vec::new();
        for r in records {
            let pos = base + data.len() as u64;
            encode_frame(&mut data, pos, r, pos);
        }
        out.extend_from_slice(&data);
        out.resize(size, 0);
        out
    }

    /// A clean segment's records are counted; a bad magic is reported; a torn tail in the
    /// last segment is not damage.
    #[test]
    fn a_segment_report_counts_records_and_tells_a_torn_tail_from_damage() {
        let mut bytes = segment_bytes(0, &[b"one", b"two"], 4096);
        let seg = check_segment("x", 0, &bytes, true);
        assert_eq!(seg.header, HeaderStatus::Ok);
        assert_eq!(seg.version, Some(FORMAT_VERSION));
        assert_eq!((seg.records, seg.record_bytes), (2, 2 * (16 + 3)));
        assert!(seg.torn_tail.is_none() && seg.is_sound());

        let second = format::header_len(FORMAT_VERSION) + 19 + 17;
        bytes[second] ^= 0xff;
        let seg = check_segment("x", 0, &bytes, true);
        assert_eq!(seg.records, 1);
        assert_eq!(seg.torn_tail.clone().expect("torn tail").position, 19);
        assert!(seg.is_sound());

        bytes[0] = b'X';
        let seg = check_segment("x", 0, &bytes, true);
        assert_eq!(seg.header, HeaderStatus::BadMagic);
        assert!(!seg.is_sound());
    }
}
