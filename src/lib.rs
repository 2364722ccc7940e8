//! deadletter: an embedded, persistent, log-structured queue engine with a first-class dead
//! letter queue.
//!
//! ```no_run
//! use deadletter::{Config, Store, Filter, ReplayOptions};
//! # fn main() -> deadletter::Result<()> {
//! let store = Store::open("./data", Config::default())?; // durable by default
//! let orders = store.queue("orders")?;                    // its DLQ: "orders-dlq"
//! orders.enqueue(br#"{"orderId":"ORD-1"}"#)?;
//! for msg in orders.lease(10)? {
//!     orders.ack(&msg)?;
//! }
//! let dlq = orders.dlq();
//! println!("{:?}", dlq.stats());
//! dlq.replay(&Filter::all(), &ReplayOptions::to_origin().reset_attempts())?;
//! # Ok(()) }
//! ```
//!
//! Layers, bottom up (see `docs/ARCHITECTURE.md`):
//! - [`vfs`]: the storage seam, every file operation behind one trait;
//! - [`format`]: the byte layout of segment headers and record frames;
//! - [`segment`]: one segment file and its recovery scan;
//! - [`log`]: the segmented log with group commit and crash recovery;
//! - [`record`]: the queue records stored in the log;
//! - [`checkpoint`], [`compaction`]: index snapshots, expiry and disk reclaim;
//! - [`state`]: the state machine that applies records to the in-memory index;
//! - [`store`], [`queue`], [`dlq`]: the API;
//! - [`retry`], [`worker`]: retry policies and the worker pool;
//! - [`metrics`], [`verify`]: counters for monitoring, and a read-only check of a store's
//!   files.
//!
//! The front ends are packages of their own: `deadletter-cli` (the `deadletter` command)
//! and `deadletter-dashboard` (the HTTP dashboard and `/metrics`, embeddable in a program).

#![warn(missing_docs)]

mod api;
mod engine;
mod rng;
mod storage;

pub mod error;
#[doc(hidden)]
pub mod sim;

pub use api::{alert, clock, config, dlq, metrics, queue, retry, store, types, verify, worker};
pub use engine::{checkpoint, compaction, record, state};
pub use storage::{format, log, segment, vfs};

pub use alert::DlqAlert;
pub use clock::{Clock, ManualClock, SystemClock};
pub use compaction::CompactionReport;
pub use config::{CompactionOptions, Config, QueueOptions};
pub use dlq::{Analysis, Dlq, DlqStats, FailurePattern, Filter, Page, ReplayOptions, ReplayReport};
pub use error::{CorruptionKind, Error, Result};
pub use log::{Durability, Log, LogOptions, RecoveryMode, RecoveryReport};
pub use metrics::{Metrics, QueueMetrics};
pub use queue::{EnqueueOptions, FailureOutcome, FailureReport, Message, Queue, QueueStats};
pub use retry::{Backoff, Jitter, Retry};
pub use store::Store;
pub use types::{
    Attempt, DeadLetter, DlqMetadata, EntryStatus, Failure, FailureClass, FailureInfo, MessageId,
    OriginalMetadata,
};
pub use worker::{Handler, PoolCounters, RunningPool, ShutdownReport, WorkerPool};
