//! The log's settings: segment size, record limit, durability policy, preallocation,
//! recovery mode, write buffer and the reserve kept for payload-free records.

use std::time::Duration;

use crate::error::{require, Result};
use crate::storage::format::{self, FORMAT_VERSION, FRAME_HEADER_LEN};

/// The default size of a segment file, header included: the largest a store's segments
/// grow to (see [`LogOptions::first_segment_size`]).
pub const DEFAULT_SEGMENT_SIZE: u64 = 64 << 20;

/// The default size of a new log's first segment, header included: small enough that an
/// empty store takes under 64 KiB of disk (the segment, the checkpoint reserve, the lock,
/// the tail hint and the directory).
pub const FIRST_SEGMENT_SIZE: u64 = 32 << 10;

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
    /// The largest size of a segment file, header included: segments start at
    /// `first_segment_size` and grow to it.
    pub segment_size: u64,
    /// The size of a segment the log starts (a new log's first, a new active segment at
    /// open, the one after [`Log::restart_small`](super::Log::restart_small)), at most
    /// `segment_size`. Each roll doubles the size of the segment it seals, up to
    /// `segment_size`, and more when the records it must take need it (see
    /// [`LogOptions::next_segment_size`]).
    pub first_segment_size: u64,
    /// Largest record body accepted.
    pub max_record_size: usize,
    /// When appends become durable.
    pub durability: Durability,
    /// Allocate new segments' blocks up front (`fallocate`, never writing them; zeros where
    /// the platform cannot), so that appends cannot fail for lack of space inside a
    /// segment and `fdatasync` after an append has no block allocation or size to write.
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
            first_segment_size: FIRST_SEGMENT_SIZE,
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
    /// The size of the segment a log starts (see [`LogOptions::first_segment_size`]).
    pub fn start_size(&self) -> u64 {
        self.first_segment_size.min(self.segment_size).max(1)
    }

    /// The bytes at the end of a segment of `size` bytes kept for appends allowed into the
    /// reserve: [`LogOptions::reserve`] is what a segment of `segment_size` keeps, and a
    /// smaller one keeps its share.
    pub fn reserve_in(&self, size: u64) -> u64 {
        if self.segment_size == 0 {
            return 0;
        }
        (self.reserve as u128 * size as u128 / self.segment_size as u128) as u64
    }

    /// The bytes records may fill in a segment of `size` bytes, header excluded, and the
    /// reserve too unless `may_use_reserve`.
    pub fn room_in(&self, size: u64, may_use_reserve: bool) -> u64 {
        let header = format::header_len(self.format_version) as u64;
        let reserve = if may_use_reserve {
            0
        } else {
            self.reserve_in(size)
        };
        size.saturating_sub(header).saturating_sub(reserve)
    }

    /// The size of the segment that follows one of `sealed` bytes: twice as large, at least
    /// [`LogOptions::start_size`], at most `segment_size`, and doubled further while it
    /// could not take `need` bytes of frames (so a record larger than the segments so far
    /// gets a segment that holds it; `need` beyond what the largest segment holds gets the
    /// largest).
    pub fn next_segment_size(&self, sealed: u64, need: u64, may_use_reserve: bool) -> u64 {
        let max = self.segment_size;
        let mut size = sealed.saturating_mul(2).max(self.start_size()).min(max);
        while size < max && self.room_in(size, may_use_reserve) < need {
            size = size.saturating_mul(2).min(max);
        }
        size
    }

    /// Checks the options; the log's open does, and a caller that creates the directory
    /// before opening the log ([`super::Log::lock_dir`]) does it first.
    pub(crate) fn validate(&self) -> Result<()> {
        require(
            self.segment_size <= MAX_SEGMENT_SIZE,
            format_args!("segment_size above {MAX_SEGMENT_SIZE} bytes (1 TiB)"),
        )?;
        let header = format::header_len(self.format_version) + FRAME_HEADER_LEN;
        require(
            self.first_segment_size > header as u64,
            format_args!("first_segment_size must be above {header} bytes"),
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
