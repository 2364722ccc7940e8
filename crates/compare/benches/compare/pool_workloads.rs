//! The pool workloads: each contestant's pool (`Contestant::run_pool`) on a
//! fresh store per run.
//!
//! * `pool_1_worker`, `pool_2_workers`, `pool_4_workers`: `n` prefilled
//!   messages (filled as in drain, untimed), a no-op handler; timed from the
//!   pool's start until every message is handled and the pool has stopped
//!   with every ack committed.
//! * `pool_failure_flow`: the same with 4 workers and the failure flow's
//!   handler ([`crate::workloads::flow_outcome`]), each retry after
//!   `Plan::retry_after`; checked at the end: nothing pending, the DLQ holds
//!   exactly the permanent failures.
//! * `pool_latency`: an empty store, one producer enqueueing one message at a
//!   time (durable) while the pool (2 workers) handles them; each message's
//!   time from just before its enqueue call to the start of its first handler
//!   is one latency sample. The producer stops at `n` messages or at the time
//!   budget, then the pool handles what is left.
//!
//! A run that reaches the time budget first stops there and reports the
//! messages settled per second so far (no end-of-run check then).

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crate::contestant::{BenchResult, Contestant};
use crate::measure::{disk_bytes, payload_seq, RssWindow};
use crate::plan::Workload;
use crate::pool::{Completion, Outcome, PoolHandler, PoolRun};
use crate::workloads::{flow_outcome, payloads, per_msg, prefill, Case, Clock, Sample};

/// One measured run of the pool workload `w` in the empty directory `dir`.
pub fn run(case: &Case<'_>, w: Workload, dir: &Path) -> BenchResult<Sample> {
    let workers = w
        .pool_workers()
        .ok_or_else(|| format!("{} is not a pool workload", w.name()))?;
    if w == Workload::PoolLatency {
        latency_run(case, workers, dir)
    } else {
        throughput_run(case, w, workers, dir)
    }
}

fn pool_run(case: &Case<'_>, workers: usize, handler: PoolHandler, c: &Arc<Completion>) -> PoolRun {
    PoolRun {
        workers,
        lease_batch: case.plan.pool_batch,
        retry_after: case.plan.retry_after,
        handler,
        completion: Arc::clone(c),
    }
}

fn throughput_run(case: &Case<'_>, w: Workload, workers: usize, dir: &Path) -> BenchResult<Sample> {
    let n = case.n(w);
    let plan = case.plan;
    prefill(case, dir, n, false, case.durable)?;
    let disk = disk_bytes(dir);
    let c = case.open(dir, case.durable)?;
    let completion = Completion::new(n, plan.budget);
    let settle = Arc::clone(&completion);
    let failing = w == Workload::PoolFailureFlow;
    let handler: PoolHandler = Arc::new(move |payload: &[u8], attempt: u32| {
        let outcome = if failing {
            flow_outcome(payload, attempt)
        } else {
            Outcome::Ack
        };
        if !matches!(outcome, Outcome::Retry(_)) {
            settle.settle();
        }
        outcome
    });
    let run = pool_run(case, workers, handler, &completion);
    let rss = RssWindow::start();
    let clock = Clock::start(plan.budget);
    c.run_pool(&run)?;
    let ops = clock.rate(completion.settled());
    let rss = rss.peak_delta();
    if completion.all_settled() {
        check_settled(&*c, n, failing)?;
    }
    Ok(Sample {
        ops_per_sec: ops,
        disk_bytes_per_msg: per_msg(disk, n),
        peak_rss_bytes: rss,
        latencies: Vec::new(),
    })
}

/// After a complete run: nothing pending, and (failure flow) the DLQ holds
/// exactly the permanent failures, one message in ten.
fn check_settled(c: &dyn Contestant, n: usize, failing: bool) -> BenchResult<()> {
    let pending = c.pending()?;
    if pending != 0 {
        return Err(format!("the pool left {pending} of {n} messages pending").into());
    }
    if failing {
        let expected = n.div_ceil(10) as u64;
        let total = c.dlq_stats()?.total;
        if total != expected {
            return Err(format!("DLQ holds {total} entries, expected {expected}").into());
        }
    }
    Ok(())
}

fn nanos_since(base: Instant) -> u64 {
    base.elapsed().as_nanos() as u64
}

fn latency_run(case: &Case<'_>, workers: usize, dir: &Path) -> BenchResult<Sample> {
    let n = case.n(Workload::PoolLatency);
    let plan = case.plan;
    let ring = payloads(case.size, 0, n);
    let c = case.open(dir, case.durable)?;
    let base = Instant::now();
    let starts: Arc<Vec<AtomicU64>> = Arc::new((0..n).map(|_| AtomicU64::new(0)).collect());
    let ends: Arc<Vec<AtomicU64>> = Arc::new((0..n).map(|_| AtomicU64::new(0)).collect());
    // The pool may need longer than the producer to finish: a generous deadline
    // that only a stuck engine reaches.
    let completion = Completion::new(n, plan.budget * 2 + Duration::from_secs(10));
    let handler: PoolHandler = {
        let (starts, ends, settle) = (
            Arc::clone(&starts),
            Arc::clone(&ends),
            Arc::clone(&completion),
        );
        Arc::new(move |payload: &[u8], attempt: u32| {
            let now = nanos_since(base);
            let slot = payload_seq(payload).and_then(|s| usize::try_from(s).ok());
            if let (Some(seq), 1) = (slot.filter(|&s| s < n), attempt) {
                let took = now.saturating_sub(starts[seq].load(Ordering::Acquire));
                ends[seq].store(took.max(1), Ordering::Release);
            }
            settle.settle();
            Outcome::Ack
        })
    };
    let run = pool_run(case, workers, handler, &completion);
    let rss = RssWindow::start();
    let clock = Clock::start(plan.budget);
    let produced = thread::scope(|s| -> BenchResult<usize> {
        let pool = s.spawn(|| c.run_pool(&run));
        let mut produced = 0;
        let mut produce = || -> BenchResult<()> {
            for (i, p) in ring.iter().enumerate() {
                starts[i].store(nanos_since(base), Ordering::Release);
                c.enqueue(p)?;
                produced = i + 1;
                if clock.over() {
                    break;
                }
            }
            Ok(())
        };
        let produced_ok = produce();
        // Also after an error: the pool stops once it has handled what was enqueued.
        completion.set_target(produced);
        let pooled = pool.join().map_err(|_| "pool thread panicked")?;
        produced_ok?;
        pooled?;
        Ok(produced)
    })?;
    let ops = clock.rate(produced);
    let rss = rss.peak_delta();
    if !completion.all_settled() {
        return Err(format!(
            "the pool handled {} of {produced} messages",
            completion.settled()
        )
        .into());
    }
    let latencies: Vec<u64> = ends[..produced]
        .iter()
        .map(|e| e.load(Ordering::Acquire))
        .filter(|&t| t > 0)
        .collect();
    drop(c);
    Ok(Sample {
        ops_per_sec: ops,
        disk_bytes_per_msg: per_msg(disk_bytes(dir), produced),
        peak_rss_bytes: rss,
        latencies,
    })
}
