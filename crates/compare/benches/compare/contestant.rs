//! The contract every queue in the comparison implements.
//!
//! A contestant is one queue engine (deadletter, a directory of JSON files,
//! SQLite, ...) opened on a directory with a durability setting. The harness
//! drives every workload through the [`Contestant`] trait only, so adding an
//! engine means implementing this trait plus one `open` function and listing it
//! in `registry()` in `compare.rs`.

use std::collections::BTreeMap;
use std::error::Error;
use std::path::Path;
use std::time::Duration;

use crate::plan::Workload;
use crate::pool::{self, PoolRun};

/// Error type of every contestant operation (any engine error boxes into it).
pub type BenchError = Box<dyn Error + Send + Sync>;

/// Result type of every contestant operation.
pub type BenchResult<T> = Result<T, BenchError>;

/// Opaque message / DLQ-entry identifier. Each engine packs its own id into
/// 128 bits (a UUID, a rowid, a log sequence number, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Id(pub u128);

/// A message handed to a consumer by [`Contestant::lease`].
#[derive(Clone, Debug)]
pub struct Leased {
    /// Id to pass to [`Contestant::ack`] / [`Contestant::nack`].
    pub id: Id,
    /// The payload exactly as enqueued.
    pub payload: Vec<u8>,
    /// Delivery attempt, 1 on the first lease of a message.
    pub attempt: u32,
}

/// How a leased message failed.
#[derive(Clone, Copy, Debug)]
pub enum Failure<'a> {
    /// Retry: the message becomes leasable again after `retry_after` (zero:
    /// right away). An engine may dead-letter after its own maximum attempts,
    /// which must be at least 3.
    Transient {
        /// Error message.
        error: &'a str,
        /// The backoff before the next delivery.
        retry_after: Duration,
    },
    /// Give up now: the message moves to the dead letter queue.
    Permanent {
        /// Error kind (a short category that `dlq_list` can filter on).
        kind: &'a str,
        /// Error message.
        error: &'a str,
    },
}

/// One entry of the dead letter queue.
#[derive(Clone, Debug)]
pub struct DlqEntry {
    /// Id to pass to [`Contestant::dlq_get`] / [`Contestant::dlq_replay`].
    pub id: Id,
    /// The original payload.
    pub payload: Vec<u8>,
    /// Error kind given with [`Failure::Permanent`].
    pub error_kind: String,
    /// Error message given with [`Failure::Permanent`].
    pub error: String,
    /// Delivery attempts the message had when it was dead-lettered.
    pub attempts: u32,
}

/// Summary of the dead letter queue.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DlqStats {
    /// Entries currently in the DLQ (not replayed).
    pub total: u64,
    /// The same entries counted per error kind.
    pub by_kind: BTreeMap<String, u64>,
}

/// One queue engine under test. All methods take `&self`: the harness shares
/// one instance between threads for the concurrent-enqueue workload.
///
/// "One commit" below means one durable commit (fsync-backed) when the store
/// was opened durable, and the engine's cheapest commit otherwise.
pub trait Contestant: Send + Sync {
    /// Enqueue one message; one commit.
    fn enqueue(&self, payload: &[u8]) -> BenchResult<()>;
    /// Enqueue all `payloads` (1,000 in the benchmark); one commit for all.
    fn enqueue_batch(&self, payloads: &[&[u8]]) -> BenchResult<()>;
    /// Lease up to `max` ready messages, oldest first. Leased messages are
    /// invisible to other leases until acked or nacked (or the engine's own
    /// lease timeout, which must be longer than a benchmark run).
    fn lease(&self, max: usize) -> BenchResult<Vec<Leased>>;
    /// Acknowledge (delete) leased messages; one commit for all.
    fn ack(&self, ids: &[Id]) -> BenchResult<()>;
    /// Report a leased message as failed; one commit.
    fn nack(&self, id: Id, failure: &Failure<'_>) -> BenchResult<()>;
    /// Count the DLQ entries, in total and per error kind.
    fn dlq_stats(&self) -> BenchResult<DlqStats>;
    /// The first `limit` DLQ entries (oldest first), only those with
    /// `error_kind == kind` when `kind` is given.
    fn dlq_list(&self, kind: Option<&str>, limit: usize) -> BenchResult<Vec<DlqEntry>>;
    /// One DLQ entry by id.
    fn dlq_get(&self, id: Id) -> BenchResult<Option<DlqEntry>>;
    /// Move the given DLQ entries back to the main queue as ready messages;
    /// one commit for all. Returns how many were moved.
    fn dlq_replay(&self, ids: &[Id]) -> BenchResult<usize>;
    /// Messages in the main queue not yet acked or dead-lettered (ready, waiting
    /// out a backoff, or leased), counted by the engine itself (the `stats` of
    /// the reopen workload, and the check that a pool run left nothing behind).
    fn pending(&self) -> BenchResult<u64>;
    /// Runs `run.workers` consumers with `run.handler` until `run.completion`
    /// is done, then stops them with every outcome committed. The default is
    /// the best a user can do with this trait: each worker leases
    /// `run.lease_batch` messages in one commit, handles them, reports each
    /// failure, and acks the successes of the batch in one commit
    /// (`pool::batch_pool`). An engine with its own pool overrides it.
    fn run_pool(&self, run: &PoolRun) -> BenchResult<()> {
        pool::batch_pool(self, run)
    }
}

/// Opens (creating if needed) a contestant's store inside `dir`, which the
/// harness creates empty and removes afterwards. `durable` selects fsync-backed
/// commits. A store written with one durability must open with the other (the
/// harness fills stores non-durably, then reopens them for the measured part).
pub type OpenFn = fn(dir: &Path, durable: bool) -> BenchResult<Box<dyn Contestant>>;

/// A named contestant as listed in the registry.
#[derive(Clone, Copy)]
pub struct Entry {
    /// Name printed in the report (`deadletter` is the reference for ratios).
    pub name: &'static str,
    /// How to open a store.
    pub open: OpenFn,
    /// The workloads and durabilities it is measured on.
    pub runs: fn(Workload, bool) -> bool,
}

/// Every workload, both durabilities.
pub fn all_runs(_: Workload, _: bool) -> bool {
    true
}
