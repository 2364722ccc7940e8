//! The workloads: how each one prepares a store and what one measured run does.
//!
//! Write workloads get a fresh store per run. Workloads that need content
//! (drain, failure_flow, replay, the DLQ reads, reopen) fill it through the
//! trait with a non-durable store (fast for everyone), close it, flush the file
//! system when the measured part will fsync, and reopen it with the measured
//! durability; the filling is not timed. The DLQ reads and the replay runs
//! share one filled store (see [`dlq_suite`]), and the reopen runs share one.
//!
//! Bytes on disk per message are taken with the store closed: after the run
//! for enqueues (over the messages enqueued), after filling for the others
//! (over the messages or DLQ entries filled).

use std::path::Path;
use std::thread;
use std::time::{Duration, Instant};

use crate::contestant::{BenchResult, Contestant, Entry, Failure, Id};
use crate::measure::{disk_bytes, payload, payload_seq, scratch_dir, settle, trace, RssWindow};
use crate::plan::{Plan, Workload};
use crate::pool::Outcome;

/// Error kinds of dead-lettered messages, in rotation.
pub const KINDS: [&str; 4] = ["validation", "timeout", "unauthorized", "not_found"];
/// The kind dlq_list_filtered asks for.
pub const FILTER_KIND: &str = "timeout";

/// One measured run.
#[derive(Clone, Debug)]
pub struct Sample {
    /// Operations per second (see `Workload` for what an operation is).
    pub ops_per_sec: f64,
    /// Bytes on disk per message.
    pub disk_bytes_per_msg: f64,
    /// Peak RSS growth during the run.
    pub peak_rss_bytes: Option<u64>,
    /// Latency of each operation in nanoseconds, where the workload measures it
    /// (enqueue_one: each call; pool_latency: enqueue to handler).
    pub latencies: Vec<u64>,
}

/// What is being measured: one contestant, payload size and durability.
#[derive(Clone, Copy)]
pub struct Case<'a> {
    /// The plan.
    pub plan: &'a Plan,
    /// The contestant.
    pub entry: &'a Entry,
    /// Payload size in bytes.
    pub size: usize,
    /// Durable commits.
    pub durable: bool,
}

impl Case<'_> {
    /// Operations of one run of `w` (see `Plan::n`).
    pub fn n(&self, w: Workload) -> usize {
        self.plan.n(w, self.durable, self.entry.name)
    }

    /// Prefix of the run's scratch directory.
    pub fn label(&self, w: Workload) -> String {
        format!("{}-{}-{}", self.entry.name, w.name(), self.size)
    }

    /// Opens the contestant's store in `dir`.
    pub fn open(&self, dir: &Path, durable: bool) -> BenchResult<Box<dyn Contestant>> {
        (self.entry.open)(dir, durable)
    }
}

/// Times a measured run and tells when its budget is spent.
pub struct Clock {
    start: Instant,
    budget: Duration,
}

impl Clock {
    /// Starts now.
    pub fn start(budget: Duration) -> Self {
        Clock {
            start: Instant::now(),
            budget,
        }
    }

    /// True once the budget is spent.
    pub fn over(&self) -> bool {
        self.start.elapsed() >= self.budget
    }

    /// `ops` per second since the start.
    pub fn rate(&self, ops: usize) -> f64 {
        ops as f64 / self.start.elapsed().as_secs_f64().max(1e-9)
    }
}

/// `bytes` per message, for `msgs` messages (at least one).
pub fn per_msg(bytes: u64, msgs: usize) -> f64 {
    bytes as f64 / msgs.max(1) as f64
}

/// `count` payloads starting at sequence number `first`.
pub fn payloads(size: usize, first: u64, count: usize) -> Vec<Vec<u8>> {
    (0..count as u64)
        .map(|i| payload(size, first + i))
        .collect()
}

/// Enqueues `n` messages (sequence numbers 0..n) in batches.
fn fill(c: &dyn Contestant, plan: &Plan, size: usize, n: usize) -> BenchResult<()> {
    let mut seq = 0;
    while seq < n {
        let count = plan.batch.min(n - seq);
        let batch = payloads(size, seq as u64, count);
        let refs: Vec<&[u8]> = batch.iter().map(Vec::as_slice).collect();
        c.enqueue_batch(&refs)?;
        seq += count;
    }
    Ok(())
}

/// Fills a store with `n` pending messages and (with `dead`) dead-letters all
/// of them, kinds in rotation. Leaves it closed; with `flush`, flushes the file
/// system too, so that a measured durable phase does not pay for writing back
/// the non-durable fill at its first fsync. Not flushing where nothing is
/// fsynced afterwards keeps short-lived files from reaching the disk at all,
/// which keeps their deletion cheap (see `Plan::n`).
pub fn prefill(case: &Case<'_>, dir: &Path, n: usize, dead: bool, flush: bool) -> BenchResult<()> {
    let t = Instant::now();
    let c = case.open(dir, false)?;
    fill(&*c, case.plan, case.size, n)?;
    trace(&format!("fill {n}"), t);
    let t = Instant::now();
    if dead {
        let mut moved = 0;
        loop {
            let leased = c.lease(case.plan.batch)?;
            if leased.is_empty() {
                break;
            }
            for m in leased {
                let seq = payload_seq(&m.payload).ok_or("payload without sequence number")?;
                let error = format!("message {seq} rejected by handler");
                let kind = KINDS[(seq % KINDS.len() as u64) as usize];
                c.nack(
                    m.id,
                    &Failure::Permanent {
                        kind,
                        error: &error,
                    },
                )?;
                moved += 1;
            }
        }
        if moved != n {
            return Err(format!("dead-lettered {moved} of {n} messages").into());
        }
        trace(&format!("dead-letter {n}"), t);
    }
    let t = Instant::now();
    drop(c);
    if flush {
        settle(dir);
    }
    trace("close + flush", t);
    Ok(())
}

/// One run of a workload that gets a fresh store per run.
pub fn fresh_run(case: &Case<'_>, w: Workload) -> BenchResult<Sample> {
    let dir = scratch_dir(&case.label(w))?;
    let sample = measure_fresh(case, w, dir.path());
    let t = Instant::now();
    drop(dir);
    trace("cleanup", t);
    sample
}

fn measure_fresh(case: &Case<'_>, w: Workload, dir: &Path) -> BenchResult<Sample> {
    if w.pool_workers().is_some() {
        return crate::pool_workloads::run(case, w, dir);
    }
    let n = case.n(w);
    let plan = case.plan;
    let budget = plan.budget;
    let mut latencies = Vec::new();
    let (ops, done, rss, disk) = match w {
        Workload::EnqueueOne | Workload::EnqueueBatch | Workload::EnqueueThreads => {
            let ring = payloads(case.size, 0, plan.batch);
            let c = case.open(dir, case.durable)?;
            let rss = RssWindow::start();
            let clock = Clock::start(budget);
            let done = match w {
                Workload::EnqueueOne => enqueue_one(&*c, &ring, n, &clock, &mut latencies)?,
                Workload::EnqueueBatch => enqueue_batch(&*c, &ring, n, &clock)?,
                _ => enqueue_threads(&*c, &ring, n, plan.threads, &clock)?,
            };
            let ops = clock.rate(done);
            let rss = rss.peak_delta();
            drop(c);
            (ops, done, rss, disk_bytes(dir))
        }
        Workload::Drain | Workload::FailureFlow => {
            prefill(case, dir, n, false, case.durable)?;
            let disk = disk_bytes(dir);
            let c = case.open(dir, case.durable)?;
            let rss = RssWindow::start();
            let clock = Clock::start(budget);
            let done = if w == Workload::Drain {
                drain(&*c, plan.lease_batch, &clock)?
            } else {
                failure_flow(&*c, plan.lease_batch, n, &clock)?
            };
            (clock.rate(done), n, rss.peak_delta(), disk)
        }
        _ => return Err(format!("{} is not a fresh-store workload", w.name()).into()),
    };
    if done == 0 {
        return Err("no operation completed".into());
    }
    Ok(Sample {
        ops_per_sec: ops,
        disk_bytes_per_msg: per_msg(disk, done),
        peak_rss_bytes: rss,
        latencies,
    })
}

/// One message per call; each call's latency goes to `latencies`.
fn enqueue_one(
    c: &dyn Contestant,
    ring: &[Vec<u8>],
    n: usize,
    clock: &Clock,
    latencies: &mut Vec<u64>,
) -> BenchResult<usize> {
    latencies.reserve(n);
    for i in 0..n {
        let t = Instant::now();
        c.enqueue(&ring[i % ring.len()])?;
        latencies.push(t.elapsed().as_nanos() as u64);
        if clock.over() {
            return Ok(i + 1);
        }
    }
    Ok(n)
}

fn enqueue_batch(
    c: &dyn Contestant,
    ring: &[Vec<u8>],
    n: usize,
    clock: &Clock,
) -> BenchResult<usize> {
    let refs: Vec<&[u8]> = ring.iter().map(Vec::as_slice).collect();
    let mut done = 0;
    while done < n {
        c.enqueue_batch(&refs)?;
        done += refs.len();
        if clock.over() {
            break;
        }
    }
    Ok(done)
}

fn enqueue_threads(
    c: &dyn Contestant,
    ring: &[Vec<u8>],
    n: usize,
    threads: usize,
    clock: &Clock,
) -> BenchResult<usize> {
    let per_thread = n.div_ceil(threads);
    thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || -> BenchResult<usize> {
                    for i in 0..per_thread {
                        c.enqueue(&ring[(t * 7919 + i) % ring.len()])?;
                        if clock.over() {
                            return Ok(i + 1);
                        }
                    }
                    Ok(per_thread)
                })
            })
            .collect();
        let mut done = 0;
        for h in handles {
            done += h.join().map_err(|_| "enqueue thread panicked")??;
        }
        Ok(done)
    })
}

fn drain(c: &dyn Contestant, lease_batch: usize, clock: &Clock) -> BenchResult<usize> {
    let mut done = 0;
    loop {
        let leased = c.lease(lease_batch)?;
        if leased.is_empty() {
            return Ok(done);
        }
        let ids: Vec<Id> = leased.iter().map(|m| m.id).collect();
        c.ack(&ids)?;
        done += ids.len();
        if clock.over() {
            return Ok(done);
        }
    }
}

/// The failure flow's handler: a sequence number ending in 0 fails
/// permanently (kinds in rotation), one ending in 1 fails transiently on its
/// first two deliveries, the others succeed. A payload without a sequence
/// number fails permanently as `bad_payload` (and then fails the run's DLQ
/// count check).
pub fn flow_outcome(payload: &[u8], attempt: u32) -> Outcome {
    let Some(seq) = payload_seq(payload) else {
        return Outcome::Dead {
            kind: "bad_payload",
            error: "payload without sequence number".to_owned(),
        };
    };
    match seq % 10 {
        0 => Outcome::Dead {
            kind: KINDS[((seq / 10) % KINDS.len() as u64) as usize],
            error: format!("message {seq} is invalid"),
        },
        1 if attempt <= 2 => Outcome::Retry("upstream timed out"),
        _ => Outcome::Ack,
    }
}

/// Runs messages through [`flow_outcome`], leasing `lease_batch` at a time and
/// retrying without backoff.
/// Counts messages settled (acked or dead-lettered). When it runs to the end,
/// checks that the DLQ holds exactly the permanent failures.
fn failure_flow(
    c: &dyn Contestant,
    lease_batch: usize,
    n: usize,
    clock: &Clock,
) -> BenchResult<usize> {
    let mut done = 0;
    let mut acks = Vec::with_capacity(lease_batch);
    let mut idle_since: Option<Instant> = None;
    loop {
        let leased = c.lease(lease_batch)?;
        if leased.is_empty() {
            // A retried message may become visible a moment later (after its engine's
            // retry delay, or once a server redelivers it): wait for it, not forever.
            let idle = *idle_since.get_or_insert_with(Instant::now);
            if done >= n || idle.elapsed() > Duration::from_secs(2) {
                break;
            }
            thread::sleep(Duration::from_millis(1));
            continue;
        }
        idle_since = None;
        acks.clear();
        for m in &leased {
            match flow_outcome(&m.payload, m.attempt) {
                Outcome::Ack => {
                    acks.push(m.id);
                    done += 1;
                }
                Outcome::Retry(error) => c.nack(
                    m.id,
                    &Failure::Transient {
                        error,
                        retry_after: Duration::ZERO,
                    },
                )?,
                Outcome::Dead { kind, error } => {
                    c.nack(
                        m.id,
                        &Failure::Permanent {
                            kind,
                            error: &error,
                        },
                    )?;
                    done += 1;
                }
            }
        }
        c.ack(&acks)?;
        if clock.over() {
            return Ok(done);
        }
    }
    if done != n {
        return Err(format!("failure flow settled {done} of {n} messages").into());
    }
    let expected = n.div_ceil(10) as u64;
    let stats = c.dlq_stats()?;
    if stats.total != expected {
        return Err(format!("DLQ holds {} entries, expected {expected}", stats.total).into());
    }
    Ok(done)
}

/// One row of results: workload, durability and its runs.
pub type Measured = (Workload, bool, Vec<Sample>);

/// The DLQ suite, on one store holding `plan.dlq_entries()` DLQ entries:
/// `plan.runs` runs of each read workload (store opened durable), then of
/// replay with the store opened durable, then reopened plain. Each replay run
/// moves its own slice of the entries back to the main queue.
pub fn dlq_suite(case: &Case<'_>) -> BenchResult<Vec<Measured>> {
    let plan = case.plan;
    let entries = plan.dlq_entries();
    let dir = scratch_dir(&case.label(Workload::DlqStats))?;
    // Reads commit nothing: flushed only before the durable replay.
    prefill(case, dir.path(), entries, true, false)?;
    let disk = per_msg(disk_bytes(dir.path()), entries);
    let c = case.open(dir.path(), true)?;
    let ids: Vec<Id> = c.dlq_list(None, usize::MAX)?.iter().map(|e| e.id).collect();
    if ids.len() != entries {
        return Err(format!("DLQ holds {} entries, expected {entries}", ids.len()).into());
    }
    let mut out = Vec::new();
    for w in [
        Workload::DlqStats,
        Workload::DlqListFiltered,
        Workload::DlqGet,
    ] {
        let mut samples = Vec::new();
        for _ in 0..plan.runs {
            samples.push(dlq_read_run(case, w, &*c, &ids, disk)?);
        }
        out.push((w, true, samples));
    }

    let mut slices = ids.chunks(case.n(Workload::Replay).max(1));
    let mut c = c;
    for durable in [true, false] {
        if !durable {
            drop(c);
            c = case.open(dir.path(), false)?;
        } else {
            settle(dir.path());
        }
        let mut samples = Vec::new();
        for _ in 0..plan.runs {
            let slice = slices.next().ok_or("DLQ too small for the replay runs")?;
            let rss = RssWindow::start();
            let clock = Clock::start(plan.budget);
            let mut moved = 0;
            for chunk in slice.chunks(plan.batch) {
                moved += c.dlq_replay(chunk)?;
                if clock.over() {
                    break;
                }
            }
            if moved == 0 {
                return Err("replay moved nothing".into());
            }
            samples.push(Sample {
                ops_per_sec: clock.rate(moved),
                disk_bytes_per_msg: disk,
                peak_rss_bytes: rss.peak_delta(),
                latencies: Vec::new(),
            });
        }
        out.push((Workload::Replay, durable, samples));
    }
    drop(c);
    let t = Instant::now();
    drop(dir);
    trace("cleanup", t);
    Ok(out)
}

/// One measured run of a DLQ read workload: calls until `n` or the budget.
fn dlq_read_run(
    case: &Case<'_>,
    w: Workload,
    c: &dyn Contestant,
    ids: &[Id],
    disk: f64,
) -> BenchResult<Sample> {
    let plan = case.plan;
    let entries = ids.len();
    let expect_listed = plan.dlq_list_limit.min(entries / KINDS.len());
    let n = case.n(w);
    let rss = RssWindow::start();
    let clock = Clock::start(plan.budget);
    let mut calls = 0;
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    while calls < n {
        match w {
            Workload::DlqStats => {
                let s = c.dlq_stats()?;
                if s.total != entries as u64 || s.by_kind.values().sum::<u64>() != s.total {
                    return Err(format!("stats total {} != {entries}", s.total).into());
                }
            }
            Workload::DlqListFiltered => {
                let got = c.dlq_list(Some(FILTER_KIND), plan.dlq_list_limit)?;
                if got.len() != expect_listed || got.iter().any(|e| e.error_kind != FILTER_KIND) {
                    return Err("filtered list returned wrong entries".into());
                }
            }
            _ => {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                let id = ids[(rng % entries as u64) as usize];
                let e = c
                    .dlq_get(id)?
                    .ok_or(format!("DLQ entry {id:?} not found"))?;
                let seq = payload_seq(&e.payload);
                let kind_ok =
                    seq.is_some_and(|q| e.error_kind == KINDS[(q % KINDS.len() as u64) as usize]);
                if e.id != id || !kind_ok || e.error.is_empty() || e.attempts == 0 {
                    return Err(format!("DLQ entry {id:?} is wrong: {e:?}").into());
                }
            }
        }
        calls += 1;
        if clock.over() {
            break;
        }
    }
    Ok(Sample {
        ops_per_sec: clock.rate(calls),
        disk_bytes_per_msg: disk,
        peak_rss_bytes: rss.peak_delta(),
        latencies: Vec::new(),
    })
}

/// Runs `plan.runs` reopen runs on one store holding `n` pending messages:
/// open it, lease the first message and ask the engine how many messages are
/// pending (which must be `n`), timed; close untimed. An engine that reads
/// nothing at open pays for its index or table scan in the count.
pub fn reopen(case: &Case<'_>) -> BenchResult<Vec<Sample>> {
    let n = case.n(Workload::Reopen);
    let dir = scratch_dir(&case.label(Workload::Reopen))?;
    prefill(case, dir.path(), n, false, true)?;
    let disk = per_msg(disk_bytes(dir.path()), n);
    let mut samples = Vec::new();
    for _ in 0..case.plan.runs {
        let rss = RssWindow::start();
        let start = Instant::now();
        let c = case.open(dir.path(), case.durable)?;
        let first = c.lease(1)?;
        let pending = c.pending()?;
        let secs = start.elapsed().as_secs_f64();
        let rss = rss.peak_delta();
        if first.len() != 1 {
            return Err("reopened store served no message".into());
        }
        if pending != n as u64 {
            return Err(format!("reopened store counts {pending} pending, expected {n}").into());
        }
        drop(c);
        samples.push(Sample {
            ops_per_sec: n as f64 / secs.max(1e-9),
            disk_bytes_per_msg: disk,
            peak_rss_bytes: rss,
            latencies: Vec::new(),
        });
    }
    let t = Instant::now();
    drop(dir);
    trace("cleanup", t);
    Ok(samples)
}
