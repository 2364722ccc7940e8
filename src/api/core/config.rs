//! Settings: of a store ([`Config`]), of each queue ([`QueueOptions`]) and of compaction
//! ([`CompactionOptions`]).
//!
//! Each is built from its `Default` with chained setters named after its fields, such as
//! `Config::default().durability(Durability::Never).segment_size(8 << 20)`; the fields are
//! public to read. The structs are `#[non_exhaustive]`, so adding a setting is not a
//! breaking change.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::api::core::clock::{Clock, SystemClock};
use crate::engine::record::RECORD_OVERHEAD;
use crate::engine::state::AuditLimits;
use crate::error::{require, Error, NameProblem, Result};
use crate::storage::format::{self, HeaderError, FORMAT_VERSION, FRAME_HEADER_LEN, MAX_HEADER_LEN};
use crate::storage::log::{Durability, RecoveryMode, DEFAULT_SEGMENT_SIZE, FIRST_SEGMENT_SIZE};
use crate::storage::segment;
use crate::storage::vfs::Vfs;

/// The largest payload a store accepts by default.
pub(crate) const DEFAULT_MAX_MESSAGE_SIZE: usize = 4 << 20;

/// Settings of one queue (see [`crate::Store::queue_with`]). The default: 5 attempts, a
/// 30 s visibility timeout, no time to live, expired messages to the DLQ, no limit on
/// pending messages.
///
/// ```
/// use std::time::Duration;
/// use deadletter::queue::QueueOptions;
///
/// let options = QueueOptions::default()
///     .max_attempts(3)
///     .visibility_timeout(Duration::from_secs(5))
///     .default_ttl(Duration::from_secs(3600));
/// assert_eq!(options.max_attempts, 3);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct QueueOptions {
    /// Deliveries before a message goes to the DLQ (the seed design's default: 5).
    pub max_attempts: u32,
    /// How long a lease lasts before the message is visible again.
    pub visibility_timeout: Duration,
    /// Time to live given to messages enqueued without one (`None`: no expiry).
    pub default_ttl: Option<Duration>,
    /// Expired messages go to the DLQ with reason `expired` (true) or are dropped (false).
    pub expired_to_dlq: bool,
    /// The most messages the queue holds pending (waiting or in flight; its DLQ is not
    /// counted). An enqueue that would go past it is refused with `Error::QueueFull` and
    /// counted (`QueueStats::refused`, the metric `deadletter_enqueue_refused_total`);
    /// nothing already stored is dropped. A batch is accepted or refused whole. Replays,
    /// imports and retries are never refused. `None` (the default): no limit. A setting
    /// of the process, like the other queue options: nothing is written to disk.
    pub max_pending: Option<u64>,
}

impl Default for QueueOptions {
    fn default() -> Self {
        QueueOptions {
            max_attempts: 5,
            visibility_timeout: Duration::from_secs(30),
            default_ttl: None,
            expired_to_dlq: true,
            max_pending: None,
        }
    }
}

impl QueueOptions {
    setters! {
        /// Sets the deliveries before a message goes to the DLQ (at least 1).
        max_attempts(n: u32) => max_attempts = n;
        /// Sets how long a lease lasts before the message is visible again.
        visibility_timeout(timeout: Duration) => visibility_timeout = timeout;
        /// Gives messages enqueued without a time to live this one.
        default_ttl(ttl: Duration) => default_ttl = Some(ttl);
        /// Limits the messages pending in the queue (see [`QueueOptions::max_pending`]).
        max_pending(limit: u64) => max_pending = Some(limit);
        /// Sends expired messages to the DLQ (true, the default) or drops them (false).
        expired_to_dlq(to_dlq: bool) => expired_to_dlq = to_dlq;
    }
}

/// Store settings. `Config::default()` is durable ([`Durability::Always`]);
/// [`Config::fast`] does not fsync.
///
/// ```
/// use std::time::Duration;
/// use deadletter::Config;
/// use deadletter::clock::ManualClock;
/// use deadletter::queue::QueueOptions;
/// use deadletter::store::Durability;
///
/// let config = Config::default()
///     .durability(Durability::Interval(Duration::from_millis(50)))
///     .environment("staging")
///     .retention(Some(Duration::from_secs(7 * 24 * 3600)))
///     .queue_defaults(QueueOptions::default().max_attempts(3))
///     .clock(ManualClock::new(1_700_000_000_000));
/// assert_eq!(config.environment.as_deref(), Some("staging"));
/// ```
#[derive(Clone)]
#[non_exhaustive]
pub struct Config {
    /// When writes become durable.
    pub durability: Durability,
    /// The largest size of a log segment file (default 64 MiB). Segments start at
    /// `first_segment_size` and each roll doubles the next one's size up to this, so a
    /// small store stays small and a busy one gets large segments.
    pub segment_size: u64,
    /// The size of the segment a store starts with, and starts again with once compaction
    /// finds it drained (default 32 KiB; one above `segment_size` is taken as
    /// `segment_size`, one of 72 bytes or less is `Error::InvalidConfig`).
    pub first_segment_size: u64,
    /// Largest payload accepted.
    pub max_message_size: usize,
    /// DLQ naming pattern: `{queue_name}` and `{environment}` are replaced.
    pub dlq_name_pattern: String,
    /// Environment name recorded with failures.
    pub environment: Option<String>,
    /// Code version recorded with failures.
    pub code_version: Option<String>,
    /// How long DLQ entries are kept (`None`: until deleted). Default 30 days.
    pub retention: Option<Duration>,
    /// How long an idempotency key makes a repeated enqueue a no-op.
    pub idempotency_window: Duration,
    /// Failed attempts kept per message (older ones are counted, not kept).
    pub max_history: usize,
    /// Keep stack traces of failures (off by default: they may hold private data).
    pub include_stack_traces: bool,
    /// How many first lines of a failure's stack trace (or details) its fingerprint
    /// includes, besides the error kind and message template. Default 0.
    pub fingerprint_frames: usize,
    /// How much of DLQs' past the store keeps after the records are compacted away:
    /// tombstones of removed entries (default 100,000, for 30 days), the audit trail
    /// (10,000 entries, same retention) and lineage steps per message (64). See
    /// [`crate::Store::history`].
    pub audit: AuditLimits,
    /// Settings of queues opened with [`crate::Store::queue`].
    pub queue_defaults: QueueOptions,
    /// What to do with damaged committed data at open.
    pub recovery: RecoveryMode,
    /// Allocate segment files' blocks when they are made (`fallocate`; zeros written where
    /// the platform cannot), so that appends never need new space.
    pub preallocate: bool,
    /// The clock.
    pub clock: Arc<dyn Clock>,
    /// The file system (the real one when `None`); only tests set another.
    #[cfg(feature = "sim")]
    fs: Option<Arc<dyn Vfs>>,
    /// Compaction: expiry, retention, checkpoints, disk reclaim.
    pub compaction: CompactionOptions,
    /// Serve a control socket (`control.sock` in the store directory, mode 0600) while the
    /// store is open, through which other processes (the `deadletter` command) ask this
    /// one to make changes: replay, delete, purge, import, enqueue, mark reprocessed. Off
    /// by default. See [`crate::control`] (and [`crate::services::ControlServer`], to
    /// serve it on a store opened without).
    pub control_socket: bool,
    /// Drive guarded replays while the store is open: release each wave once the one before
    /// was handled, and rate-limited entries when their time comes. On by default; off, a
    /// program drives them itself ([`crate::services::GuardedReplayDriver`], or
    /// [`crate::Store::drive_guarded_replays`] by hand).
    pub guarded_replay_driver: bool,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("durability", &self.durability)
            .field("segment_size", &self.segment_size)
            .field("max_message_size", &self.max_message_size)
            .field("dlq_name_pattern", &self.dlq_name_pattern)
            .field("retention", &self.retention)
            .finish_non_exhaustive()
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            durability: Durability::Always,
            segment_size: DEFAULT_SEGMENT_SIZE,
            first_segment_size: FIRST_SEGMENT_SIZE,
            max_message_size: DEFAULT_MAX_MESSAGE_SIZE,
            dlq_name_pattern: "{queue_name}-dlq".into(),
            environment: None,
            code_version: None,
            retention: Some(Duration::from_secs(30 * 24 * 3600)),
            idempotency_window: Duration::from_secs(3600),
            max_history: 10,
            include_stack_traces: false,
            fingerprint_frames: 0,
            audit: AuditLimits::default(),
            queue_defaults: QueueOptions::default(),
            recovery: RecoveryMode::Strict,
            preallocate: true,
            clock: Arc::new(SystemClock),
            #[cfg(feature = "sim")]
            fs: None,
            compaction: CompactionOptions::default(),
            control_socket: false,
            guarded_replay_driver: true,
        }
    }
}

impl Config {
    /// The default configuration without fsync (fast; a crash may lose recent writes).
    ///
    /// Segments are not preallocated either: preallocation exists so that an append never
    /// needs new space (and an fsync after it no block allocation), which matters to durable
    /// writes. Segment files are still sized up front (sparse).
    pub fn fast() -> Self {
        Config::default()
            .durability(Durability::Never)
            .preallocate(false)
    }

    /// The defaults, with the segment size of the store in `dir` (and the largest message
    /// size lowered if such a segment could not hold one). Tools that open an existing
    /// store they did not create start from this, so that the segments they add are no
    /// larger than the store's own.
    ///
    /// A store's segments start small and grow, by doubling, to its segment size, so the
    /// largest segment in the directory is the nearest to it the files show: each segment
    /// declares its size in its header (the file's length is taken for a format this build
    /// does not read). So this reads the directory listing and the headers of the segments,
    /// takes no lock and changes nothing. A directory without a segment, or whose segments
    /// are all too small to hold a message (a store that has not grown yet), gives the
    /// defaults.
    pub fn for_existing_store(dir: impl AsRef<Path>) -> Config {
        let mut config = Config::default();
        let segments: Vec<(u64, std::path::PathBuf)> = std::fs::read_dir(dir.as_ref())
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| {
                let base = segment::parse_segment_name(&e.file_name().to_string_lossy())?;
                Some((base, e.path()))
            })
            .collect();
        let largest = segments
            .iter()
            .filter_map(|(_, path)| segment_file_len(path))
            .max();
        let overhead = RECORD_OVERHEAD as u64;
        // New records go to segments of this build's format, whose header is its version's.
        let header = (format::header_len(FORMAT_VERSION) + FRAME_HEADER_LEN) as u64;
        // A segment too small to hold a record of any size is not a size a store can have
        // (a file cut short): keep the defaults then.
        if let Some(len) = largest.filter(|&len| len > overhead + header) {
            config.segment_size = len;
            let room = len - overhead - header;
            config.max_message_size = config.max_message_size.min(room as usize);
        }
        config
    }

    setters! {
        /// Serves the control socket while the store is open (see [`Config::control_socket`]).
        control_socket(on: bool) => control_socket = on;
        /// Drives (or not) guarded replays while the store is open (see
        /// [`Config::guarded_replay_driver`]).
        guarded_replay_driver(on: bool) => guarded_replay_driver = on;
        /// Sets when writes become durable.
        durability(d: Durability) => durability = d;
        /// Sets the largest size of a log segment file ([`Config::segment_size`]).
        segment_size(bytes: u64) => segment_size = bytes;
        /// Sets the size of the segment a store starts with ([`Config::first_segment_size`]).
        first_segment_size(bytes: u64) => first_segment_size = bytes;
        /// Sets the largest payload accepted.
        max_message_size(bytes: usize) => max_message_size = bytes;
        /// Sets the DLQ naming pattern (`{queue_name}` and `{environment}` are replaced).
        dlq_name_pattern(pattern: impl Into<String>) => dlq_name_pattern = pattern.into();
        /// Sets how many first lines of a failure's stack trace (or details) its fingerprint
        /// includes ([`crate::dlq::Fingerprint`]).
        fingerprint_frames(frames: usize) => fingerprint_frames = frames;
        /// Sets how much of DLQs' past is kept ([`Config::audit`]).
        audit_limits(limits: AuditLimits) => audit = limits;
        /// Sets the environment name recorded with failures.
        environment(name: impl Into<String>) => environment = Some(name.into());
        /// Sets the code version recorded with failures.
        code_version(version: impl Into<String>) => code_version = Some(version.into());
        /// Sets how long DLQ entries are kept (`None`: until deleted).
        retention(retention: Option<Duration>) => retention = retention;
        /// Sets how long an idempotency key makes a repeated enqueue a no-op.
        idempotency_window(window: Duration) => idempotency_window = window;
        /// Sets how many failed attempts are kept per message.
        max_history(attempts: usize) => max_history = attempts;
        /// Keeps (or not) the stack traces of failures.
        include_stack_traces(include: bool) => include_stack_traces = include;
        /// Sets the options of queues opened with [`crate::Store::queue`].
        queue_defaults(options: QueueOptions) => queue_defaults = options;
        /// Sets what to do with damaged committed data at open.
        recovery(mode: RecoveryMode) => recovery = mode;
        /// Allocates (or not) segment files' blocks when they are made.
        preallocate(preallocate: bool) => preallocate = preallocate;
        /// Sets the clock.
        clock(clock: impl Clock + 'static) => clock = Arc::new(clock);
        /// Sets the compaction options.
        compaction(options: CompactionOptions) => compaction = options;
        /// Runs the store on another file system: the simulated disk or the fault injector of
        /// [`crate::sim`]. With the `sim` feature only.
        #[cfg(feature = "sim")]
        vfs(fs: Arc<dyn Vfs>) => fs = Some(fs);
    }

    /// The file system to open the store on: the one set with `vfs`, or `real`.
    pub(crate) fn vfs_or(&self, real: impl FnOnce() -> Arc<dyn Vfs>) -> Arc<dyn Vfs> {
        #[cfg(feature = "sim")]
        if let Some(fs) = &self.fs {
            return Arc::clone(fs);
        }
        real()
    }

    pub(crate) fn validate(&self) -> Result<()> {
        let c = &self.compaction;
        require(self.max_message_size > 0, "max_message_size of zero")?;
        require(
            self.dlq_name_pattern.contains("{queue_name}"),
            "dlq_name_pattern must contain {queue_name}",
        )?;
        // The rest of a DLQ name is the pattern's and the environment's: checked once here,
        // so that the DLQ of every valid queue name is a valid name too.
        let sample = self
            .dlq_name_pattern
            .replace("{queue_name}", "q")
            .replace("{environment}", self.environment.as_deref().unwrap_or(""));
        if let Some(problem) = NameProblem::of(&sample) {
            return Err(Error::InvalidConfig(format!(
                "dlq_name_pattern {:?} with environment {:?} makes DLQ names that are not \
                 valid queue names (queue \"q\" would get the DLQ {sample:?}, which {problem})",
                self.dlq_name_pattern,
                self.environment.as_deref().unwrap_or("")
            )));
        }
        require(self.queue_defaults.max_attempts > 0, "max_attempts of zero")?;
        require(
            (0.0..=1.0).contains(&c.relocate_below) && c.batch > 0,
            "compaction: relocate_below must be in [0, 1] and batch above 0",
        )?;
        require(
            !c.interval.is_some_and(|d| d.is_zero()),
            "compaction interval of zero",
        )?;
        require(self.max_history > 0, "max_history of zero")
    }
}

/// The length of the segment file at `path`, if it starts with a deadletter segment header
/// (of any format: one this build does not read is refused by the open, not here).
fn segment_file_len(path: &Path) -> Option<u64> {
    use std::io::Read;
    let mut file = std::fs::File::open(path).ok()?;
    let mut head = Vec::with_capacity(MAX_HEADER_LEN);
    file.by_ref()
        .take(MAX_HEADER_LEN as u64)
        .read_to_end(&mut head)
        .ok()?;
    match format::decode_segment_header(&head, FORMAT_VERSION) {
        // The size it was created at, even if the file was cut since.
        Ok(h) => Some(h.size),
        Err(HeaderError::Newer(_) | HeaderError::PreRelease(_)) => {
            file.metadata().ok().map(|m| m.len())
        }
        Err(_) => None,
    }
}

/// Compaction settings. The default: a run every minute, relocation below half live,
/// at most an hour of clock jump followed per run, batches of 256 records.
///
/// ```
/// use deadletter::Config;
/// use deadletter::store::CompactionOptions;
///
/// // No background thread: compaction runs only when `Store::compact_now` is called.
/// let config = Config::default().compaction(CompactionOptions::default().interval(None));
/// assert_eq!(config.compaction.interval, None);
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct CompactionOptions {
    /// How often the background thread runs (`None`: only [`crate::Store::compact_now`]).
    pub interval: Option<Duration>,
    /// Relocate the live records of the oldest sealed segments while, taken together, their
    /// live fraction is below this; sealed segments then take at most `1 / relocate_below`
    /// times the live bytes. Lower: less copying, more disk. 0 disables relocation.
    pub relocate_below: f64,
    /// The furthest the expiry clock follows a forward jump of the wall clock per reading.
    pub max_forward_jump: Duration,
    /// Records per write batch (expiry, retention, relocation); bounds how long a batch
    /// holds the store's lock.
    pub batch: usize,
}

impl Default for CompactionOptions {
    fn default() -> Self {
        CompactionOptions {
            interval: Some(Duration::from_secs(60)),
            relocate_below: 0.5,
            max_forward_jump: Duration::from_secs(3600),
            batch: 256,
        }
    }
}

impl CompactionOptions {
    setters! {
        /// Sets how often the background thread runs (`None`: no thread; only
        /// [`crate::Store::compact_now`]).
        interval(every: Option<Duration>) => interval = every;
        /// Sets the live fraction under which the oldest sealed segments are relocated (0
        /// disables relocation).
        relocate_below(fraction: f64) => relocate_below = fraction;
        /// Sets the furthest the expiry clock follows a forward jump of the wall clock per run.
        max_forward_jump(jump: Duration) => max_forward_jump = jump;
        /// Sets the records per write batch.
        batch(records: usize) => batch = records;
    }
}
