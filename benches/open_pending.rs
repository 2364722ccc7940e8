//! Opening a store of many pending messages: what a restart of a busy service pays before
//! its first operation (`benches/open.rs` measures a store of a few messages).
//!
//! - `open_pending/pending_1000000/log`: 1,000,000 pending messages of 100 bytes and no
//!   checkpoint, so the open replays every record;
//! - `open_pending/pending_1000000/checkpoint`: the same after a compaction run, so the open
//!   loads the checkpoint and replays nothing.
//!
//! Each iteration opens the store and closes it; the close is timed too. Before the
//! benchmarks the process prints the wall and thread CPU time of one open of each (CPU
//! time is steadier on a shared, busy machine) and what the open store adds to its
//! resident set size. Data goes under `target/bench-data/open_pending/` (a real disk).

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion};
use deadletter::store::CompactionOptions;
use deadletter::{Config, Store};

const PENDING: usize = 1_000_000;

fn config() -> Config {
    Config::default().compaction(CompactionOptions::default().interval(None))
}

/// A store of `n` pending 100-byte messages, enqueued in batches of 1,000; with a
/// checkpoint covering all of them when `checkpoint` is set.
fn prepare(name: &str, n: usize, checkpoint: bool) -> PathBuf {
    let dir = common::fresh_dir("open_pending", name);
    let store = Store::open(&dir, config()).expect("open");
    let queue = store.queue("bench").expect("queue");
    let payload = vec![7u8; 100];
    let mut left = n;
    while left > 0 {
        let k = left.min(1000);
        let batch: Vec<&[u8]> = (0..k).map(|_| payload.as_slice()).collect();
        queue.enqueue_batch(&batch).expect("enqueue");
        left -= k;
    }
    if checkpoint {
        store.compact_now().expect("compact");
    }
    drop(queue);
    store.close().expect("close");
    dir
}

fn open_close(dir: &Path) {
    let store = Store::open(dir, config()).expect("open");
    store.close().expect("close");
}

/// The resident set size of this process, in bytes.
fn vm_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kb| kb * 1024)
        .unwrap_or(0)
}

/// CPU time used by the calling thread (the open runs on it): steadier than wall time on
/// a shared, busy machine.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Prints the time of one open (wall and the thread's CPU) and what the open store adds
/// to the resident set.
fn report(what: &str, dir: &Path) {
    let before = vm_rss();
    let cpu = thread_cpu();
    let started = Instant::now();
    let store = Store::open(dir, config()).expect("open");
    let took = started.elapsed();
    let cpu = thread_cpu().saturating_sub(cpu);
    let during = vm_rss();
    store.close().expect("close");
    println!(
        "open of {what}: {:.1} ms ({:.1} ms of CPU), RSS +{:.1} MiB while open",
        took.as_secs_f64() * 1e3,
        cpu.as_secs_f64() * 1e3,
        during.saturating_sub(before) as f64 / (1 << 20) as f64
    );
}

fn bench(c: &mut Criterion) {
    let log = prepare("pending-log", PENDING, false);
    let checkpoint = prepare("pending-checkpoint", PENDING, true);
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--bench") {
        report("1,000,000 pending (log)", &log);
        report("1,000,000 pending (checkpoint)", &checkpoint);
    }

    let mut group = c.benchmark_group("open_pending");
    group.sample_size(10);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(4));
    for (name, dir) in [("log", &log), ("checkpoint", &checkpoint)] {
        let id = BenchmarkId::new(format!("pending_{PENDING}"), name);
        group.bench_function(id, |b| b.iter(|| open_close(dir)));
    }
    group.finish();
    for dir in [log, checkpoint] {
        let _ = std::fs::remove_dir_all(dir);
    }
}

criterion::criterion_group!(benches, bench);
criterion::criterion_main!(benches);
