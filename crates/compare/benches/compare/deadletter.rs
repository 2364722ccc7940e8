//! The `deadletter` contestant: the engine itself, through its public API only, written
//! against the backend traits so that the JetStream backend runs the same code
//! (`Backend`).
//!
//! One store per run with one queue (`bench`, at most 3 deliveries, a lease longer than any
//! run). Durable runs use `Durability::Always` (group commit), the others `Never`.
//! Compaction's background thread is off so that it cannot run inside a timed section.
//! Pool runs use the engine's own `WorkerPool` (batched reservations, acks committed in
//! groups), with the run's backoff as a fixed retry delay. The DLQ reads ask for entry
//! summaries (`list_summaries`, `summary`): the harness's entry holds the fields SQLite's
//! table has, so neither side decodes more than it returns.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use deadletter::backend::WorkerQueue;
use deadletter::dlq::DeadLetterSummary;
use deadletter::pool::Retry;
use deadletter::queue::{FailureReport, QueueOptions};
use deadletter::store::{CompactionOptions, Durability};
use deadletter::{
    Config, DeadLetterQueue, Delivery, Failure as DlFailure, Filter, Page, ReplayOptions, Store,
    WorkerPool,
};
use parking_lot::Mutex;

use crate::contestant::{BenchResult, Contestant, DlqEntry, DlqStats, Failure, Id, Leased};
use crate::pool::{Outcome, PoolRun};

/// Deliveries of a message at most (the third failure dead-letters it).
const MAX_ATTEMPTS: u32 = 3;
/// Lease length: longer than any run.
const LEASE: Duration = Duration::from_secs(3600);

/// The harness's store settings: durable is `Always`, else `Never`; no background
/// compaction.
pub fn config(durable: bool) -> Config {
    Config::default()
        .durability(if durable {
            Durability::Always
        } else {
            Durability::Never
        })
        .compaction(CompactionOptions::default().interval(None))
}

/// The queue every run uses.
pub fn bench_queue(store: &Store) -> deadletter::Result<deadletter::Queue> {
    store.queue_with(
        "bench",
        QueueOptions::default()
            .max_attempts(MAX_ATTEMPTS)
            .visibility_timeout(LEASE),
    )
}

/// A contestant on any deadletter backend: the embedded store here, JetStream in
/// `jetstream.rs`. `G` is kept alive after the queue handle (the store, or a server).
pub struct Backend<Q: WorkerQueue, G: Send + Sync + 'static = ()> {
    queue: Q,
    /// Deliveries handed out and not yet reported, by id (an ack needs the delivery).
    leased: Mutex<HashMap<u64, Q::Message>>,
    _guard: G,
}

impl<Q: WorkerQueue, G: Send + Sync + 'static> Backend<Q, G> {
    /// A contestant on `queue`; `guard` is dropped after it.
    pub fn new(queue: Q, guard: G) -> Self {
        Backend {
            queue,
            leased: Mutex::new(HashMap::new()),
            _guard: guard,
        }
    }

    fn take(&self, id: Id) -> BenchResult<Q::Message> {
        self.leased
            .lock()
            .remove(&(id.0 as u64))
            .ok_or_else(|| format!("message {} is not leased", id.0).into())
    }
}

/// Opens the contestant's store in `dir`.
pub fn open(dir: &Path, durable: bool) -> BenchResult<Box<dyn Contestant>> {
    let store = Store::open(dir, config(durable))?;
    let queue = bench_queue(&store)?;
    Ok(Box::new(Backend::new(queue, store)))
}

/// The harness's entry: the fields SQLite's table holds, from the summary a listing reads
/// (`DeadLetterSummary`: no failure history or metadata decoded, as SQLite stores none).
fn entry(e: DeadLetterSummary) -> DlqEntry {
    DlqEntry {
        id: Id(e.id as u128),
        attempts: e.attempts,
        error_kind: e.error_kind,
        error: e.error_message,
        payload: e.payload,
    }
}

impl<Q: WorkerQueue, G: Send + Sync + 'static> Contestant for Backend<Q, G> {
    fn enqueue(&self, payload: &[u8]) -> BenchResult<()> {
        self.queue.enqueue(payload)?;
        Ok(())
    }

    fn enqueue_batch(&self, payloads: &[&[u8]]) -> BenchResult<()> {
        self.queue.enqueue_batch(payloads)?;
        Ok(())
    }

    fn lease(&self, max: usize) -> BenchResult<Vec<Leased>> {
        let msgs = self.queue.lease(max)?;
        let out = msgs
            .iter()
            .map(|m| Leased {
                id: Id(m.id() as u128),
                payload: m.payload().to_vec(),
                attempt: m.attempt(),
            })
            .collect();
        let mut leased = self.leased.lock();
        for m in msgs {
            leased.insert(m.id(), m);
        }
        Ok(out)
    }

    fn ack(&self, ids: &[Id]) -> BenchResult<()> {
        let msgs = ids
            .iter()
            .map(|&id| self.take(id))
            .collect::<BenchResult<Vec<_>>>()?;
        self.queue.ack_all(&msgs)?;
        Ok(())
    }

    fn nack(&self, id: Id, failure: &Failure<'_>) -> BenchResult<()> {
        let msg = self.take(id)?;
        match *failure {
            Failure::Transient { error, retry_after } => {
                let f = DlFailure::transient("Transient", error);
                let at = self.queue.now_ms() + retry_after.as_millis() as u64;
                self.queue.retry(&msg, &FailureReport::new(&f), at)?;
            }
            Failure::Permanent { kind, error } => {
                let f = DlFailure::permanent(kind, error);
                self.queue.dead_letter(&msg, &FailureReport::new(&f))?;
            }
        }
        Ok(())
    }

    fn dlq_stats(&self) -> BenchResult<DlqStats> {
        let s = self.queue.dlq().stats()?;
        Ok(DlqStats {
            total: s.total,
            by_kind: s.by_error_kind,
        })
    }

    fn dlq_list(&self, kind: Option<&str>, limit: usize) -> BenchResult<Vec<DlqEntry>> {
        let filter = kind.map(Filter::error_kind).unwrap_or_default();
        let list = self
            .queue
            .dlq()
            .list_summaries(&filter, Page::first(limit))?;
        Ok(list.into_iter().map(entry).collect())
    }

    fn dlq_get(&self, id: Id) -> BenchResult<Option<DlqEntry>> {
        match self.queue.dlq().summary(id.0 as u64) {
            Ok(e) => Ok(Some(entry(e))),
            Err(deadletter::Error::NotFound(_)) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    fn dlq_replay(&self, ids: &[Id]) -> BenchResult<usize> {
        let ids: Vec<u64> = ids.iter().map(|id| id.0 as u64).collect();
        let report = self
            .queue
            .dlq()
            .replay_ids(&ids, &ReplayOptions::to_origin())?;
        Ok(report.replayed.len())
    }

    fn pending(&self) -> BenchResult<u64> {
        let s = self.queue.stats()?;
        Ok(s.counts.ready + s.counts.in_flight)
    }

    fn run_pool(&self, run: &PoolRun) -> BenchResult<()> {
        let handler = Arc::clone(&run.handler);
        let pool = WorkerPool::new(&self.queue)
            .workers(run.workers)
            .retry(
                Retry::fixed(run.retry_after)
                    .no_jitter()
                    .max_attempts(MAX_ATTEMPTS),
            )
            .lease(LEASE)
            .start(
                move |m: &Q::Message| match handler(m.payload(), m.attempt()) {
                    Outcome::Ack => Ok(()),
                    Outcome::Retry(error) => Err(DlFailure::transient("Transient", error)),
                    Outcome::Dead { kind, error } => Err(DlFailure::permanent(kind, error)),
                },
            )?;
        while !run.completion.wait(Duration::from_millis(100)) {}
        pool.shutdown(Duration::from_secs(60))?;
        Ok(())
    }
}
