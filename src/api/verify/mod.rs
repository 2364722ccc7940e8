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
//! The last segment's tail hint (see `storage/tail_hint.rs`), when intact, is reported as its
//! bound, not as a leftover; the segment is still read whole, and bytes past the bound (where
//! the log never writes) are a problem ([`VerifyReport::written_past_hint`]).
//!
//! A segment or checkpoint written in a newer format version than this build reads, or by
//! a development build before release 0.1.0, is not damage, and is not counted as a
//! problem: it is listed in [`VerifyReport::newer_versions`] or
//! [`VerifyReport::pre_release_files`], left unchecked (its layout is not this build's),
//! and makes the report not clean.
//!
//! Whether the store needs records below its first segment (one deleted) the files alone
//! cannot tell, since compaction deletes old segments too: `head` asks a read-only open,
//! which takes no lock and writes nothing, as a snapshot reader does
//! ([`VerifyReport::missing_range`]).
//!
//! The parts, one job each: `listing` sorts the directory's entries; `segment` checks one
//! segment file; `checkpoint` one checkpoint file; `continuity` judges where segments meet
//! and where the log ends against the checkpoints; `identity` which store the files
//! belong to (another store's segment or checkpoint is a problem); `head` whether the log still holds what
//! the store refers to; `report` holds the findings and the
//! verdicts; `progress` the progress callback's argument. This module runs
//! them in order.

mod checkpoint;
mod continuity;
mod head;
mod identity;
mod listing;
mod progress;
mod report;
mod segment;

use std::path::Path;

use crate::error::Result;
use crate::storage::format::FORMAT_VERSION;
use crate::storage::tail_hint;

pub use checkpoint::CheckpointReport;
pub use continuity::{Boundary, BoundaryKind, LostTailReport, MissingSegmentsReport};
pub use head::MissingRangeReport;
pub use progress::VerifyProgress;
pub use report::VerifyReport;
pub use segment::{DamagedRange, HeaderStatus, SegmentReport, TornTailReport};

/// Verifies the store in `dir` without changing anything: every segment header and every
/// record's checksum, the boundaries between segments and the checkpoint files, read with
/// plain read-only file calls. It takes no lock, so it also works on a store another process
/// holds (a segment that process is appending to may then show a tail being written). Its
/// verdicts are those an open would reach: a torn tail in the last segment (which an open
/// truncates) is reported but is not a problem; damage followed by valid records is.
///
/// ```
/// use std::io::{Seek, SeekFrom, Write};
/// use deadletter::{Config, Store};
/// use deadletter::verify::verify;
///
/// # let dir = tempfile::tempdir().unwrap();
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
/// let segment = &report.segments[0];
/// let mut file = std::fs::OpenOptions::new().write(true).open(dir.path().join(&segment.file))?;
/// file.seek(SeekFrom::Start(segment.header_len + segment.end - segment.base))?;
/// file.write_all(b"half a record")?;
/// let report = verify(&dir)?;
/// assert!(report.torn_tail().is_some());
/// assert_eq!(report.problems(), 0); // the next open cuts it off
///
/// drop(Store::open(&dir, config)?);
/// assert!(verify(&dir)?.torn_tail().is_none());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn verify(dir: impl AsRef<Path>) -> Result<VerifyReport> {
    verify_with(dir, |_| {})
}

/// Like [`verify`], with a callback called after each segment. Nothing of the reader's
/// configures it: what a valid record is comes from the store's own files (each segment's
/// header records its size, which bounds its frames).
pub fn verify_with(
    dir: impl AsRef<Path>,
    mut progress: impl FnMut(VerifyProgress),
) -> Result<VerifyReport> {
    let dir = dir.as_ref();
    let listing = listing::list(dir)?;
    let mut report = VerifyReport {
        dir: dir.to_path_buf(),
        supported_version: FORMAT_VERSION,
        checkpoints: listing
            .checkpoints
            .into_iter()
            .map(|(name, path)| checkpoint::check_checkpoint(&path, name))
            .collect(),
        temp_files: listing.temp_files,
        other_files: listing.other_files,
        ..VerifyReport::default()
    };
    let bases = listing.segments;
    // The last segment's tail hint is no leftover: it is reported as what it claims.
    if let Some(&(last, _)) = bases.last() {
        let name = tail_hint::hint_name(last);
        if let Some(at) = report.temp_files.iter().position(|f| *f == name) {
            let bound = std::fs::read(dir.join(&name))
                .ok()
                .filter(|b| b.len() == tail_hint::HINT_LEN)
                .and_then(|b| tail_hint::decode(&b, last));
            if bound.is_some() {
                report.temp_files.remove(at);
                report.tail_hint = bound;
            }
        }
    }
    let bytes_total = bases.iter().map(|(_, len)| len).sum();
    let mut done = VerifyProgress {
        segments_done: 0,
        segments_total: bases.len(),
        bytes_done: 0,
        bytes_total,
    };
    // An entry that cannot be read (a directory named like a segment, a read error) is
    // reported against itself, and the others are still checked.
    for (i, &(base, _)) in bases.iter().enumerate() {
        let last = i + 1 == bases.len();
        let name = crate::storage::segment::segment_name(base);
        let path = dir.join(&name);
        let (seg, read) = match std::fs::read(&path) {
            Ok(bytes) => {
                let seg = segment::check_segment(&name, base, &bytes, last);
                (seg, bytes.len() as u64)
            }
            Err(e) => (segment::unreadable(&name, base, last, &e), 0),
        };
        report.bytes_read += read;
        report.records += seg.records;
        report.record_bytes += seg.record_bytes;
        done.segments_done += 1;
        done.bytes_done += read;
        progress(done);
        report.segments.push(seg);
    }
    report.store_id = identity::mark_foreign(&mut report.segments, &mut report.checkpoints);
    // Another store's records are not this store's.
    report.records -= report
        .segments
        .iter()
        .filter(|s| s.foreign)
        .map(|s| s.records)
        .sum::<u64>();
    report.boundaries = continuity::boundaries(&report.segments);
    report.lost_tail = continuity::lost_tail(&report.segments, &report.checkpoints);
    // What the positions show is the loss to report; the numbers, what they do not.
    if report.lost_tail.is_none() {
        report.missing_segments =
            continuity::missing_segments(&report.segments, &report.checkpoints);
    }
    // Whether the store needs records below its first segment: only an open of it can
    // tell (compaction deletes old segments too), and only of files it reads.
    if report.newer_versions().is_empty() && report.pre_release_files().is_empty() {
        report.missing_range = head::missing_head(dir);
    }
    Ok(report)
}
