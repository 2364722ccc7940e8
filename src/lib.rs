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
//! use deadletter::pool::Retry;
//! use deadletter::{Config, Failure, Filter, Message, Page, ReplayOptions, Store, WorkerPool};
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
//! The crate root holds what every program uses: [`Store`], opened with a [`Config`] (one
//! directory, one log, any number of queues); [`Queue`], which enqueues and leases a
//! [`Message`]; [`Dlq`], browsed with a [`Filter`] a [`Page`] at a time and replayed with
//! [`ReplayOptions`]; [`WorkerPool`], whose handler returns a [`Failure`] saying transient
//! or permanent; one error type, [`Error`] ([`Result`]); and the backend contract,
//! [`MessageQueue`], [`DeadLetterQueue`] and [`Delivery`], which the embedded handles
//! implement and other engines can (the `deadletter-jetstream` package does, on NATS
//! JetStream), so a [`WorkerPool`] and code written against the traits run on either.
//! The rest is grouped by topic, in the modules below (each says what it holds): [`queue`],
//! [`dlq`], [`replay`], [`audit`], [`pool`], [`backend`], [`store`], [`clock`],
//! [`metrics`], [`recovery`], [`verify`], [`services`] (what runs on a store: compaction,
//! the guarded-replay driver, the control socket) and [`control`] (asking the process that
//! holds a store to change it).
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

/// Builder setters of the public types (in the API and the engine alike), one line each:
/// `name(arg: Type) => field = value;` becomes a `pub fn name(mut self, arg: Type) -> Self`
/// that sets `self.field` to `value` (several fields with commas), keeping the doc comment
/// written above it.
macro_rules! setters {
    ($($(#[$attr:meta])* $name:ident($($arg:ident: $ty:ty),*)
        => $($($field:ident).+ = $value:expr),+;)*) => {
        $(
            $(#[$attr])*
            pub fn $name(mut self $(, $arg: $ty)*) -> Self {
                $(self.$($field).+ = $value;)+
                self
            }
        )*
    };
}

mod api;
mod engine;
mod error;
mod rng;
mod storage;

#[cfg(feature = "sim")]
pub mod sim;

pub use api::backend::{DeadLetterQueue, Delivery, MessageQueue};
pub use api::core::config::Config;
pub use api::core::store::Store;
pub use api::core::types::Failure;
pub use api::dlq::{Dlq, Filter, Page, ReplayOptions};
pub use api::queue::{Message, Queue};
pub use api::worker::WorkerPool;
pub use error::{Error, Result};

pub mod store {
    //! Durability, compaction and a store's files: when writes are durable
    //! ([`Durability`], [`Config::durability`](crate::Config::durability)), compaction's
    //! settings and what a run did ([`CompactionOptions`], [`CompactionReport`]), the log's
    //! files ([`StorageStats`], [`SegmentInfo`]), and the on-disk format version this build
    //! writes and reads ([`FORMAT_VERSION`]: a store of an older version opens as it is, a
    //! newer one is refused with [`Error::UnsupportedFormat`](crate::Error::UnsupportedFormat);
    //! `docs/FORMAT.md`).
    pub use crate::api::core::config::CompactionOptions;
    pub use crate::api::core::store::StorageStats;
    pub use crate::engine::compaction::CompactionReport;
    pub use crate::storage::format::FORMAT_VERSION;
    pub use crate::storage::log::{Durability, SegmentInfo};
}

pub mod clock {
    //! The time a store reads: [`SystemClock`] by default, or a [`ManualClock`] that moves
    //! only when told to (for tests and simulations), or any [`Clock`]
    //! ([`Config::clock`](crate::Config::clock)).
    pub use crate::api::core::clock::{Clock, ManualClock, SystemClock};
}

pub mod queue {
    //! Producing and consuming: the options of an enqueue ([`EnqueueOptions`]) and of a
    //! queue ([`QueueOptions`]), a queue's counts ([`QueueStats`], [`QueueCounters`]), and
    //! the report of a failed delivery ([`FailureReport`]) with what came of it
    //! ([`FailureOutcome`]), a queue's recent rates ([`QueueRates`], [`RateWindow`]), what
    //! is wrong with a refused queue name ([`NameProblem`]), and a queue's own messages as
    //! an operator browses and changes them ([`QueuedMessage`], [`QueuedState`],
    //! [`MessageCounts`], [`MessageAction`], [`ActionReport`]).
    //! The handle itself is [`Queue`](crate::Queue).
    pub use crate::api::activity::{QueueRates, RateWindow};
    pub use crate::api::core::config::QueueOptions;
    pub use crate::api::queue::{
        ActionReport, EnqueueOptions, FailureOutcome, FailureReport, MessageAction, MessageCounts,
        QueueCounters, QueueStats, QueuedMessage, QueuedState, MOVED_BY_OPERATOR,
    };
    pub use crate::engine::envelope::MessageId;
    pub use crate::error::NameProblem;
}

pub mod dlq {
    //! What a DLQ holds and what it says about it: entries ([`DeadLetter`], with its
    //! [`FailureInfo`], each [`Attempt`], [`DlqMetadata`] and [`OriginalMetadata`]; a
    //! [`DeadLetterSummary`] for listings, a [`LazyDeadLetter`] decoded on demand), counts
    //! and analysis ([`DlqStats`], [`Analysis`], [`FailurePattern`], [`FailureTimeline`],
    //! failure [`Fingerprint`]s),
    //! the DLQ as it was ([`DlqAsOf`]), paging ([`Cursor`]) and filtering by predicate
    //! ([`EntryPredicate`]), size alerts ([`DlqAlert`]) and imports ([`Importer`]). The
    //! handle itself is [`Dlq`](crate::Dlq); replays are in [`crate::replay`].
    pub use crate::api::core::alert::DlqAlert;
    pub use crate::api::core::types::{DeadLetter, EntryStatus, OriginalMetadata};
    pub use crate::api::dlq::{
        Analysis, Cursor, DeadLetterSummary, DlqAsOf, DlqStats, EntryPredicate, FailurePattern,
        FailureTimeline, FingerprintStats, ImportReport, ImportedEntry, Importer, LazyDeadLetter,
        PastDlqEntry, PastDlqStats, HISTORY_HOURS,
    };
    pub use crate::engine::envelope::{Attempt, DlqMetadata, FailureInfo};
    pub use crate::engine::fingerprint::{
        message_template, Fingerprint, ParseFingerprintError, FIXED_NAMES,
    };
    pub use crate::engine::state::EXPIRED_KIND;
}

pub mod replay {
    //! Sending DLQ entries back: what a replay did ([`ReplayReport`]; its options are
    //! [`ReplayOptions`](crate::ReplayOptions)), corrected payloads ([`Correction`]) and
    //! transformed ones ([`TransformReport`], [`PayloadChange`]), and guarded replays,
    //! which go in waves behind a canary and stop by themselves when a wave fails again
    //! ([`GuardedReplayOptions`], [`GuardedReplay`], [`GuardedReplayState`]).
    pub use crate::api::dlq::{Correction, PayloadChange, ReplayReport, TransformReport};
    pub use crate::api::guarded::{GuardedReplay, GuardedReplayOptions, GuardedReplayState};
}

pub mod audit {
    //! Who changed what: the [`Actor`] a handle's changes are recorded as, the audit trail
    //! ([`AuditEntry`], [`AuditAction`], [`IdSet`]), what the store keeps of the past
    //! ([`AuditLimits`]), and a message's whole life ([`MessageHistory`], its
    //! [`HistoryStep`]s and [`HistoryEvent`]s, where it is now: [`MessageState`], how it
    //! left: [`Removal`]).
    pub use crate::api::core::actor::Actor;
    pub use crate::api::history::{HistoryEvent, HistoryStep, MessageHistory, MessageState};
    pub use crate::engine::state::{AuditAction, AuditEntry, AuditLimits, IdSet, Removal};
}

pub mod pool {
    //! The worker pool's parts: the running pool ([`RunningPool`], its [`PoolCounters`],
    //! what its shutdown did: [`ShutdownReport`]), the handler ([`Handler`]), retries
    //! ([`Retry`], [`Backoff`], [`Jitter`]) and how an error becomes a failure
    //! ([`Classifier`], [`FailureClass`], [`DECODE_ERROR_KIND`]); the pools attached to a
    //! store ([`AttachedPool`], [`PoolKind`], and [`Workers`], [`QueueWorkers`] with each
    //! queue's rates; a backend's registration: [`PoolPresence`], [`PoolAttachment`]).
    //! The builder itself is [`WorkerPool`](crate::WorkerPool).
    pub use crate::api::activity::{QueueWorkers, Workers};
    pub use crate::api::classify::Classifier;
    pub use crate::api::core::pools::{
        AttachedPool, PoolAttachment, PoolKind, PoolPresence, HEARTBEAT_EVERY_MS,
    };
    pub use crate::api::core::types::{FailureClass, DECODE_ERROR_KIND};
    pub use crate::api::retry::{Backoff, Jitter, Retry};
    pub use crate::api::worker::{Handler, PoolCounters, RunningPool, ShutdownReport};
}

pub mod backend {
    //! Beside the core traits a backend implements ([`MessageQueue`](crate::MessageQueue),
    //! [`DeadLetterQueue`](crate::DeadLetterQueue), [`Delivery`](crate::Delivery)): the
    //! worker pool's batching ([`WorkerQueue`], with defaults built on the core; a backend
    //! implements it for speed, and [`CoreOnly`] runs the pool on any core backend) and the
    //! mark of a deferred write ([`WriteMark`]).
    pub use crate::api::backend::{CoreOnly, WorkerQueue, WriteMark};
}

pub mod metrics {
    //! Numbers for monitoring: a snapshot of every queue ([`Metrics`], [`QueueMetrics`],
    //! with its Prometheus text form) and handler durations ([`DurationHistogram`],
    //! [`DURATION_BUCKETS_SECONDS`]).
    pub use crate::api::core::durations::{DurationHistogram, DURATION_BUCKETS_SECONDS};
    pub use crate::api::metrics::{Metrics, QueueMetrics};
}

pub mod recovery {
    //! What opening a store does with damage: the mode ([`RecoveryMode`],
    //! [`Config::recovery`](crate::Config::recovery)), its report ([`RecoveryReport`],
    //! [`TornTail`], [`QuarantinedRange`]), and where corruption was found
    //! ([`CorruptionKind`], [`CorruptionLocation`], in
    //! [`Error::Corruption`](crate::Error::Corruption)).
    pub use crate::error::{CorruptionKind, CorruptionLocation};
    pub use crate::storage::log::{QuarantinedRange, RecoveryMode, RecoveryReport, TornTail};
}

pub mod trace {
    //! Tracing a message's whole life: the W3C trace context it carries in its
    //! `traceparent` attribute ([`TraceParent`], set with
    //! [`EnqueueOptions::traceparent`](crate::queue::EnqueueOptions::traceparent)), kept
    //! through every retry, into the DLQ and through a replay. With the cargo feature
    //! `tracing`, deadletter emits `tracing` spans and events (target `deadletter`) for an
    //! enqueue (`deadletter.enqueue`), each handler call of the worker pools
    //! (`deadletter.handle`, with its outcome), a retry (`deadletter.retry`), a dead letter
    //! (`deadletter.dead_letter`) and a replay (`deadletter.replay`), each with the
    //! message's `traceparent` as a field: a subscriber (OpenTelemetry's, or a log) sees
    //! them as one trace. Without the feature nothing is emitted and nothing is linked in.
    //! Another backend emits the enqueue and replay events of its own through [`events`].
    pub use crate::api::trace::{
        events, ParseTraceParentError, TraceParent, TRACEPARENT_ATTRIBUTE,
    };
}

pub mod verify {
    //! A read-only check of a store's files ([`verify`], and [`verify_with`] with a
    //! progress callback): it takes no lock and changes nothing, and reports each segment
    //! ([`SegmentReport`], [`HeaderStatus`], [`TornTailReport`], [`DamagedRange`],
    //! [`LostTailReport`]), the checkpoints ([`CheckpointReport`]), the boundaries between
    //! segments ([`Boundary`], [`BoundaryKind`]) and positions the store needs below its
    //! first segment ([`MissingRangeReport`]) or last segments gone by their numbers
    //! ([`MissingSegmentsReport`]) in a
    //! [`VerifyReport`], with [`VerifyProgress`] as it goes.
    pub use crate::api::verify::{
        verify, verify_with, Boundary, BoundaryKind, CheckpointReport, DamagedRange, HeaderStatus,
        LostTailReport, MissingRangeReport, MissingSegmentsReport, SegmentReport, TornTailReport,
        VerifyProgress, VerifyReport,
    };
}

pub mod services {
    //! Services started on a store: each `start(&store)` returns a guard that runs the
    //! service until it is dropped, and keeps the store open meanwhile.
    //! [`Store::open`](crate::Store::open) starts the ones its [`Config`](crate::Config)
    //! asks for (by default the compaction schedule and the guarded-replay driver; the
    //! control socket on request) and keeps their guards with the store's handles; a
    //! program that opened its store with them off starts them itself.
    //!
    //! ```
    //! use std::time::Duration;
    //! use deadletter::services::{Compactor, ControlServer, GuardedReplayDriver};
    //! use deadletter::store::CompactionOptions;
    //! use deadletter::{Config, Store};
    //!
    //! # fn main() -> deadletter::Result<()> {
    //! # let dir = std::env::temp_dir()
    //! #     .join(format!("deadletter-doc-services-{}", std::process::id()));
    //! # let _ = std::fs::remove_dir_all(&dir);
    //! let bare = Config::fast()
    //!     .compaction(CompactionOptions::default().interval(None))
    //!     .guarded_replay_driver(false);
    //! let store = Store::open(&dir, bare)?; // runs no service
    //! let compactor = Compactor::start(&store, Duration::from_secs(10))?;
    //! let driver = GuardedReplayDriver::start(&store)?;
    //! let control = ControlServer::start(&store)?; // serves dir/control.sock
    //! let socket = control.path().to_path_buf();
    //! assert!(socket.exists());
    //!
    //! drop((control, driver, compactor)); // each stops, its thread joined
    //! assert!(!socket.exists());
    //! store.queue("orders")?.enqueue(b"ORD-1")?; // the store itself stays open
    //! # drop(store);
    //! # std::fs::remove_dir_all(&dir).ok();
    //! # Ok(())
    //! # }
    //! ```
    pub use crate::api::services::{Compactor, ControlServer, GuardedReplayDriver};
}

pub use api::services::control;

/// The async API (feature `async`): [`AsyncQueue`](async_api::AsyncQueue),
/// [`AsyncDlq`](async_api::AsyncDlq) and [`AsyncWorkerPool`](async_api::AsyncWorkerPool),
/// whose durable writes complete when the group commit's fsync covering them does, without
/// blocking the runtime's threads; and the traits they implement,
/// [`AsyncMessageQueue`](async_api::AsyncMessageQueue) and
/// [`AsyncDeadLetterQueue`](async_api::AsyncDeadLetterQueue), which other backends' async
/// handles (the JetStream backend's) implement too.
#[cfg(feature = "async")]
pub mod async_api {
    pub use crate::api::asynchronous::{
        AsyncDeadLetterQueue, AsyncDlq, AsyncHandler, AsyncMessageQueue, AsyncQueue,
        AsyncWorkerPool, Committed,
    };
}
