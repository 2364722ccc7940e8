//! The log's settings: segment size, record limit, durability policy, preallocation,
//! recovery mode, write buffer and the reserve kept for payload-free records.

use std::time::Duration;

use crate::error::{require, Result};
use crate::storage::format::{self, FORMAT_VERSION, FRAME_HEADER_LEN};

/// The default size of a segment file, header included.
pub const DEFAULT_SEGMENT_SIZE: u64 = 64 << 20;

/// The largest segment file a log creates. Recovery relies on it: a segment whose header
/// is lost (and with it the size it declared) held no position past `base + MAX_SEGMENT_SIZE`.
pub const MAX_SEGMENT_SIZE: u64 = 1 << 40;

/// When writes are made durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Durability {
    /// fsync before every write returns; concurrent writers share one fsync (group
    /// commit).
    Always,
    /// Written and fsynced by a background thread at this interval; a crash loses at most
    /// about one interval of acknowledged writes.
    Interval(Duration),
    /// Never fsynced except when a segment is sealed (or on an explicit sync, such as
    /// `Store::sync`); writes are buffered in the process until the buffer fills or a read
    /// needs them.
    Never,
}

/// What recovery does with damaged committed data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RecoveryMode {
    /// Refuse to open, returning [`crate::Error::Corruption`] with the location.
    Strict,
    /// Open, skipping damaged ranges, and list them in
    /// [`RecoveryReport::quarantined`](super::RecoveryReport::quarantined).
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
    /// [`Log::append_each_with`](super::Log::append_each_with)) may fill; others roll to a new segment first. When the
    /// disk is full and a roll fails, those appends (the store's acks, leases, failures:
    /// records that carry no payload) can go on. 0: no reserve.
    pub reserve: u64,
    /// The format version new segments are written in, and the newest one read: segments
    /// of versions 1 to this are opened (each record read knows its segment's version), a
    /// newer one is [`crate::Error::UnsupportedFormat`]. An active segment of an older
    /// version is sealed at open and a new one started, so that every segment holds records
    /// of one version. The store always uses [`FORMAT_VERSION`]; log-level tests set the
    /// next one to play the next release's build.
    pub format_version: u16,
    /// A log position the log is known to have made durable (the store passes the position
    /// of its newest checkpoint): a log whose records end before it lost its tail
    /// ([`CorruptionKind::LostTail`](crate::recovery::CorruptionKind::LostTail)); under
    /// quarantine, appends resume at or past it, so positions never go backwards. 0: none
    /// known.
    pub high_water: u64,
    /// The store's checkpoints, as the store read them before opening the log, newest
    /// last (see [`CheckpointMark`]). The newest one's id breaks a tie between the
    /// segments' ids (see `docs/FORMAT.md`, store identity); of those that name the store's
    /// id (or none), the highest position counts as a durable high-water mark, as
    /// `high_water` does, and the highest sequence number is one the log must still hold.
    /// A checkpoint of another store says nothing about this log.
    pub checkpoints: Vec<CheckpointMark>,
}

/// What the log's recovery needs of one of the store's checkpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckpointMark {
    /// The log position it covers: the log had made it durable before it was written.
    pub position: u64,
    /// The store id it names (format version 2 on; `None` in version 1's).
    pub store_id: Option<u128>,
    /// The sequence number of the log's active segment when it was written (version 2
    /// on): the log held that segment then, and only compaction deletes segments, never
    /// the active one, so a log without a segment numbered that or higher lost its last
    /// segments ([`CorruptionKind::MissingSegments`](crate::recovery::CorruptionKind::MissingSegments)).
    pub seq: Option<u64>,
}

impl Default for LogOptions {
    fn default() -> Self {
        LogOptions {
            segment_size: DEFAULT_SEGMENT_SIZE,
            max_record_size: 16 << 20,
            durability: Durability::Always,
            preallocate: true,
            recovery: RecoveryMode::Strict,
            write_buffer: 256 << 10,
            reserve: 0,
            format_version: FORMAT_VERSION,
            high_water: 0,
            checkpoints: Vec::new(),
        }
    }
}

impl LogOptions {
    /// Checks the options; the log's open does, and a caller that creates the directory
    /// before opening the log ([`super::Log::lock_dir`]) does it first.
    pub(crate) fn validate(&self) -> Result<()> {
        require(
            self.segment_size <= MAX_SEGMENT_SIZE,
            format_args!("segment_size above {MAX_SEGMENT_SIZE} bytes (1 TiB)"),
        )?;
        require(self.format_version != 0, "format version 0")?;
        let overhead = format::header_len(self.format_version) + FRAME_HEADER_LEN;
        let room = self.segment_size.saturating_sub(overhead as u64);
        require(
            self.max_record_size > 0 && self.max_record_size as u64 <= room,
            format_args!(
                "max_record_size {} must be between 1 and segment_size - {} = {room}",
                self.max_record_size, overhead
            ),
        )?;
        require(
            self.max_record_size <= format::MAX_FRAME_BODY,
            "max_record_size above 4 GiB",
        )?;
        require(
            !matches!(self.durability, Durability::Interval(d) if d.is_zero()),
            "durability interval of zero",
        )
    }
}
