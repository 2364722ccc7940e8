//! End-to-end throughput through the worker pool: enqueue a batch, handle every message with
//! a no-op handler, ack. 1, 2 and 4 workers; 100-byte payloads; durable (`Always`, group
//! commit) and not (`Never`). Data goes under `target/bench-data/pool/` (a real disk).
//!
//! Each iteration enqueues N messages in batches of 1,000, then starts the pool and runs it
//! until the queue is idle; the time measured is the pool's, from its start to the idle
//! queue with every ack written (the enqueues are `benches/queue.rs`'s business).

mod common;

use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput};
use deadletter::{CompactionOptions, Config, Durability, Message, Store, WorkerPool};

fn run(durability: Durability, workers: usize, messages: usize) -> Duration {
    let name = format!("{durability:?}-{workers}").replace(['(', ')', ' '], "");
    let dir = common::fresh_dir("pool", &name);
    let config = Config::default()
        .durability(durability)
        .compaction(CompactionOptions::default().interval(None));
    let store = Store::open(&dir, config).expect("open");
    let queue = store.queue("bench").expect("queue");
    let payload = vec![7u8; 100];
    let batch: Vec<&[u8]> = (0..1000).map(|_| payload.as_slice()).collect();
    for _ in 0..messages / 1000 {
        queue.enqueue_batch(&batch).expect("enqueue");
    }
    let started = Instant::now();
    let pool = WorkerPool::new(&queue)
        .workers(workers)
        .start(|_m: &Message| Ok(()))
        .expect("pool");
    pool.run_until_idle().expect("drain");
    let took = started.elapsed();
    let counters = pool
        .shutdown(Duration::from_secs(10))
        .expect("shutdown")
        .counters;
    assert_eq!(counters.processed as usize, messages);
    took
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("pool");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(5));
    for (durability, messages) in [(Durability::Never, 50_000), (Durability::Always, 20_000)] {
        for workers in [1, 2, 4] {
            group.throughput(Throughput::Elements(messages as u64));
            let id = BenchmarkId::new(format!("{durability:?}"), format!("{workers}-workers"));
            group.bench_function(id, |b| {
                b.iter_custom(|iters| (0..iters).map(|_| run(durability, workers, messages)).sum())
            });
        }
    }
    group.finish();
}

criterion::criterion_group!(benches, bench);
criterion::criterion_main!(benches);
