//! Settings: of a store ([`Config`]), of each queue ([`QueueOptions`]) and of compaction
//! ([`CompactionOptions`]).

use std::sync::Arc;
use std::time::Duration;

use crate::api::clock::{Clock, SystemClock};
use crate::error::{Error, Result};
use crate::storage::log::{Durability, RecoveryMode, DEFAULT_SEGMENT_SIZE};
use crate::storage::vfs::{RealFs, Vfs};

/// The largest payload a store accepts by default.
pub(crate) const DEFAULT_MAX_MESSAGE_SIZE: usize = 4 << 20;

/// Settings of one queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueOptions {
    /// Deliveries before a message goes to the DLQ (the seed design's default: 5).
    pub max_attempts: u32,
    /// How long a lease lasts before the message is visible again.
    pub visibility_timeout: Duration,
    /// Time to live given to messages enqueued without one (`None`: no expiry).
    pub default_ttl: Option<Duration>,
    /// Expired messages go to the DLQ with reason `expired` (true) or are dropped (false).
    pub expired_to_dlq: bool,
}

impl Default for QueueOptions {
    fn default() -> Self {
        QueueOptions {
            max_attempts: 5,
            visibility_timeout: Duration::from_secs(30),
            default_ttl: None,
            expired_to_dlq: true,
        }
    }
}

/// Store settings. `Config::default()` is durable (`Always`).
#[derive(Clone)]
pub struct Config {
    /// When writes become durable.
    pub durability: Durability,
    /// Size of a log segment file.
    pub segment_size: u64,
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
    /// Settings of queues opened with [`crate::Store::queue`].
    pub queue_defaults: QueueOptions,
    /// What to do with damaged committed data at open.
    pub recovery: RecoveryMode,
    /// Preallocate segment files with zeros.
    pub preallocate: bool,
    /// The clock.
    pub clock: Arc<dyn Clock>,
    /// The file system.
    pub fs: Arc<dyn Vfs>,
    /// Compaction: expiry, retention, checkpoints, disk reclaim.
    pub compaction: CompactionOptions,
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
            max_message_size: DEFAULT_MAX_MESSAGE_SIZE,
            dlq_name_pattern: "{queue_name}-dlq".into(),
            environment: None,
            code_version: None,
            retention: Some(Duration::from_secs(30 * 24 * 3600)),
            idempotency_window: Duration::from_secs(3600),
            max_history: 10,
            include_stack_traces: false,
            queue_defaults: QueueOptions::default(),
            recovery: RecoveryMode::Strict,
            preallocate: true,
            clock: Arc::new(SystemClock),
            fs: Arc::new(RealFs),
            compaction: CompactionOptions::default(),
        }
    }
}

impl Config {
    /// The default configuration without fsync (fast; a crash may lose recent writes).
    ///
    /// Segments are not preallocated either: preallocation exists so that an fsync after an
    /// append has no block allocation to write, and without fsyncs it would only write every
    /// segment twice (zeros, then data). Segment files are still sized up front (sparse).
    pub fn fast() -> Self {
        Config {
            durability: Durability::Never,
            preallocate: false,
            ..Config::default()
        }
    }

    /// Sets the durability.
    pub fn durability(mut self, d: Durability) -> Self {
        self.durability = d;
        self
    }

    /// Sets the clock.
    pub fn clock(mut self, clock: impl Clock + 'static) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    pub(crate) fn validate(&self) -> Result<()> {
        if self.max_message_size == 0 {
            return Err(Error::InvalidConfig("max_message_size of zero".into()));
        }
        if !self.dlq_name_pattern.contains("{queue_name}") {
            return Err(Error::InvalidConfig(
                "dlq_name_pattern must contain {queue_name}".into(),
            ));
        }
        if self.queue_defaults.max_attempts == 0 {
            return Err(Error::InvalidConfig("max_attempts of zero".into()));
        }
        let c = &self.compaction;
        if !(0.0..=1.0).contains(&c.relocate_below) || c.batch == 0 {
            return Err(Error::InvalidConfig(
                "compaction: relocate_below must be in [0, 1] and batch above 0".into(),
            ));
        }
        if c.interval.is_some_and(|d| d.is_zero()) {
            return Err(Error::InvalidConfig("compaction interval of zero".into()));
        }
        if self.max_history == 0 {
            return Err(Error::InvalidConfig("max_history of zero".into()));
        }
        Ok(())
    }
}

/// Compaction settings.
#[derive(Debug, Clone, PartialEq)]
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
