//! Group commit: durable (`Always`) enqueues of 100 bytes, one at a time from one thread
//! and from four threads at once, side by side in one run. Concurrent callers share fsyncs,
//! so four threads should go well beyond one (the goal: at least 3x). Data goes under
//! `target/bench-data/group_commit/` (a real disk).

mod common;

use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput};
use deadletter::{CompactionOptions, Config, Durability, Store};

/// Enqueues `per_thread` messages from each of `threads` threads into a fresh durable
/// store; returns the time from the common start to the last return.
fn run(threads: usize, per_thread: usize) -> Duration {
    let dir = common::fresh_dir("group_commit", &format!("{threads}-threads"));
    let config = Config::default()
        .durability(Durability::Always)
        .compaction(CompactionOptions::default().interval(None));
    let store = Store::open(&dir, config).expect("open");
    let queue = store.queue("bench").expect("queue");
    let payload = vec![7u8; 100];
    let start = Arc::new(Barrier::new(threads + 1));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let queue = queue.clone();
            let payload = payload.clone();
            let start = Arc::clone(&start);
            std::thread::spawn(move || {
                start.wait();
                for _ in 0..per_thread {
                    queue.enqueue(&payload).expect("enqueue");
                }
            })
        })
        .collect();
    start.wait();
    let started = Instant::now();
    for h in handles {
        h.join().expect("enqueuer");
    }
    started.elapsed()
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("group_commit");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(5));
    let total = 2_000;
    for threads in [1, 4] {
        group.throughput(Throughput::Elements(total as u64));
        let id = BenchmarkId::new("enqueue_durable", format!("{threads}-threads"));
        group.bench_function(id, |b| {
            b.iter_custom(|iters| (0..iters).map(|_| run(threads, total / threads)).sum())
        });
    }
    group.finish();
}

criterion::criterion_group!(benches, bench);
criterion::criterion_main!(benches);
