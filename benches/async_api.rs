//! The async API beside the blocking one, in one run (durable, `Always`, 100-byte
//! payloads, a real disk under `target/bench-data/async_api/`):
//! - durable enqueues: one task one at a time, 64 tasks at once on a 2-thread runtime,
//!   and the blocking API from 64 threads; the enqueue rate and enqueues per fsync;
//! - the pools with a no-op handler over the same 20,000 messages: the thread pool (2
//!   workers) and the async pool (64 handlers at once, 2 runtime threads).
//!
//! Each figure is the median of 5 runs. `cargo bench -p deadletter --features async
//! --bench async_api`.

mod common;

use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use deadletter::async_api::{AsyncQueue, AsyncWorkerPool};
use deadletter::store::{CompactionOptions, Durability};
use deadletter::{Config, Message, Queue, Store, WorkerPool};

const RUNS: usize = 5;
const PER_WRITER: usize = 200;
const POOL_MESSAGES: usize = 20_000;

fn store(name: &str) -> (Store, Queue) {
    let dir = common::fresh_dir("async_api", name);
    let config = Config::default()
        .durability(Durability::Always)
        .compaction(CompactionOptions::default().interval(None));
    let store = Store::open(&dir, config).expect("open");
    let queue = store.queue("bench").expect("queue");
    (store, queue)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .expect("runtime")
}

/// Enqueues per second and enqueues per fsync of one run of `writers` tasks (or threads).
fn enqueues(writers: usize, tasks: bool) -> (f64, f64) {
    let (store, queue) = store(&format!("enqueue-{writers}-{tasks}"));
    let payload = vec![7u8; 100];
    let fsyncs = store.storage_stats().fsyncs;
    let started = Instant::now();
    if tasks {
        let q = AsyncQueue::new(&queue);
        runtime().block_on(async {
            let handles: Vec<_> = (0..writers)
                .map(|_| {
                    let (q, payload) = (q.clone(), payload.clone());
                    tokio::spawn(async move {
                        for _ in 0..PER_WRITER {
                            q.enqueue(&payload).await.expect("enqueue");
                        }
                    })
                })
                .collect();
            for h in handles {
                h.await.expect("task");
            }
        });
    } else {
        let barrier = Arc::new(Barrier::new(writers));
        let threads: Vec<_> = (0..writers)
            .map(|_| {
                let (q, payload, barrier) = (queue.clone(), payload.clone(), barrier.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    for _ in 0..PER_WRITER {
                        q.enqueue(&payload).expect("enqueue");
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("thread");
        }
    }
    let took = started.elapsed();
    let n = (writers * PER_WRITER) as f64;
    let fsyncs = (store.storage_stats().fsyncs - fsyncs).max(1) as f64;
    (n / took.as_secs_f64(), n / fsyncs)
}

/// Messages per second through a pool, thread (`false`) or async (`true`).
fn pool(asynchronous: bool) -> f64 {
    let (_store, queue) = store(&format!("pool-{asynchronous}"));
    let batch: Vec<Vec<u8>> = (0..1000).map(|_| vec![7u8; 100]).collect();
    for _ in 0..POOL_MESSAGES / 1000 {
        queue.enqueue_batch(&batch).expect("enqueue");
    }
    let started = Instant::now();
    let processed = if asynchronous {
        runtime().block_on(async {
            AsyncWorkerPool::new(&queue)
                .concurrency(64)
                .run_until_idle(|_m: Message| async { Ok(()) })
                .await
                .expect("async pool")
                .counters
                .processed
        })
    } else {
        let pool = WorkerPool::new(&queue)
            .workers(2)
            .start(|_m: &Message| Ok(()))
            .expect("pool");
        pool.run_until_idle().expect("drain");
        pool.shutdown(Duration::from_secs(10))
            .expect("stop")
            .counters
            .processed
    };
    assert_eq!(processed, POOL_MESSAGES as u64);
    POOL_MESSAGES as f64 / started.elapsed().as_secs_f64()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let measure = |writers, tasks| {
        let runs: Vec<(f64, f64)> = (0..RUNS).map(|_| enqueues(writers, tasks)).collect();
        let rate = median(runs.iter().map(|r| r.0).collect());
        let per_fsync = median(runs.iter().map(|r| r.1).collect());
        (rate, per_fsync)
    };
    let (one, one_f) = measure(1, true);
    let (tasks, tasks_f) = measure(64, true);
    let (threads, threads_f) = measure(64, false);
    println!("durable enqueues, 100 B (median of {RUNS}):");
    println!("  async, 1 task:      {one:>9.0}/s  {one_f:>6.1} per fsync");
    println!(
        "  async, 64 tasks:    {tasks:>9.0}/s  {tasks_f:>6.1} per fsync  ({:.1}x one task)",
        tasks / one
    );
    println!("  blocking, 64 threads:{threads:>9.0}/s  {threads_f:>6.1} per fsync  (async 64 tasks: {:.2}x)", tasks / threads);
    let sync_pool = median((0..RUNS).map(|_| pool(false)).collect());
    let async_pool = median((0..RUNS).map(|_| pool(true)).collect());
    println!("pools, no-op handler, durable, 100 B, {POOL_MESSAGES} messages (median of {RUNS}):");
    println!("  thread pool, 2 workers:     {sync_pool:>9.0}/s");
    println!(
        "  async pool, 64 at once:     {async_pool:>9.0}/s  ({:.2}x the thread pool)",
        async_pool / sync_pool
    );
}
