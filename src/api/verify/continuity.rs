//! Where the log's pieces meet: the boundary between consecutive segments (one must end
//! exactly where the next begins; otherwise a segment is missing, was cut, ends in damage or
//! overlaps the next), and the log's end against the highest position a valid checkpoint
//! covers (a log that ends before it lost its tail). Both are judged from the segment and
//! checkpoint reports alone; a segment whose header is bad is reported against itself and
//! not against its neighbours.

use serde::{Deserialize, Serialize};

use super::checkpoint::CheckpointReport;
use super::segment::{HeaderStatus, SegmentReport};

/// What is wrong at the boundary between two consecutive segments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum BoundaryKind {
    /// The earlier segment's records end cleanly before the next one begins: a segment
    /// between them is missing.
    Missing,
    /// The earlier segment's file was cut short (shorter than its header declares).
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
    /// How many segments are missing between the two, by their sequence numbers (format
    /// version 2 on: each segment's is one more than the one before it), when both have one.
    #[serde(default)]
    pub missing_segments: Option<u64>,
}

/// The log ends before a position it had made durable (see [`VerifyReport::lost_tail`](super::VerifyReport::lost_tail)).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct LostTailReport {
    /// The durable high-water mark: the highest position a valid checkpoint covers.
    pub expected: u64,
    /// Where the log's records end.
    pub actual: u64,
}

/// The log's last segments are gone: a checkpoint was written while the segment numbered
/// `last` was active, and the highest-numbered segment there is `first - 1` (see
/// [`VerifyReport::missing_segments`](super::VerifyReport::missing_segments)).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct MissingSegmentsReport {
    /// The first segment number missing.
    pub first: u64,
    /// The last segment number missing (the one the checkpoint names).
    pub last: u64,
}

/// The segment numbers a checkpoint of the store names against the highest one there:
/// the log must still hold the segment that was active when each was written, or a later
/// one (only compaction deletes segments, never the active one).
pub(super) fn missing_segments(
    segments: &[SegmentReport],
    checkpoints: &[CheckpointReport],
) -> Option<MissingSegmentsReport> {
    let named = checkpoints
        .iter()
        .filter(|c| c.position.is_some() && !c.foreign)
        .filter_map(|c| c.seq)
        .max()?;
    let have = segments
        .iter()
        .filter(|s| s.header == HeaderStatus::Ok && !s.foreign)
        .filter_map(|s| s.seq)
        .max();
    // A later entry whose header is lost may be the one: it is reported against itself.
    let bad_after = segments
        .iter()
        .rev()
        .take_while(|s| s.seq.is_none() || s.foreign)
        .any(|s| s.header != HeaderStatus::Ok);
    if bad_after || have.is_some_and(|h| h >= named) {
        return None;
    }
    Some(MissingSegmentsReport {
        first: have.map_or(named, |h| h + 1),
        last: named,
    })
}

/// The boundary problems between consecutive segments.
pub(super) fn boundaries(segments: &[SegmentReport]) -> Vec<Boundary> {
    let mut boundaries = Vec::new();
    for pair in segments.windows(2) {
        let (cur, next) = (&pair[0], &pair[1]);
        let expected = next.base;
        // A bad entry is reported against itself, not against the segment before it.
        // So is another store's segment (see `identity`).
        let bad_entry = cur.header != HeaderStatus::Ok
            || next.header != HeaderStatus::Ok
            || cur.foreign
            || next.foreign;
        if bad_entry || cur.end == expected {
            continue;
        }
        let kind = if cur.end > expected {
            BoundaryKind::Overlap
        } else if cur.is_short() {
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
            missing_segments: cur
                .seq
                .zip(next.seq)
                .map(|(a, b)| b.saturating_sub(a).saturating_sub(1)),
        });
    }
    boundaries
}

/// The log's end against the highest position a valid checkpoint covers.
pub(super) fn lost_tail(
    segments: &[SegmentReport],
    checkpoints: &[CheckpointReport],
) -> Option<LostTailReport> {
    let expected = checkpoints.iter().filter_map(|c| c.position).max()?;
    // Only a log whose last segment could be read says where the records end.
    let last = segments.last()?;
    if last.header != HeaderStatus::Ok || last.foreign {
        return None;
    }
    (last.end < expected).then_some(LostTailReport {
        expected,
        actual: last.end,
    })
}
