//! [`VerifyReport`]: everything a verification found, and the verdicts drawn from it (how
//! many problems, which files are of a format this build does not read, whether the store
//! is clean).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::checkpoint::CheckpointReport;
use super::continuity::{Boundary, LostTailReport, MissingSegmentsReport};
use super::head::MissingRangeReport;
use super::segment::{HeaderStatus, SegmentReport, TornTailReport};

/// What [`verify`](super::verify) found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct VerifyReport {
    /// The directory verified.
    pub dir: PathBuf,
    /// The newest format version this build reads ([`crate::store::FORMAT_VERSION`]).
    pub supported_version: u16,
    /// One report per segment file, in log order.
    pub segments: Vec<SegmentReport>,
    /// Boundary problems between consecutive segments.
    pub boundaries: Vec<Boundary>,
    /// Checkpoint files.
    pub checkpoints: Vec<CheckpointReport>,
    /// Set when the log's records end before the position a valid checkpoint covers (that
    /// position was durable in the log before the checkpoint was written): its tail was
    /// lost. An open refuses it ([`crate::recovery::CorruptionKind::LostTail`]).
    pub lost_tail: Option<LostTailReport>,
    /// Set when the store needs log positions no segment holds, below its first segment:
    /// its newest checkpoint refers to records there, or without a checkpoint the log does
    /// not start at 0. The segments that held them are missing (a first segment deleted).
    /// A strict open refuses it ([`crate::recovery::CorruptionKind::MissingRange`]).
    #[serde(default)]
    pub missing_range: Option<MissingRangeReport>,
    /// Set when the log's last segments are gone by their sequence numbers (format
    /// version 2 on): a checkpoint was written while a segment numbered higher than any
    /// left was the active one. A strict open refuses it
    /// ([`crate::recovery::CorruptionKind::MissingSegments`]).
    #[serde(default)]
    pub missing_segments: Option<MissingSegmentsReport>,
    /// Temporary files: leftovers of an interrupted segment creation (an open removes
    /// them), the next segment being prepared, or `checkpoint.tmp`, a checkpoint being
    /// written or, between checkpoints, the reserve kept for the next one.
    pub temp_files: Vec<String>,
    /// The bound of the last segment's tail hint, when it has an intact one: no byte of its
    /// data at or past this offset was ever written by the log, and an open reads no further
    /// (see "The tail hint" in `docs/FORMAT.md`). Its file is not listed in `temp_files`.
    #[serde(default)]
    pub tail_hint: Option<u64>,
    /// Files that are not the log's (left alone by an open too).
    pub other_files: Vec<String>,
    /// Valid records in all segments.
    pub records: u64,
    /// Bytes those records occupy.
    pub record_bytes: u64,
    /// Bytes of segment files read.
    pub bytes_read: u64,
    /// The store's id (32 hex digits), as most of its segments name it (format version 2
    /// on; see `docs/FORMAT.md`, store identity): a segment or checkpoint naming another
    /// is foreign ([`SegmentReport::foreign`], [`CheckpointReport::foreign`]), a problem.
    /// `None` for a store of format version 1 only.
    #[serde(default)]
    pub store_id: Option<String>,
}

impl VerifyReport {
    /// Problems found: bad headers, damaged ranges, torn tails in sealed segments, boundary
    /// problems and damaged checkpoints. A torn tail in the last segment is not counted (see
    /// [`VerifyReport::torn_tail`]), nor are files in a newer format version (see
    /// [`VerifyReport::newer_versions`]) or a development build's (see
    /// [`VerifyReport::pre_release_files`]).
    pub fn problems(&self) -> usize {
        let in_segments: usize = self
            .segments
            .iter()
            .map(|s| {
                let bad_header = !matches!(
                    s.header,
                    HeaderStatus::Ok | HeaderStatus::UnsupportedVersion | HeaderStatus::PreRelease
                );
                usize::from(bad_header)
                    + usize::from(s.foreign)
                    + usize::from(s.is_short())
                    + s.damaged.len()
                    + usize::from(!s.last && s.torn_tail.is_some())
            })
            .sum();
        let checkpoints = self
            .checkpoints
            .iter()
            .filter(|c| c.error.is_some() || c.foreign)
            .count();
        in_segments
            + self.boundaries.len()
            + checkpoints
            + usize::from(self.lost_tail.is_some())
            + usize::from(self.missing_range.is_some())
            + usize::from(self.missing_segments.is_some())
            + usize::from(self.written_past_hint().is_some())
    }

    /// Bytes of the last segment's torn tail that lie past what an open reads of it with its
    /// tail hint (the bound, one frame header, up to the next 4 KiB of the file): the log
    /// never wrote there, so they are damage from outside (a stray write, bit rot in the
    /// preallocated zeros), not a write a crash interrupted. An open does not read them
    /// (appends overwrite them as the segment fills), so they count as a problem. Returns
    /// the file offset where the open stops reading and how many bytes from there to the
    /// last non-zero one.
    pub fn written_past_hint(&self) -> Option<(u64, u64)> {
        let last = self.segments.last().filter(|s| s.last)?;
        let header = last.header_len;
        let data_len = last.file_len.saturating_sub(header);
        let limit =
            header + crate::storage::tail_hint::read_limit(header, self.tail_hint?, data_len);
        let torn = last.torn_tail.as_ref()?;
        let torn_end = torn.file_offset + torn.bytes;
        (torn_end > limit).then(|| (limit, torn_end - limit))
    }

    /// The files (segments, then checkpoints) written in a newer format version than this
    /// build reads, with that version. Such a store opens only with a newer deadletter
    /// ([`crate::Error::UnsupportedFormat`]), and this build did not check those files.
    pub fn newer_versions(&self) -> Vec<(&str, u16)> {
        let newer = |c: &CheckpointReport| {
            !c.pre_release && c.version.is_some_and(|v| v > self.supported_version)
        };
        self.versions(HeaderStatus::UnsupportedVersion, newer)
    }

    /// The files (segments, then checkpoints) written by a development build before
    /// release 0.1.0, with that build's format version. No release opens such a store
    /// ([`crate::Error::UnsupportedFormat`]), and this build did not check those files.
    pub fn pre_release_files(&self) -> Vec<(&str, u16)> {
        self.versions(HeaderStatus::PreRelease, |c| c.pre_release)
    }

    /// The segments whose header is `status`, then the checkpoints `pick` takes, with the
    /// format version each names.
    fn versions(
        &self,
        status: HeaderStatus,
        pick: impl Fn(&CheckpointReport) -> bool,
    ) -> Vec<(&str, u16)> {
        let segments = self.segments.iter().filter(|s| s.header == status);
        let segments = segments.filter_map(|s| Some((s.file.as_str(), s.version?)));
        let checkpoints = self.checkpoints.iter().filter(|c| pick(c));
        let checkpoints = checkpoints.filter_map(|c| Some((c.file.as_str(), c.version?)));
        segments.chain(checkpoints).collect()
    }

    /// True when no problem was found and every file was checked (none is in a format this
    /// build does not read).
    pub fn is_clean(&self) -> bool {
        self.problems() == 0
            && self.newer_versions().is_empty()
            && self.pre_release_files().is_empty()
    }

    /// The torn tail of the last segment, which the next open truncates, if any (up to the
    /// tail hint's bound: see [`VerifyReport::written_past_hint`]).
    pub fn torn_tail(&self) -> Option<&TornTailReport> {
        self.segments
            .last()
            .filter(|s| s.last)
            .and_then(|s| s.torn_tail.as_ref())
    }
}
