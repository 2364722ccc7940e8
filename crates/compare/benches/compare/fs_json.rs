//! Contestant `filesystem-json`: the "one JSON file per message" design.
//!
//! A faithful, careful Rust rendition of the classic directory-backed DLQ
//! (a Python blog design: the DLQ is a directory holding one pretty-printed
//! JSON document per failed message, named by a random UUID, written whole;
//! listing and statistics scan the directory and parse every file; replay
//! touches the entry's file). Here the main queue uses the same layout:
//!
//! * `queue/<uuid>.json`    ready messages,
//! * `inflight/<uuid>.json` leased messages (a lease is a `rename` into it),
//! * `dlq/<uuid>.json`      dead-lettered messages, with error kind, error
//!   message, attempts and failure time.
//!
//! Ordering: file names are random, so the FIFO order lives in memory and is
//! rebuilt on open by parsing every queued file and sorting by enqueue time.
//!
//! Durability: with `durable`, every written file is fsynced and so is its
//! directory (once per call for batch operations). Without it nothing is
//! fsynced, exactly like the original. A lease is never fsynced: a lost lease
//! only means redelivery, and on open every `inflight/` file is moved back to
//! `queue/` (the previous process is gone). A queued file that does not parse
//! on open is a torn write of an enqueue that never returned, and is removed.
//!
//! A retry backoff is kept in memory only: after a reopen a message waiting
//! out its backoff is ready at once.
//!
//! Replay moves the DLQ file back into `queue/` with one `rename` (atomic; the
//! file keeps its error history and attempt count).

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap, VecDeque};
use std::fs::{self, File};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::contestant::{BenchResult, Contestant, DlqEntry, DlqStats, Failure, Id, Leased};

/// The JSON document stored per message (queue, inflight and DLQ alike).
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Record {
    id: String,
    message: String,
    attempts: u32,
    enqueued_at_ns: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error_kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    failed_at_ns: Option<u64>,
}

/// In-memory view of the queue: FIFO of ready ids, ids waiting out a retry
/// backoff (by the time they become ready), and the leased records.
#[derive(Default)]
struct State {
    ready: VecDeque<Uuid>,
    backoff: BinaryHeap<Reverse<(Instant, Uuid)>>,
    leased: HashMap<Uuid, Record>,
}

impl State {
    /// Moves the ids whose backoff has ended to the end of the FIFO.
    fn promote_due(&mut self) {
        let now = Instant::now();
        while let Some(Reverse((at, id))) = self.backoff.peek().copied() {
            if at > now {
                break;
            }
            self.backoff.pop();
            self.ready.push_back(id);
        }
    }
}

/// The `filesystem-json` store.
pub struct FsJson {
    durable: bool,
    queue: PathBuf,
    inflight: PathBuf,
    dlq: PathBuf,
    state: Mutex<State>,
}

/// Opens (creating if needed) a `filesystem-json` store in `dir`.
pub fn open(dir: &Path, durable: bool) -> BenchResult<Box<dyn Contestant>> {
    Ok(Box::new(FsJson::open(dir, durable)?))
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

fn file_name(id: Uuid) -> String {
    format!("{id}.json")
}

fn uuid_of(id: Id) -> Uuid {
    Uuid::from_u128(id.0)
}

/// Writes a whole file; with `durable` the file is fsynced before returning.
fn write_file(path: &Path, bytes: &[u8], durable: bool) -> std::io::Result<()> {
    if durable {
        let mut f = File::create(path)?;
        f.write_all(bytes)?;
        f.sync_all()
    } else {
        fs::write(path, bytes)
    }
}

/// Fsyncs a directory so that entries created, renamed or removed in it persist.
fn sync_dir(path: &Path) -> std::io::Result<()> {
    File::open(path)?.sync_all()
}

/// Reads and parses one record; `Ok(None)` when the file does not exist.
fn read_record(path: &Path) -> BenchResult<Option<Record>> {
    match fs::read(path) {
        Ok(bytes) => Ok(Some(serde_json::from_slice(&bytes)?)),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e.into()),
    }
}

fn to_dlq_entry(rec: Record) -> BenchResult<DlqEntry> {
    let id = Uuid::parse_str(&rec.id)?;
    Ok(DlqEntry {
        id: Id(id.as_u128()),
        payload: rec.message.into_bytes(),
        error_kind: rec.error_kind.unwrap_or_default(),
        error: rec.error.unwrap_or_default(),
        attempts: rec.attempts,
    })
}

/// Lists the `*.json` files of a directory.
fn json_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "json") {
            out.push(path);
        }
    }
    Ok(out)
}

impl FsJson {
    fn open(dir: &Path, durable: bool) -> BenchResult<Self> {
        let queue = dir.join("queue");
        let inflight = dir.join("inflight");
        let dlq = dir.join("dlq");
        for d in [&queue, &inflight, &dlq] {
            fs::create_dir_all(d)?;
        }
        // Leases of a previous process are void: move them back.
        let stale = json_files(&inflight)?;
        for path in &stale {
            if let Some(name) = path.file_name() {
                fs::rename(path, queue.join(name))?;
            }
        }
        if durable && !stale.is_empty() {
            sync_dir(&inflight)?;
            sync_dir(&queue)?;
        }
        // Rebuild the FIFO: parse every queued file, sort by enqueue time.
        let mut found = Vec::new();
        for path in json_files(&queue)? {
            let parsed = fs::read(&path)
                .ok()
                .and_then(|b| serde_json::from_slice::<Record>(&b).ok())
                .and_then(|r| Uuid::parse_str(&r.id).ok().map(|id| (r.enqueued_at_ns, id)));
            match parsed {
                Some(item) => found.push(item),
                None => fs::remove_file(&path)?,
            }
        }
        found.sort_unstable();
        let state = State {
            ready: found.into_iter().map(|(_, id)| id).collect(),
            ..State::default()
        };
        Ok(Self {
            durable,
            queue,
            inflight,
            dlq,
            state: Mutex::new(state),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave `State` half-updated
        // in a way that matters for a benchmark; keep going.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Writes one new message file into `queue/` (no directory fsync).
    fn write_new(&self, payload: &[u8], now: u64) -> BenchResult<Uuid> {
        let id = Uuid::new_v4();
        let rec = Record {
            id: id.to_string(),
            message: std::str::from_utf8(payload)?.to_owned(),
            attempts: 0,
            enqueued_at_ns: now,
            error_kind: None,
            error: None,
            failed_at_ns: None,
        };
        let bytes = serde_json::to_vec_pretty(&rec)?;
        write_file(&self.queue.join(file_name(id)), &bytes, self.durable)?;
        Ok(id)
    }

    fn take_leased(&self, id: Id) -> BenchResult<(Uuid, Record)> {
        let uuid = uuid_of(id);
        let rec = self
            .lock()
            .leased
            .remove(&uuid)
            .ok_or_else(|| format!("message {uuid} is not leased"))?;
        Ok((uuid, rec))
    }
}

impl Contestant for FsJson {
    fn enqueue(&self, payload: &[u8]) -> BenchResult<()> {
        let id = self.write_new(payload, now_ns())?;
        if self.durable {
            sync_dir(&self.queue)?;
        }
        self.lock().ready.push_back(id);
        Ok(())
    }

    fn enqueue_batch(&self, payloads: &[&[u8]]) -> BenchResult<()> {
        let now = now_ns();
        let mut ids = Vec::with_capacity(payloads.len());
        for p in payloads {
            ids.push(self.write_new(p, now)?);
        }
        if self.durable {
            sync_dir(&self.queue)?;
        }
        self.lock().ready.extend(ids);
        Ok(())
    }

    fn lease(&self, max: usize) -> BenchResult<Vec<Leased>> {
        let ids: Vec<Uuid> = {
            let mut st = self.lock();
            st.promote_due();
            let n = max.min(st.ready.len());
            st.ready.drain(..n).collect()
        };
        let mut out = Vec::with_capacity(ids.len());
        let mut records = Vec::with_capacity(ids.len());
        for id in ids {
            let name = file_name(id);
            let target = self.inflight.join(&name);
            match fs::rename(self.queue.join(&name), &target) {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::NotFound => continue,
                Err(e) => return Err(e.into()),
            }
            let Some(mut rec) = read_record(&target)? else {
                continue;
            };
            rec.attempts += 1;
            out.push(Leased {
                id: Id(id.as_u128()),
                payload: rec.message.clone().into_bytes(),
                attempt: rec.attempts,
            });
            records.push((id, rec));
        }
        self.lock().leased.extend(records);
        Ok(out)
    }

    fn ack(&self, ids: &[Id]) -> BenchResult<()> {
        {
            let mut st = self.lock();
            for id in ids {
                st.leased.remove(&uuid_of(*id));
            }
        }
        for id in ids {
            match fs::remove_file(self.inflight.join(file_name(uuid_of(*id)))) {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => return Err(e.into()),
            }
        }
        if self.durable {
            sync_dir(&self.inflight)?;
        }
        Ok(())
    }

    fn nack(&self, id: Id, failure: &Failure<'_>) -> BenchResult<()> {
        let (uuid, mut rec) = self.take_leased(id)?;
        let name = file_name(uuid);
        match failure {
            Failure::Transient { error, retry_after } => {
                // Persist the attempt count with the message, then drop the lease.
                rec.error = Some((*error).to_owned());
                let bytes = serde_json::to_vec_pretty(&rec)?;
                write_file(&self.queue.join(&name), &bytes, self.durable)?;
                if self.durable {
                    sync_dir(&self.queue)?;
                }
                fs::remove_file(self.inflight.join(&name))?;
                if self.durable {
                    sync_dir(&self.inflight)?;
                }
                let mut st = self.lock();
                if retry_after.is_zero() {
                    st.ready.push_back(uuid);
                } else {
                    st.backoff
                        .push(Reverse((Instant::now() + *retry_after, uuid)));
                }
            }
            Failure::Permanent { kind, error } => {
                rec.error_kind = Some((*kind).to_owned());
                rec.error = Some((*error).to_owned());
                rec.failed_at_ns = Some(now_ns());
                let bytes = serde_json::to_vec_pretty(&rec)?;
                write_file(&self.dlq.join(&name), &bytes, self.durable)?;
                if self.durable {
                    sync_dir(&self.dlq)?;
                }
                fs::remove_file(self.inflight.join(&name))?;
                if self.durable {
                    sync_dir(&self.inflight)?;
                }
            }
        }
        Ok(())
    }

    fn dlq_stats(&self) -> BenchResult<DlqStats> {
        let mut by_kind: BTreeMap<String, u64> = BTreeMap::new();
        let mut total = 0;
        for path in json_files(&self.dlq)? {
            let Some(rec) = read_record(&path)? else {
                continue;
            };
            total += 1;
            *by_kind
                .entry(rec.error_kind.unwrap_or_else(|| "unknown".to_owned()))
                .or_default() += 1;
        }
        Ok(DlqStats { total, by_kind })
    }

    fn dlq_list(&self, kind: Option<&str>, limit: usize) -> BenchResult<Vec<DlqEntry>> {
        let mut hits = Vec::new();
        for path in json_files(&self.dlq)? {
            let Some(rec) = read_record(&path)? else {
                continue;
            };
            if kind.is_none_or(|k| rec.error_kind.as_deref() == Some(k)) {
                hits.push(rec);
            }
        }
        hits.sort_by_key(|r| r.failed_at_ns);
        hits.truncate(limit);
        hits.into_iter().map(to_dlq_entry).collect()
    }

    fn dlq_get(&self, id: Id) -> BenchResult<Option<DlqEntry>> {
        let path = self.dlq.join(file_name(uuid_of(id)));
        read_record(&path)?.map(to_dlq_entry).transpose()
    }

    fn dlq_replay(&self, ids: &[Id]) -> BenchResult<usize> {
        let mut moved = Vec::with_capacity(ids.len());
        for id in ids {
            let uuid = uuid_of(*id);
            let name = file_name(uuid);
            match fs::rename(self.dlq.join(&name), self.queue.join(&name)) {
                Ok(()) => moved.push(uuid),
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => return Err(e.into()),
            }
        }
        if self.durable && !moved.is_empty() {
            sync_dir(&self.dlq)?;
            sync_dir(&self.queue)?;
        }
        let n = moved.len();
        self.lock().ready.extend(moved);
        Ok(n)
    }

    fn pending(&self) -> BenchResult<u64> {
        let st = self.lock();
        Ok((st.ready.len() + st.backoff.len() + st.leased.len()) as u64)
    }
}
