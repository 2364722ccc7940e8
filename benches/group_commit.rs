//! Group commit: durable (`Always`) enqueues of 100 bytes, one at a time from one thread
//! and from four threads at once, side by side in one run. Concurrent callers share fsyncs,
//! so four threads should go well beyond one (the goal: at least 3x). At the end it prints
//! how many enqueues an fsync covered for each, which the noise of a shared disk does not
//! blur. Data goes under `target/bench-data/group_commit/` (a real disk).

mod common;

use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput};
use deadletter::store::{CompactionOptions, Durability};
use deadletter::{Config, Queue, Store};

/// A durable store for `threads` enqueuers, opened once and kept for every iteration: a
/// fresh store's first seconds are spent zero-filling its next segment in the background,
/// which slows the fsyncs measured.
fn store(threads: usize) -> (Store, Queue) {
    let dir = common::fresh_dir("group_commit", &format!("{threads}-threads"));
    let config = Config::default()
        .durability(Durability::Always)
        .compaction(CompactionOptions::default().interval(None));
    let store = Store::open(&dir, config).expect("open");
    let queue = store.queue("bench").expect("queue");
    (store, queue)
}

/// Enqueues `per_thread` messages from each of `threads` threads; returns the time from
/// the common start to the last return.
fn run(queue: &Queue, threads: usize, per_thread: usize) -> Duration {
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
    let mut shared = Vec::new();
    for threads in [1, 4] {
        let (store, queue) = store(threads);
        group.throughput(Throughput::Elements(total as u64));
        let id = BenchmarkId::new("enqueue_durable", format!("{threads}-threads"));
        group.bench_function(id, |b| {
            b.iter_custom(|iters| {
                (0..iters)
                    .map(|_| run(&queue, threads, total / threads))
                    .sum()
            })
        });
        let stats = store.storage_stats();
        shared.push((threads, stats.appends as f64 / stats.fsyncs.max(1) as f64));
        store.close().expect("close");
    }
    group.finish();
    // How many enqueues an fsync covered: the work behind the ratio, free of the noise of
    // a shared disk's fsync times.
    for (threads, per) in shared {
        println!("group_commit: {threads} thread(s): {per:.2} enqueues per fsync");
    }
}

criterion::criterion_group!(benches, bench);
criterion::criterion_main!(benches);
