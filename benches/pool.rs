//! End-to-end throughput through the worker pool: enqueue a batch, handle every message with
//! a no-op handler, ack. 1, 2 and 4 workers; 100-byte payloads; durable (`Always`, group
//! commit) and not (`Never`). And one failing case, durable with 4 workers (`Always-failing`):
//! 20% of the messages fail, half of them permanently (to the DLQ), half once (retried after
//! 1 ms, then acked). Data goes under `target/bench-data/pool/` (a real disk).
//!
//! Each iteration enqueues N messages in batches of 1,000, then starts the pool and runs it
//! until the queue is idle; the time measured is the pool's, from its start to the idle
//! queue with every ack written (the enqueues are `benches/queue.rs`'s business).

mod common;

use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput};
use deadletter::pool::Retry;
use deadletter::store::{CompactionOptions, Durability};
use deadletter::{Config, Failure, Message, Store, WorkerPool};

/// What message `i`'s first byte says its handler does: 0 fails permanently, 1 fails on
/// its first delivery; the rest (and all of them without `failing`) succeed.
fn handle(m: &Message) -> Result<(), Failure> {
    match (m.payload().first(), m.attempt()) {
        (Some(0), _) => Err(Failure::permanent("Invalid", "bad input")),
        (Some(1), 1) => Err(Failure::transient("Timeout", "try again")),
        _ => Ok(()),
    }
}

fn run(durability: Durability, workers: usize, messages: usize, failing: bool) -> Duration {
    let name = format!("{durability:?}-{workers}-{failing}").replace(['(', ')', ' '], "");
    let dir = common::fresh_dir("pool", &name);
    let config = Config::default()
        .durability(durability)
        .compaction(CompactionOptions::default().interval(None));
    let store = Store::open(&dir, config).expect("open");
    let queue = store.queue("bench").expect("queue");
    let batch: Vec<Vec<u8>> = (0..1000)
        .map(|i| {
            let mut payload = vec![7u8; 100];
            if failing {
                payload[0] = (i % 10) as u8;
            }
            payload
        })
        .collect();
    for _ in 0..messages / 1000 {
        queue.enqueue_batch(&batch).expect("enqueue");
    }
    let started = Instant::now();
    let pool = WorkerPool::new(&queue)
        .workers(workers)
        .retry(Retry::fixed(Duration::from_millis(1)))
        .start(handle)
        .expect("pool");
    pool.run_until_idle().expect("drain");
    let took = started.elapsed();
    let counters = pool
        .shutdown(Duration::from_secs(10))
        .expect("shutdown")
        .counters;
    let permanent = if failing { messages / 10 } else { 0 };
    assert_eq!(counters.processed as usize, messages - permanent);
    assert_eq!(counters.dead_lettered as usize, permanent);
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
                b.iter_custom(|iters| {
                    (0..iters)
                        .map(|_| run(durability, workers, messages, false))
                        .sum()
                })
            });
        }
    }
    let messages = 20_000;
    group.throughput(Throughput::Elements(messages as u64));
    let id = BenchmarkId::new("Always-failing", "4-workers");
    group.bench_function(id, |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| run(Durability::Always, 4, messages, true))
                .sum()
        })
    });
    group.finish();
}

criterion::criterion_group!(benches, bench);
criterion::criterion_main!(benches);
