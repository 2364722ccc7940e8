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
//!   traits run on either.
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
//! The front ends are packages of their own: `deadletter-cli` (the `deadletter` command)
//! and `deadletter-dashboard` (the HTTP dashboard and `/metrics`, embeddable in a program).
//!
//! # Features
//!
//! - `sim`: test machinery, off by default and not a stable API: the simulated disk, the
//!   fault injector, failpoints, debug hooks, and a narrow door to the storage layer for
//!   log-level tests, benches and fuzz targets (see `sim`).

#![warn(missing_docs)]
#![deny(unsafe_code)]

mod api;
mod engine;
mod error;
mod rng;
mod storage;

#[cfg(feature = "sim")]
pub mod sim;

pub use api::alert::DlqAlert;
pub use api::backend::{DeadLetterQueue, Delivery, MessageQueue};
pub use api::clock::{Clock, ManualClock, SystemClock};
pub use api::config::{CompactionOptions, Config, QueueOptions};
pub use api::dlq::{
    Analysis, Dlq, DlqStats, FailurePattern, Filter, Page, ReplayOptions, ReplayReport,
};
pub use api::metrics::{Metrics, QueueMetrics};
pub use api::queue::{EnqueueOptions, FailureOutcome, FailureReport, Message, Queue, QueueStats};
pub use api::retry::{Backoff, Jitter, Retry};
pub use api::store::{StorageStats, Store};
pub use api::types::{DeadLetter, EntryStatus, Failure, FailureClass, OriginalMetadata};
pub use api::verify::{
    verify, verify_with, Boundary, BoundaryKind, CheckpointReport, DamagedRange, HeaderStatus,
    SegmentReport, TornTailReport, VerifyOptions, VerifyProgress, VerifyReport,
};
pub use api::worker::{Handler, PoolCounters, RunningPool, ShutdownReport, WorkerPool};
pub use engine::compaction::CompactionReport;
pub use engine::envelope::{Attempt, DlqMetadata, FailureInfo, MessageId};
pub use engine::state::EXPIRED_KIND;
pub use error::{CorruptionKind, CorruptionLocation, Error, Result};
pub use storage::log::{
    Durability, QuarantinedRange, RecoveryMode, RecoveryReport, SegmentInfo, TornTail,
};
