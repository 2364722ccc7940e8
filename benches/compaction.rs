//! Compaction benchmarks (issue 5):
//!
//! 1. **open time** of a store holding 1,000,000 live messages of 100 bytes, from a
//!    checkpoint plus a tail of 10,000 records, and by replaying the whole log (the same
//!    directory with its checkpoint files moved aside). Warm page cache: this measures the
//!    CPU cost of rebuilding the index, not the disk.
//! 2. **the longest pause compaction causes to an enqueue**: a producer thread enqueues one
//!    message at a time and times each call, first alone, then while another thread runs a
//!    compaction that relocates every sealed segment of a store holding 1,000,000 live
//!    messages (half of 2,000,000, so every segment is under the 0.5 live threshold) and
//!    writes a checkpoint of them. Both phases run in the same process, one after the
//!    other; max, p99 and p99.9 are printed side by side, for three rounds (the machine
//!    may be shared: the load average is printed with each). The producer consumes what it
//!    enqueued every 1,000 messages (untimed), so the live set stays at 1,000,000.
//!    `Durability::Never`, so that the numbers show lock waits rather than fsyncs.
//!
//! Store directories live under `target/bench-data/compaction`. Run with
//! `cargo bench --features sim --bench compaction` (`DEADLETTER_BENCH_PAUSE_ONLY=1` skips
//! the open benchmarks).

mod common;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::Criterion;
use deadletter::sim::{Log, LogOptions};
use deadletter::store::{CompactionOptions, Durability};
use deadletter::{Config, Store};

const LIVE: u64 = 1_000_000;
const TAIL: u64 = 10_000;
const PAYLOAD: usize = 100;
const BATCH: u64 = 1_000;

fn config(segment_size: u64) -> Config {
    Config::fast()
        .durability(Durability::Never)
        .preallocate(false)
        .segment_size(segment_size)
        .compaction(CompactionOptions::default().interval(None))
}

fn payloads(n: u64) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            let mut p = vec![b'x'; PAYLOAD];
            p[..8].copy_from_slice(&i.to_le_bytes());
            p
        })
        .collect()
}

/// 1,000,000 live messages, a checkpoint, then 10,000 more records after it.
fn build_open_store(dir: &Path) -> u64 {
    let _ = std::fs::remove_dir_all(dir);
    let started = Instant::now();
    let store = Store::open(dir, config(64 << 20)).unwrap();
    let q = store.queue("q").unwrap();
    let batch = payloads(BATCH);
    for _ in 0..LIVE / BATCH {
        q.enqueue_batch(&batch).unwrap();
    }
    let report = store.compact_now().unwrap();
    for _ in 0..TAIL / BATCH {
        q.enqueue_batch(&batch).unwrap();
    }
    let position = report.checkpoint_position.unwrap();
    drop(q);
    store.close().unwrap();
    println!(
        "open store: {} live messages, checkpoint at {} MB, built in {:.1?}",
        LIVE + TAIL,
        position >> 20,
        started.elapsed()
    );
    position
}

fn open_once(dir: &Path) -> Duration {
    let started = Instant::now();
    let store = Store::open(dir, config(64 << 20)).unwrap();
    let took = started.elapsed();
    let q = store.existing_queue("q").unwrap();
    assert_eq!(q.stats().counts.ready, LIVE + TAIL);
    drop(q);
    store.close().unwrap();
    took
}

fn bench_open(c: &mut Criterion, results: &mut Vec<(String, Duration)>) {
    let dir = common::data_root("compaction").join("open");
    build_open_store(&dir);
    let mut g = c.benchmark_group("open_1m_live_100B");
    g.sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(15));
    let mut best = Duration::MAX;
    g.bench_function("checkpoint_plus_10k_tail", |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| {
                    let t = open_once(&dir);
                    best = best.min(t);
                    t
                })
                .sum()
        })
    });
    results.push(("open from checkpoint + 10k tail".into(), best));
    // The same directory without its checkpoints: the whole log is replayed.
    let aside: Vec<(PathBuf, PathBuf)> = ["checkpoint-0", "checkpoint-1"]
        .iter()
        .map(|n| (dir.join(n), dir.join(format!("{n}.aside"))))
        .filter(|(p, _)| p.exists())
        .collect();
    for (p, a) in &aside {
        std::fs::rename(p, a).unwrap();
    }
    let mut best = Duration::MAX;
    g.bench_function("full_replay", |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| {
                    let t = open_once(&dir);
                    best = best.min(t);
                    t
                })
                .sum()
        })
    });
    results.push(("open by full replay".into(), best));
    // What both include: the log's own recovery scan, which checks every record's CRC.
    let mut best = Duration::MAX;
    g.bench_function("log_recovery_scan_only", |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| {
                    let c = config(64 << 20);
                    let opts = LogOptions {
                        segment_size: c.segment_size,
                        max_record_size: c.max_message_size + (64 << 10),
                        durability: Durability::Never,
                        preallocate: false,
                        ..LogOptions::default()
                    };
                    let t = Instant::now();
                    let (log, _) = Log::open(&dir, opts).unwrap();
                    let took = t.elapsed();
                    drop(log);
                    best = best.min(took);
                    took
                })
                .sum()
        })
    });
    results.push(("of which the log's recovery scan".into(), best));
    for (p, a) in &aside {
        std::fs::rename(a, p).unwrap();
    }
    g.finish();
    let _ = std::fs::remove_dir_all(&dir);
}

struct Latencies {
    ns: Vec<u64>,
    wall: Duration,
}

impl Latencies {
    fn quantile(&self, q: f64) -> Duration {
        let mut v = self.ns.clone();
        v.sort_unstable();
        let i = ((v.len() as f64 - 1.0) * q).round() as usize;
        Duration::from_nanos(v[i])
    }
    fn max(&self) -> Duration {
        Duration::from_nanos(self.ns.iter().copied().max().unwrap_or(0))
    }
    /// Calls that took longer than `d`.
    fn over(&self, d: Duration) -> usize {
        let d = d.as_nanos() as u64;
        self.ns.iter().filter(|&&n| n > d).count()
    }
}

/// Enqueues one message at a time until `stop`, timing each call; every 1,000 it consumes
/// them (lease and ack, not timed), so the live set stays the same.
fn produce(q: &deadletter::Queue, stop: &AtomicBool, at_least: Duration) -> Latencies {
    let payload = [b'p'; PAYLOAD];
    let started = Instant::now();
    let mut ns = Vec::with_capacity(1 << 20);
    while !stop.load(Ordering::Acquire) || started.elapsed() < at_least {
        for _ in 0..BATCH {
            let t = Instant::now();
            q.enqueue(payload).unwrap();
            ns.push(t.elapsed().as_nanos() as u64);
        }
        let leased = q.lease(BATCH as usize).unwrap();
        q.ack_all(&leased).unwrap();
    }
    Latencies {
        ns,
        wall: started.elapsed(),
    }
}

/// One round: a fresh store, the producer alone for 3 s, then during one compaction.
/// Returns (max alone, p99 alone, max during, p99 during, longest lock hold).
fn pause_round(round: usize) -> [Duration; 5] {
    let dir = common::fresh_dir("compaction", "pause");
    let started = Instant::now();
    let store = Store::open(&dir, config(8 << 20)).unwrap();
    let q = store.queue("q").unwrap();
    let batch = payloads(BATCH);
    for _ in 0..2 * LIVE / BATCH {
        q.enqueue_batch(&batch).unwrap();
        let leased = q.lease(BATCH as usize).unwrap();
        let acks: Vec<_> = leased.into_iter().step_by(2).collect();
        q.ack_all(&acks).unwrap();
    }
    store.sync().unwrap();
    let segments = store.storage_stats().segments.len();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "round {round}: {} live of {} enqueued, {segments} segments of 8 MiB, built in {:.1?}; load average {}",
        q.stats().counts.in_flight + q.stats().counts.ready,
        2 * LIVE,
        started.elapsed(),
        load.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
    );
    let producer = store.queue("producer").unwrap();

    // Phase 1: the producer alone.
    let stop = AtomicBool::new(true);
    let alone = produce(&producer, &stop, Duration::from_secs(3));

    // Phase 2: the producer while a compaction runs.
    let stop = Arc::new(AtomicBool::new(false));
    let compactor = {
        let store = store.clone();
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let t = Instant::now();
            let report = store.compact_now().unwrap();
            let took = t.elapsed();
            stop.store(true, Ordering::Release);
            (report, took)
        })
    };
    let during = produce(&producer, &stop, Duration::ZERO);
    let (report, took) = compactor.join().unwrap();
    println!(
        "  compaction: {:.1?}, {} records ({} MB) relocated, checkpoint of {} messages, longest lock hold {:.1?}",
        took,
        report.records_relocated,
        report.bytes_relocated >> 20,
        q.stats().counts.in_flight + q.stats().counts.ready,
        report.longest_lock_hold
    );
    println!(
        "  {:<26} {:>9} {:>10} {:>10} {:>10} {:>10} {:>8} {:>8}",
        "enqueue latency", "calls", "p50", "p99", "p99.9", "max", ">1ms", ">10ms"
    );
    for (name, l) in [("alone", &alone), ("during compaction", &during)] {
        println!(
            "  {:<26} {:>9} {:>10.1?} {:>10.1?} {:>10.1?} {:>10.1?} {:>8} {:>8}   ({:.0} calls/s over {:.1?})",
            name,
            l.ns.len(),
            l.quantile(0.5),
            l.quantile(0.99),
            l.quantile(0.999),
            l.max(),
            l.over(Duration::from_millis(1)),
            l.over(Duration::from_millis(10)),
            l.ns.len() as f64 / l.wall.as_secs_f64(),
            l.wall
        );
    }
    drop((q, producer));
    store.close().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    [
        alone.max(),
        alone.quantile(0.99),
        during.max(),
        during.quantile(0.99),
        report.longest_lock_hold,
    ]
}

const PAUSE_ROUNDS: usize = 3;

fn bench_pause(results: &mut Vec<(String, Duration)>) {
    let rounds: Vec<[Duration; 5]> = (1..=PAUSE_ROUNDS).map(pause_round).collect();
    let names = [
        "enqueue max, alone",
        "enqueue p99, alone",
        "enqueue max, during compaction",
        "enqueue p99, during compaction",
        "compaction longest lock hold",
    ];
    for (i, name) in names.iter().enumerate() {
        let mut v: Vec<Duration> = rounds.iter().map(|r| r[i]).collect();
        v.sort();
        results.push((format!("{name} (median of {PAUSE_ROUNDS})"), v[v.len() / 2]));
    }
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    let mut results = Vec::new();
    if std::env::var_os("DEADLETTER_BENCH_PAUSE_ONLY").is_none() {
        bench_open(&mut c, &mut results);
    }
    bench_pause(&mut results);
    c.final_summary();
    println!("\nsummary");
    for (name, d) in &results {
        println!("  {name:<48} {d:>10.1?}");
    }
}
