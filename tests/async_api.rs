//! The async API (feature `async`) on a durable store: durable enqueues from many tasks
//! share fsyncs (counted by the store's own counter), the runtime's thread is never
//! blocked during an fsync, waiting leases are woken by writes and by the clock, the DLQ's
//! operations as futures, and the async worker pool's outcomes, history and shutdown.

mod common;

use std::cell::Cell;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use deadletter::async_api::{AsyncQueue, AsyncWorkerPool};
use deadletter::pool::Retry;
use deadletter::queue::{EnqueueOptions, FailureReport};
use deadletter::{Failure, Filter, Message, Page, ReplayOptions, Store};

fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime")
}

/// N tasks enqueue durably at once on a current-thread runtime: all N messages are
/// durable (a reopen finds them) and the store counted far fewer fsyncs than N.
#[test]
fn concurrent_durable_enqueues_from_tasks_share_fsyncs() {
    const N: u64 = 500;
    let (dir, store) = common::temp_store(common::config());
    let q = AsyncQueue::new(&store.queue("jobs").unwrap());
    let before = store.storage_stats().fsyncs;
    let ids = current_thread().block_on(async {
        let local = tokio::task::LocalSet::new();
        local
            .run_until(async {
                let tasks: Vec<_> = (0..N)
                    .map(|i| {
                        let q = q.clone();
                        tokio::task::spawn_local(async move { q.enqueue(format!("job-{i}")).await })
                    })
                    .collect();
                let mut ids = Vec::new();
                for t in tasks {
                    ids.push(t.await.unwrap().unwrap());
                }
                ids
            })
            .await
    });
    let fsyncs = store.storage_stats().fsyncs - before;
    println!("{N} concurrent durable enqueues from tasks: {fsyncs} fsyncs");
    assert!(fsyncs >= 1, "durable enqueues without an fsync");
    assert!(
        fsyncs * 10 <= N,
        "{fsyncs} fsyncs for {N} enqueues: not shared"
    );
    drop(q);
    store.close().unwrap();
    let store = Store::open(dir.path(), common::config()).unwrap();
    let q = store.queue("jobs").unwrap();
    assert_eq!(q.len(), N);
    let mut leased: Vec<u64> = q
        .lease(N as usize)
        .unwrap()
        .iter()
        .map(|m| m.id())
        .collect();
    leased.sort_unstable();
    let mut ids = ids;
    ids.sort_unstable();
    assert_eq!(leased, ids);
}

/// 1,000 durable enqueues are submitted from tasks of a current-thread runtime; another
/// task of the same runtime keeps running while their fsyncs are under way: it sees every
/// write made and not all of them complete. With a blocking enqueue that moment cannot
/// exist (each task's write and its completion happen in one poll, holding the thread).
#[test]
fn no_runtime_thread_blocks_during_durable_enqueues() {
    const N: u64 = 1_000;
    let (_dir, store) = common::temp_store(common::config());
    let q = AsyncQueue::new(&store.queue("jobs").unwrap());
    let submitted = Rc::new(Cell::new(0u64));
    let completed = Rc::new(Cell::new(0u64));
    let (seen_in_flight, timer_ticks) = current_thread().block_on(async {
        let local = tokio::task::LocalSet::new();
        local
            .run_until(async {
                for i in 0..N {
                    let (q, submitted, completed) =
                        (q.clone(), Rc::clone(&submitted), Rc::clone(&completed));
                    tokio::task::spawn_local(async move {
                        let write = q.enqueue(format!("job-{i}"));
                        submitted.set(submitted.get() + 1);
                        write.await.unwrap();
                        completed.set(completed.get() + 1);
                    });
                }
                // The other task: a timer served while the enqueues are in flight.
                let (s, c) = (Rc::clone(&submitted), Rc::clone(&completed));
                let watcher = tokio::task::spawn_local(async move {
                    let mut seen = 0u64;
                    let mut ticks = 0u64;
                    while c.get() < N {
                        if s.get() == N && c.get() < N {
                            seen += 1;
                        }
                        tokio::time::sleep(Duration::from_micros(100)).await;
                        ticks += 1;
                    }
                    (seen, ticks)
                });
                watcher.await.unwrap()
            })
            .await
    });
    println!(
        "timer served {timer_ticks} times, {seen_in_flight} of them with all {N} writes made and some not durable"
    );
    assert_eq!(completed.get(), N);
    assert!(
        seen_in_flight > 0,
        "the runtime never ran another task while fsyncs were pending"
    );
    assert_eq!(store.queue("jobs").unwrap().len(), N);
}

/// A waiting lease is woken by an enqueue from another task, and by the clock when a
/// delayed message comes due; a wait that finds nothing returns empty at its timeout.
#[test]
fn a_waiting_lease_is_woken_by_a_write_and_by_the_clock() {
    let (_dir, store) = common::temp_store(common::config());
    let q = AsyncQueue::new(&store.queue("jobs").unwrap());
    current_thread().block_on(async {
        let waiter = {
            let q = q.clone();
            tokio::spawn(async move { q.lease_wait(1, Duration::from_secs(30)).await })
        };
        tokio::task::yield_now().await;
        let id = q.enqueue(b"now").await.unwrap();
        let got = waiter.await.unwrap().unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].id(), id);
        q.ack(&got[0]).await.unwrap();

        let delayed = EnqueueOptions::default().delay(Duration::from_millis(30));
        let id = q.enqueue_with(b"later", &delayed).await.unwrap();
        assert!(
            q.lease(1).await.unwrap().is_empty(),
            "visible before its delay"
        );
        let got = q.lease_wait(1, Duration::from_secs(30)).await.unwrap();
        assert_eq!(got[0].id(), id);
        q.ack(&got[0]).await.unwrap();

        let none = q.lease_wait(1, Duration::from_millis(20)).await.unwrap();
        assert!(none.is_empty());
    });
}

/// Retry, dead-letter, the DLQ's reads and replay, all as futures, end durable: a reopen
/// finds the replayed message back in its queue and the other entry in the DLQ.
#[test]
fn dlq_operations_as_futures() {
    let (dir, store) = common::temp_store(common::config());
    let queue = store
        .queue_with(
            "jobs",
            deadletter::queue::QueueOptions::default().max_attempts(2),
        )
        .unwrap();
    let q = AsyncQueue::new(&queue);
    let dlq = q.dlq();
    current_thread().block_on(async {
        let ids = q.enqueue_batch(&["a", "b"]).await.unwrap();
        let msgs = q.lease(2).await.unwrap();
        let bad = Failure::permanent("Invalid", "not a job");
        q.dead_letter(&msgs[0], &FailureReport::new(&bad))
            .await
            .unwrap();
        let flaky = Failure::transient("Timeout", "no answer");
        let now = deadletter::MessageQueue::now_ms(&queue);
        q.retry(&msgs[1], &FailureReport::new(&flaky), now)
            .await
            .unwrap();
        let again = q.lease_wait(1, Duration::from_secs(30)).await.unwrap();
        assert_eq!(again[0].attempt(), 2);
        q.retry(&again[0], &FailureReport::new(&flaky), now)
            .await
            .unwrap();

        let stats = dlq.stats().await.unwrap();
        assert_eq!(stats.total, 2);
        assert_eq!(stats.by_error_kind["Invalid"], 1);
        assert_eq!(stats.by_error_kind["Timeout"], 1);
        let entry = dlq.get(ids[1]).await.unwrap();
        assert_eq!(entry.payload, b"b");
        assert_eq!(entry.failure.attempts.len(), 2);
        let listed = dlq
            .list(&Filter::error_kind("Invalid"), Page::first(10))
            .await
            .unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].id(), ids[0]);

        let report = dlq
            .replay(
                &Filter::error_kind("Timeout"),
                &ReplayOptions::to_origin().reset_attempts(),
            )
            .await
            .unwrap();
        assert_eq!(report.replayed, vec![ids[1]]);
    });
    drop((q, dlq, queue));
    store.close().unwrap();
    let store = Store::open(dir.path(), common::config()).unwrap();
    let queue = store.queue("jobs").unwrap();
    assert_eq!(queue.len(), 1);
    assert_eq!(queue.dlq().len(), 1);
}

/// The async pool: a success acked, a permanent failure straight to the DLQ, a transient
/// failure retried until its last attempt and dead-lettered with every attempt in its
/// history, a panic counted and retried; counters match.
#[test]
fn async_pool_outcomes_end_in_the_dlq_with_history() {
    let (_dir, store) = common::temp_store(common::config());
    let queue = store.queue("jobs").unwrap();
    let ids = queue
        .enqueue_batch(&["ok", "permanent", "transient", "panic", "ok"])
        .unwrap();
    let runs = Arc::new(AtomicU64::new(0));
    let counted = Arc::clone(&runs);
    let report = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap()
        .block_on(async move {
            AsyncWorkerPool::new(&queue)
                .concurrency(4)
                .retry(Retry::fixed(Duration::from_millis(2)).max_attempts(3))
                .run_until_idle(move |msg: Message| {
                    let counted = Arc::clone(&counted);
                    async move {
                        counted.fetch_add(1, Ordering::Relaxed);
                        tokio::task::yield_now().await;
                        match msg.text() {
                            Some("ok") => Ok(()),
                            Some("permanent") => Err(Failure::permanent("Invalid", "bad")),
                            Some("panic") => panic!("boom on attempt {}", msg.attempt()),
                            _ => Err(Failure::transient("Timeout", "no answer")),
                        }
                    }
                })
                .await
        })
        .unwrap();
    let c = report.counters;
    assert!(report.drained);
    assert_eq!(c.processed, 2);
    assert_eq!(c.dead_lettered, 3);
    assert_eq!(
        c.retried, 4,
        "two retries each for the transient and the panic"
    );
    assert_eq!(c.panics, 3);
    assert_eq!(runs.load(Ordering::Relaxed), 2 + 1 + 3 + 3);
    let dlq = store.queue("jobs").unwrap().dlq();
    assert_eq!(dlq.len(), 3);
    let permanent = dlq.get(ids[1]).unwrap();
    assert_eq!(permanent.failure.error_kind, "Invalid");
    assert_eq!(permanent.failure.attempts.len(), 1);
    let transient = dlq.get(ids[2]).unwrap();
    assert_eq!(transient.failure.error_kind, "Timeout");
    assert_eq!(transient.failure.attempts.len(), 3);
    assert_eq!(transient.metadata.delivery_count, 3);
    let panicked = dlq.get(ids[3]).unwrap();
    assert_eq!(panicked.failure.error_kind, "Panic");
    assert!(panicked.failure.error_message.contains("boom on attempt 3"));
    assert!(store.queue("jobs").unwrap().is_empty());
}

/// Shutdown mid-run: handlers running when the signal comes finish and are acked; the
/// rest is never leased; a handler that outlives the grace period is aborted and its
/// message released, its delivery counted once. Nothing is counted twice.
#[test]
fn async_pool_shutdown_mid_run_counts_nothing_twice() {
    let (_dir, store) = common::temp_store(common::config());
    let queue = store.queue("jobs").unwrap();
    let total = 40u64;
    let payloads: Vec<String> = (0..total).map(|i| format!("job-{i}")).collect();
    queue.enqueue_batch(&payloads).unwrap();
    let queue2 = queue.clone();
    let started = Arc::new(AtomicU64::new(0));
    let seen = Arc::clone(&started);
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let stop_tx = std::sync::Mutex::new(Some(stop_tx));
    let report = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap()
        .block_on(async move {
            AsyncWorkerPool::new(&queue2)
                .concurrency(4)
                .grace(Duration::from_millis(200))
                .run(
                    move |msg: Message| {
                        let n = seen.fetch_add(1, Ordering::SeqCst) + 1;
                        if n == 10 {
                            if let Some(tx) = stop_tx.lock().unwrap().take() {
                                let _ = tx.send(());
                            }
                        }
                        async move {
                            if msg.text() == Some("job-9") || n == 10 {
                                // Never finishes: aborted at the end of the grace period.
                                std::future::pending::<()>().await;
                            }
                            tokio::time::sleep(Duration::from_millis(5)).await;
                            Ok(())
                        }
                    },
                    async move {
                        let _ = stop_rx.await;
                    },
                )
                .await
        })
        .unwrap();
    let c = report.counters;
    assert!(!report.drained, "a handler never finished");
    assert_eq!(c.in_flight, 0);
    let started = started.load(Ordering::SeqCst);
    let stats = queue.stats().counts;
    println!(
        "started {started}, processed {}, left {}",
        c.processed, stats.ready
    );
    assert!(c.processed < started, "the aborted handlers were not acked");
    assert_eq!(stats.in_flight, 0, "aborted handlers' messages released");
    assert_eq!(stats.acked, c.processed);
    assert_eq!(
        stats.ready + c.processed,
        total,
        "every message acked or back in the queue"
    );
    // The released messages keep their one counted delivery; the unleased ones none.
    let left = queue.lease(total as usize).unwrap();
    let redelivered = left.iter().filter(|m| m.attempt() == 2).count() as u64;
    assert_eq!(
        redelivered,
        started - c.processed,
        "each started message counted once"
    );
    assert!(left.iter().all(|m| m.attempt() <= 2));
}

/// The async pool makes its queue's handler histogram known when it starts (all counts
/// 0), before any delivery: the shutdown future, polled once the pool runs, sees it.
#[test]
fn async_pool_declares_its_histogram_at_start() {
    let (_dir, store) = common::temp_store(common::config());
    let queue = store.queue("jobs").unwrap();
    let watcher = store.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    current_thread()
        .block_on(async move {
            AsyncWorkerPool::new(&queue)
                .run(|_: Message| async { Ok(()) }, async move {
                    let m = watcher.metrics_snapshot();
                    let _ = tx.send(m.queues[0].handler_duration.clone());
                })
                .await
        })
        .unwrap();
    let h = rx.recv().unwrap().expect("declared when the pool started");
    assert_eq!((h.count, h.sum_micros), (0, 0));
    assert!(h.cumulative.iter().all(|&n| n == 0));
}
