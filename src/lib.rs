//! deadletter: an embedded, persistent, log-structured queue engine with a first-class dead
//! letter queue. A program links it in, opens a directory, and gets durable queues whose
//! failing messages are retried with backoff, then kept in a dead letter queue (DLQ) with
//! their whole failure history, to be inspected, analysed and replayed once the cause is
//! fixed. No broker, no server.
//!
//! # A tour
//!
//! ```
//! use std::time::Duration;
//! use deadletter::{
//!     Config, Failure, Filter, Message, Page, ReplayOptions, Retry, Store, WorkerPool,
//! };
//!
//! # fn main() -> deadletter::Result<()> {
//! # let dir = std::env::temp_dir().join(format!("deadletter-doc-tour-{}", std::process::id()));
//! # let _ = std::fs::remove_dir_all(&dir);
//! // A store is a directory. By default every write is on disk (fsync) before it returns.
//! let store = Store::open(&dir, Config::default())?;
//! let orders = store.queue("orders")?; // created on first use; its DLQ: "orders-dlq"
//! orders.enqueue(br#"{"orderId":"ORD-1"}"#)?;
//! orders.enqueue(b"orderId=ORD-2")?; // not JSON: its handler will fail
//!
//! // Worker threads run a handler. A permanent failure sends the message to the DLQ at
//! // once; a transient one is retried with backoff, and dead-lettered after the last try.
//! let pool = WorkerPool::new(&orders)
//!     .workers(2)
//!     .retry(Retry::exponential(Duration::from_millis(10)).max_attempts(3))
//!     .start(|msg: &Message| {
//!         if msg.payload().starts_with(b"{") {
//!             Ok(()) // acked
//!         } else {
//!             Err(Failure::permanent("InvalidPayload", "not JSON"))
//!         }
//!     })?;
//! pool.run_until_idle()?;
//! pool.shutdown(Duration::from_secs(5))?;
//!
//! // Browsing the DLQ changes nothing; each entry keeps its payload byte for byte, its
//! // failure, every attempt and the message's metadata.
//! let dlq = orders.dlq();
//! assert_eq!(dlq.stats().by_error_kind["InvalidPayload"], 1);
//! for entry in dlq.list(&Filter::error_kind("InvalidPayload"), Page::first(50))? {
//!     assert_eq!(entry.payload, b"orderId=ORD-2");
//!     assert_eq!(entry.failure.error_message, "not JSON");
//! }
//!
//! // Once the handler is fixed: back to the queue, with fresh attempts.
//! let report = dlq.replay(&Filter::all(), &ReplayOptions::to_origin().reset_attempts())?;
//! assert_eq!(report.replayed.len(), 1);
//! assert_eq!(orders.len(), 1);
//! # drop((dlq, orders, store));
//! # std::fs::remove_dir_all(&dir).ok();
//! # Ok(())
//! # }
//! ```
//!
//! A message is in its queue or in its DLQ, never both and never neither, whatever the
//! crash point: each move is one record of the store's log. A delivery is counted in the
//! log before the handler runs, so a message whose handler kills the process reaches the
//! DLQ after `max_attempts` restarts instead of crash-looping.
//!
//! # What is here
//!
//! - [`Store`], opened with a [`Config`]: one directory, one log, any number of queues;
//! - [`Queue`]: enqueue ([`EnqueueOptions`]), lease a [`Message`], then ack, retry or
//!   dead-letter it ([`FailureReport`], [`FailureOutcome`]); [`QueueOptions`] per queue;
//! - [`Dlq`]: browse ([`Filter`], [`Page`]), count ([`DlqStats`]), analyse ([`Analysis`]),
//!   replay ([`ReplayOptions`], [`ReplayReport`]), delete and purge [`DeadLetter`] entries;
//!   [`DlqAlert`] hooks on its size;
//! - [`WorkerPool`]: threads that run a handler and report each outcome, with a [`Retry`]
//!   policy ([`Backoff`], [`Jitter`]) and a [`Failure`] saying transient or permanent;
//! - compaction ([`CompactionOptions`], [`CompactionReport`]), recovery
//!   ([`RecoveryMode`], [`RecoveryReport`]), durability ([`Durability`]), storage numbers
//!   ([`StorageStats`]), metrics ([`Metrics`]), and [`verify`], a read-only check of a
//!   store's files;
//! - one error type, [`Error`], and an injectable [`Clock`];
//! - the backend contract: [`MessageQueue`], [`DeadLetterQueue`] and [`Delivery`], which
//!   the embedded handles implement and other engines can (the `deadletter-jetstream`
//!   package does, on NATS JetStream), so a [`WorkerPool`] and code written against the
//!   traits run on either; and [`WorkerQueue`], the pool's batching, whose defaults are
//!   built on the core ([`CoreOnly`] runs the pool on any core backend);
//! - [`FORMAT_VERSION`], the on-disk format version this build writes and the newest it
//!   reads: a store written by an older version opens as it is, one written by a newer
//!   version is refused with [`Error::UnsupportedFormat`] (`docs/FORMAT.md`).
//!
//! The layers below (the segmented log, the records, the state machine) are private:
//! nothing public can write a raw record. `docs/ARCHITECTURE.md` describes them.
//!
//! ```compile_fail,E0599
//! # fn main() -> deadletter::Result<()> {
//! // A store never hands out its log: raw records cannot be appended from outside.
//! let store = deadletter::Store::open("./data", deadletter::Config::default())?;
//! store.log().append(b"not a record")?;
//! # Ok(()) }
//! ```
//!
//! The front ends are packages of their own: `deadletter-cli` (the `deadletter` command:
//! stats, list, show, analyze, replay, purge, export, import, verify, serve) and
//! `deadletter-dashboard` (the HTTP dashboard and `/metrics`, embeddable in a program).
//!
//! # Features
//!
//! The default build has none and depends on six crates (memmap2, crc32fast, bincode, serde,
//! crossbeam-channel, parking_lot).
//!
//! - `sim`: test machinery, off by default and not a stable API: the simulated disk, the
//!   fault injector, failpoints, debug hooks, and a narrow door to the storage layer for
//!   log-level tests, benches and fuzz targets (the `sim` module, documented when the
//!   feature is on).
//!
//! # Further reading
//!
//! These documents are in the repository and in the published package (their source view
//! on docs.rs):
//!
//! - [`docs/ARCHITECTURE.md`](https://docs.rs/crate/deadletter/latest/source/docs/ARCHITECTURE.md):
//!   the layers, the records, the state machine, compaction and checkpoints;
//! - [`docs/FORMAT.md`](https://docs.rs/crate/deadletter/latest/source/docs/FORMAT.md):
//!   the on-disk format byte by byte, recovery rules, and what is assumed of the file
//!   system;
//! - [`docs/RELIABILITY.md`](https://docs.rs/crate/deadletter/latest/source/docs/RELIABILITY.md):
//!   every fault class, what the store does about it, and the test that proves it;
//! - [`docs/CLI.md`](https://docs.rs/crate/deadletter/latest/source/docs/CLI.md): the
//!   command-line tool and the dashboard;
//! - [`docs/COMPARE.md`](https://docs.rs/crate/deadletter/latest/source/docs/COMPARE.md):
//!   throughput measured side by side with SQLite, a JSON-file queue and another Rust
//!   queue.

#![warn(missing_docs)]
#![deny(unsafe_code)]
// Unix only: the store's files are read and written at offsets with Unix's positioned I/O
// (std::os::unix::fs::FileExt) and the control socket is a Unix domain socket
// (std::os::unix::net). On any other system the build stops with the sentence below
// instead of a page of errors from those calls: `cfg(unix)` empties the crate there, and
// a crate-level attribute is the one place the error can be raised from that outlives
// the emptying (rustc adds "attribute value must be a literal", pointing at the same line).
#![cfg_attr(
    not(unix),
    doc = compile_error!(
        "deadletter supports Unix systems only (Linux, macOS, the BSDs): its store files use \
         Unix positioned reads and writes (std::os::unix::fs::FileExt) and its control \
         socket is a Unix domain socket (std::os::unix::net); Windows is not supported"
    )
)]
#![cfg(unix)]

mod api;
mod engine;
mod error;
mod rng;
mod storage;

#[cfg(feature = "sim")]
pub mod sim;

/// Services started on a store: each `start(&store)` returns a guard that runs the service
/// until it is dropped, and keeps the store open meanwhile. [`Store::open`] starts the ones
/// its [`Config`] asks for (by default the compaction schedule and the guarded-replay
/// driver; the control socket on request) and keeps their guards with the store's handles;
/// a program that opened its store with them off starts them itself.
///
/// ```
/// use std::time::Duration;
/// use deadletter::services::{Compactor, ControlServer, GuardedReplayDriver};
/// use deadletter::{CompactionOptions, Config, Store};
///
/// # fn main() -> deadletter::Result<()> {
/// # let dir = std::env::temp_dir().join(format!("deadletter-doc-services-{}", std::process::id()));
/// # let _ = std::fs::remove_dir_all(&dir);
/// let bare = Config::fast()
///     .compaction(CompactionOptions::default().interval(None))
///     .guarded_replay_driver(false);
/// let store = Store::open(&dir, bare)?; // runs no service
/// let compactor = Compactor::start(&store, Duration::from_secs(10))?;
/// let driver = GuardedReplayDriver::start(&store)?;
/// let control = ControlServer::start(&store)?; // serves dir/control.sock
/// let socket = control.path().to_path_buf();
/// assert!(socket.exists());
///
/// drop((control, driver, compactor)); // each stops, its thread joined
/// assert!(!socket.exists());
/// store.queue("orders")?.enqueue(b"ORD-1")?; // the store itself stays open
/// # drop(store);
/// # std::fs::remove_dir_all(&dir).ok();
/// # Ok(())
/// # }
/// ```
pub mod services {
    pub use crate::api::services::{Compactor, ControlServer, GuardedReplayDriver};
}

pub use api::backend::{CoreOnly, DeadLetterQueue, Delivery, MessageQueue, WorkerQueue, WriteMark};
pub use api::classify::Classifier;
pub use api::core::actor::Actor;
pub use api::core::alert::DlqAlert;
pub use api::core::clock::{Clock, ManualClock, SystemClock};
pub use api::core::config::{CompactionOptions, Config, QueueOptions};
pub use api::core::durations::{DurationHistogram, DURATION_BUCKETS_SECONDS};
pub use api::core::store::{StorageStats, Store};
pub use api::core::types::{
    DeadLetter, EntryStatus, Failure, FailureClass, OriginalMetadata, DECODE_ERROR_KIND,
};
pub use api::dlq::{
    Analysis, Cursor, DeadLetterSummary, Dlq, DlqAsOf, DlqStats, EntryPredicate, FailurePattern,
    FailureTimeline, Filter, FingerprintStats, ImportReport, ImportedEntry, Importer, Page,
    PastDlqEntry, PastDlqStats, ReplayOptions, ReplayReport, HISTORY_HOURS,
};
pub use api::guarded::{GuardedReplay, GuardedReplayOptions, GuardedReplayState};
pub use api::history::{HistoryEvent, HistoryStep, MessageHistory, MessageState};
pub use api::metrics::{Metrics, QueueMetrics};
pub use api::queue::{EnqueueOptions, FailureOutcome, FailureReport, Message, Queue, QueueStats};
pub use api::retry::{Backoff, Jitter, Retry};
pub use api::services::control;
pub use api::verify::{
    verify, verify_with, Boundary, BoundaryKind, CheckpointReport, DamagedRange, HeaderStatus,
    LostTailReport, SegmentReport, TornTailReport, VerifyOptions, VerifyProgress, VerifyReport,
};
pub use api::worker::{Handler, PoolCounters, RunningPool, ShutdownReport, WorkerPool};
pub use engine::compaction::CompactionReport;
pub use engine::envelope::{Attempt, DlqMetadata, FailureInfo, MessageId};
pub use engine::fingerprint::{message_template, Fingerprint, ParseFingerprintError};
pub use engine::state::{AuditAction, AuditEntry, AuditLimits, IdSet, Removal, EXPIRED_KIND};
pub use error::{CorruptionKind, CorruptionLocation, Error, Result};
pub use storage::format::FORMAT_VERSION;
pub use storage::log::{
    Durability, QuarantinedRange, RecoveryMode, RecoveryReport, SegmentInfo, TornTail,
};
