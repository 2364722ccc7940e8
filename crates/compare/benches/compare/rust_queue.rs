//! Contestant `rustqueue`: the `rustqueue` crate (an embeddable job queue with
//! retries and a DLQ, persisted in redb) used as its README suggests.
//!
//! Mapping onto the trait, through rustqueue's own `QueueManager` over a
//! `RedbStorage` (durable: redb `Immediate` commits, fsynced; plain: redb
//! `None` commits, persisted only by a later durable commit or a clean close,
//! because on Linux redb's `Eventual` fsyncs exactly like `Immediate`; this
//! plain mode is weaker than the others', which survive a process crash):
//!
//! * enqueue / batch: `push` / `push_batch` with `remove_on_complete` (acked
//!   jobs are deleted, as in a queue), `max_attempts = 5` and no backoff
//!   delay (a failed job is ready again at once);
//! * lease / ack: `pull` / `ack_batch`;
//! * transient failure: `fail` (retried by the engine) when the harness asks
//!   for no backoff; with a backoff, what `fail` does for a job it will retry
//!   with a delay (attempt counted, error kept, state `Delayed` until then, one
//!   `update_job`), since its delay comes from the job's options fixed at push
//!   time; delayed jobs come back through rustqueue's own
//!   `promote_delayed_jobs`, which a lease calls first while any are delayed
//!   (one lease at a time, as rustqueue's server runs it from one timer);
//! * permanent failure: rustqueue has no "fail permanently" call, so the job
//!   is moved with the storage's own `move_to_dlq` (what `fail` does once the
//!   attempts are spent); the error kind is stored as a `kind: ` prefix of the
//!   job's error text, the only error field rustqueue keeps;
//! * pending: `get_queue_stats` (waiting + active + delayed, counted on its
//!   state index);
//! * DLQ stats / filtered list: rustqueue only counts DLQ jobs and lists the
//!   first N; per-kind counts and kind filters read DLQ jobs and filter;
//! * replay: rustqueue has no replay; each job is read and written back as
//!   `Waiting` with `update_job` (one commit per job, no batch API exists).
//!
//! rustqueue is async (redb calls run on tokio's blocking pool), so each
//! store owns a small tokio runtime and blocks on every call.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use rustqueue::engine::queue::{BatchAckItem, BatchPushItem};
use rustqueue::storage::{RedbDurability, RedbStorage};
use rustqueue::{JobOptions, JobState, QueueManager, StorageBackend};
use tokio::runtime::Runtime;
use uuid::Uuid;

use crate::contestant::{BenchResult, Contestant, DlqEntry, DlqStats, Failure, Id, Leased};

const QUEUE: &str = "bench";
const JOB_NAME: &str = "msg";

/// The `rustqueue` store.
pub struct RustQueueStore {
    storage: Arc<dyn StorageBackend>,
    manager: QueueManager,
    /// Jobs this handle put in `Delayed` and has not seen promoted yet.
    delayed: AtomicUsize,
    /// Held while a lease promotes delayed jobs: one promoter at a time, as rustqueue's
    /// server runs it from one timer. Two promoting at once both moved the same job back
    /// to waiting, so two workers pulled it and the second ack found no job.
    promoting: Mutex<()>,
    // Declared last: dropped after the manager and storage that use it.
    rt: Runtime,
}

/// Opens (creating if needed) a `rustqueue` store in `dir`.
pub fn open(dir: &Path, durable: bool) -> BenchResult<Box<dyn Contestant>> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let durability = if durable {
        RedbDurability::Immediate
    } else {
        RedbDurability::None
    };
    let storage: Arc<dyn StorageBackend> = Arc::new(RedbStorage::new_with_durability(
        dir.join("jobs.redb"),
        durability,
    )?);
    let manager = QueueManager::new(Arc::clone(&storage));
    Ok(Box::new(RustQueueStore {
        storage,
        manager,
        delayed: AtomicUsize::new(0),
        promoting: Mutex::new(()),
        rt,
    }))
}

fn options() -> Option<JobOptions> {
    Some(JobOptions {
        max_attempts: Some(5),
        backoff_delay_ms: Some(0),
        remove_on_complete: Some(true),
        ..JobOptions::default()
    })
}

fn data(payload: &[u8]) -> BenchResult<serde_json::Value> {
    Ok(serde_json::Value::String(
        std::str::from_utf8(payload)?.to_owned(),
    ))
}

fn payload_of(job: &rustqueue::Job) -> Vec<u8> {
    match &job.data {
        serde_json::Value::String(s) => s.clone().into_bytes(),
        other => other.to_string().into_bytes(),
    }
}

/// Splits the stored error text back into (kind, message).
fn split_error(job: &rustqueue::Job) -> (String, String) {
    let text = job.last_error.as_deref().unwrap_or("");
    match text.split_once(": ") {
        Some((kind, msg)) => (kind.to_owned(), msg.to_owned()),
        None => ("unknown".to_owned(), text.to_owned()),
    }
}

fn to_entry(job: &rustqueue::Job) -> DlqEntry {
    let (error_kind, error) = split_error(job);
    DlqEntry {
        id: Id(job.id.as_u128()),
        payload: payload_of(job),
        error_kind,
        error,
        attempts: job.attempt,
    }
}

impl RustQueueStore {
    fn dlq_jobs(&self, limit: u32) -> BenchResult<Vec<rustqueue::Job>> {
        Ok(self.rt.block_on(self.manager.get_dlq_jobs(QUEUE, limit))?)
    }
}

impl Contestant for RustQueueStore {
    fn enqueue(&self, payload: &[u8]) -> BenchResult<()> {
        let value = data(payload)?;
        self.rt
            .block_on(self.manager.push(QUEUE, JOB_NAME, value, options()))?;
        Ok(())
    }

    fn enqueue_batch(&self, payloads: &[&[u8]]) -> BenchResult<()> {
        let items = payloads
            .iter()
            .map(|p| {
                Ok(BatchPushItem {
                    name: JOB_NAME.to_owned(),
                    data: data(p)?,
                    options: options(),
                })
            })
            .collect::<BenchResult<Vec<_>>>()?;
        self.rt.block_on(self.manager.push_batch(QUEUE, items))?;
        Ok(())
    }

    fn lease(&self, max: usize) -> BenchResult<Vec<Leased>> {
        let count = u32::try_from(max).unwrap_or(u32::MAX);
        if self.delayed.load(Ordering::Acquire) > 0 {
            // Another lease promoting now does it for this one too.
            if let Ok(_promoter) = self.promoting.try_lock() {
                let promoted = self.rt.block_on(self.manager.promote_delayed_jobs())?;
                self.delayed.fetch_sub(promoted as usize, Ordering::AcqRel);
            }
        }
        let jobs = self.rt.block_on(self.manager.pull(QUEUE, count))?;
        Ok(jobs
            .iter()
            .map(|job| Leased {
                id: Id(job.id.as_u128()),
                payload: payload_of(job),
                attempt: job.attempt + 1,
            })
            .collect())
    }

    fn ack(&self, ids: &[Id]) -> BenchResult<()> {
        let items = ids
            .iter()
            .map(|id| BatchAckItem {
                id: Uuid::from_u128(id.0),
                result: None,
            })
            .collect();
        let results = self.rt.block_on(self.manager.ack_batch(items))?;
        match results.iter().find(|r| !r.ok) {
            Some(bad) => Err(format!("ack {} failed: {:?}", bad.id, bad.error_message).into()),
            None => Ok(()),
        }
    }

    fn nack(&self, id: Id, failure: &Failure<'_>) -> BenchResult<()> {
        let uuid = Uuid::from_u128(id.0);
        match failure {
            Failure::Transient { error, retry_after } if !retry_after.is_zero() => {
                self.rt.block_on(async {
                    let mut job = self
                        .manager
                        .get_job(uuid)
                        .await?
                        .ok_or_else(|| format!("job {uuid} not found"))?;
                    if job.attempt + 1 >= job.max_attempts {
                        // The last attempt: `fail` moves it to the DLQ.
                        self.manager.fail(uuid, error).await?;
                        return BenchResult::Ok(());
                    }
                    let delay = chrono::Duration::from_std(*retry_after)?;
                    job.attempt += 1;
                    job.last_error = Some((*error).to_owned());
                    job.updated_at = chrono::Utc::now();
                    job.state = JobState::Delayed;
                    job.delay_until = Some(job.updated_at + delay);
                    self.storage.update_job(&job).await?;
                    self.delayed.fetch_add(1, Ordering::AcqRel);
                    BenchResult::Ok(())
                })?;
            }
            Failure::Transient { error, .. } => {
                self.rt.block_on(self.manager.fail(uuid, error))?;
            }
            Failure::Permanent { kind, error } => {
                let reason = format!("{kind}: {error}");
                self.rt.block_on(async {
                    let mut job = self
                        .manager
                        .get_job(uuid)
                        .await?
                        .ok_or_else(|| format!("job {uuid} not found"))?;
                    job.attempt += 1;
                    job.last_error = Some(reason.clone());
                    self.storage.move_to_dlq(&job, &reason).await?;
                    BenchResult::Ok(())
                })?;
            }
        }
        Ok(())
    }

    fn dlq_stats(&self) -> BenchResult<DlqStats> {
        let mut by_kind: BTreeMap<String, u64> = BTreeMap::new();
        let jobs = self.dlq_jobs(u32::MAX)?;
        for job in &jobs {
            *by_kind.entry(split_error(job).0).or_default() += 1;
        }
        Ok(DlqStats {
            total: jobs.len() as u64,
            by_kind,
        })
    }

    fn dlq_list(&self, kind: Option<&str>, limit: usize) -> BenchResult<Vec<DlqEntry>> {
        let limit32 = u32::try_from(limit).unwrap_or(u32::MAX);
        let Some(kind) = kind else {
            return Ok(self.dlq_jobs(limit32)?.iter().map(to_entry).collect());
        };
        // No server-side filter: fetch a growing prefix until it holds enough.
        let mut fetch = limit32.saturating_mul(2).max(1);
        loop {
            let jobs = self.dlq_jobs(fetch)?;
            let exhausted = jobs.len() < fetch as usize;
            let hits: Vec<DlqEntry> = jobs
                .iter()
                .map(to_entry)
                .filter(|e| e.error_kind == kind)
                .take(limit)
                .collect();
            if hits.len() >= limit || exhausted || fetch == u32::MAX {
                return Ok(hits);
            }
            fetch = fetch.saturating_mul(2);
        }
    }

    fn dlq_get(&self, id: Id) -> BenchResult<Option<DlqEntry>> {
        let job = self
            .rt
            .block_on(self.manager.get_job(Uuid::from_u128(id.0)))?;
        Ok(job
            .filter(|j| j.state == JobState::Dlq)
            .map(|j| to_entry(&j)))
    }

    fn dlq_replay(&self, ids: &[Id]) -> BenchResult<usize> {
        self.rt.block_on(async {
            let mut moved = 0;
            for id in ids {
                let Some(mut job) = self.manager.get_job(Uuid::from_u128(id.0)).await? else {
                    continue;
                };
                if job.state != JobState::Dlq {
                    continue;
                }
                job.state = JobState::Waiting;
                job.attempt = 0;
                job.last_error = None;
                self.storage.update_job(&job).await?;
                moved += 1;
            }
            BenchResult::Ok(moved)
        })
    }

    fn pending(&self) -> BenchResult<u64> {
        let c = self.rt.block_on(self.manager.get_queue_stats(QUEUE))?;
        Ok(c.waiting + c.active + c.delayed)
    }
}
