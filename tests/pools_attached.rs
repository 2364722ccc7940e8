//! Signs of life: worker pools register with their store while they run (`Store::attached_pools`,
//! `Store::workers`, through the control socket `Client::workers`), and each queue's rates
//! over the last minutes, with a manual clock, from real stores.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use deadletter::clock::ManualClock;
use deadletter::control::Client;
use deadletter::pool::{PoolKind, Retry};
use deadletter::queue::FailureReport;
use deadletter::{Config, Failure, Message, Store, WorkerPool};

const T0: u64 = 1_700_000_000_000;

#[test]
fn rates_count_each_outcome_in_the_windows_of_its_time() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let store = Store::open(&dir, Config::fast().clock(clock.clone())).unwrap();
    let orders = store.queue("orders").unwrap();
    orders.enqueue_batch(&["a", "b", "c", "d"]).unwrap();
    let batch = orders.lease(3).unwrap();
    orders.ack(&batch[0]).unwrap();
    let timeout = Failure::transient("Timeout", "no answer");
    orders
        .retry(&batch[1], &FailureReport::new(&timeout), T0)
        .unwrap();
    orders
        .dead_letter(&batch[2], &FailureReport::new(&timeout))
        .unwrap();

    let now = orders.rates();
    let m = now.last_minute;
    assert_eq!(
        (m.enqueued, m.acked, m.retried, m.dead_lettered, m.failed()),
        (4, 1, 1, 1, 2)
    );
    assert_eq!(now.last_5_minutes.enqueued, 4);
    // At T0 the current bucket has just begun: the window covers 55 s and 1 ms.
    assert_eq!(m.covered_ms, 55_001);
    assert!((m.per_second(4) - 4.0 / 55.001).abs() < 1e-9);

    // Two minutes later: gone from the last minute, still in the last five.
    clock.advance(120_000);
    orders.enqueue(b"e").unwrap();
    let later = orders.rates();
    assert_eq!(
        (later.last_minute.enqueued, later.last_minute.failed()),
        (1, 0)
    );
    assert_eq!(
        (later.last_5_minutes.enqueued, later.last_5_minutes.failed()),
        (5, 2)
    );
    assert_eq!(later.last_5_minutes.covered_ms, 295_001);

    // Six minutes after that, nothing is left in either window.
    clock.advance(360_000);
    assert_eq!(orders.rates().last_5_minutes.enqueued, 0);

    // A reopen counts again what the log holds past its last checkpoint (here all of it),
    // by the times its records carry.
    drop(orders);
    store.close().unwrap();
    clock.set(T0 + 120_000);
    let store = Store::open(&dir, Config::fast().clock(clock.clone())).unwrap();
    let reopened = store.existing_queue("orders").unwrap().rates();
    assert_eq!(reopened.last_minute.enqueued, 1);
    assert_eq!(reopened.last_5_minutes.enqueued, 5);
}

#[test]
fn a_running_pool_is_listed_with_its_workers_handlers_and_heartbeat() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let store = Store::open(&dir, Config::fast().clock(clock.clone())).unwrap();
    let orders = store.queue("orders").unwrap();
    store.queue("idle").unwrap();
    assert!(store.attached_pools().is_empty());

    let started = Arc::new(Barrier::new(2));
    let release = Arc::new(AtomicBool::new(false));
    let (s, r) = (Arc::clone(&started), Arc::clone(&release));
    let pool = WorkerPool::new(&orders)
        .workers(3)
        .name("billing")
        .start(move |_: &Message| {
            s.wait();
            while !r.load(Ordering::Acquire) {
                std::thread::sleep(Duration::from_millis(1));
            }
            Ok(())
        })
        .unwrap();
    orders.enqueue(b"slow").unwrap();
    started.wait();

    let pools = store.attached_pools();
    assert_eq!(pools.len(), 1);
    let p = &pools[0];
    assert_eq!(p.queue, "orders");
    assert_eq!(p.name.as_deref(), Some("billing"));
    assert_eq!(p.kind, PoolKind::Threads);
    assert_eq!((p.workers, p.in_flight), (3, 1));
    assert_eq!(p.started_at_ms, T0);
    assert_eq!(p.pid, std::process::id());

    // The heartbeat follows the queue's clock while the pool polls.
    clock.advance(5_000);
    let beat = wait_until(|| {
        let p = store.attached_pools().remove(0);
        (p.last_heartbeat_ms >= T0 + 5_000).then_some(p.last_heartbeat_ms)
    });
    assert_eq!(beat, T0 + 5_000);

    // Per queue: the idle queue has none.
    let workers = store.workers();
    assert!(workers.live);
    assert_eq!(workers.queue("orders").unwrap().pools.len(), 1);
    assert!(workers.queue("idle").unwrap().pools.is_empty());

    release.store(true, Ordering::Release);
    pool.run_until_idle().unwrap();
    assert_eq!(store.attached_pools()[0].in_flight, 0);
    pool.shutdown(Duration::from_secs(5)).unwrap();
    assert!(store.attached_pools().is_empty());

    // A pool dropped without a shutdown is taken out too; one without a name has none.
    let unnamed = WorkerPool::new(&orders)
        .start(|_: &Message| Ok(()))
        .unwrap();
    let pools = store.attached_pools();
    assert_eq!((pools.len(), pools[0].name.as_deref()), (1, None));
    assert!(pools[0].id > p.id);
    drop(unnamed);
    assert!(store.attached_pools().is_empty());
}

#[test]
fn the_owner_answers_for_its_pools_through_the_control_socket() {
    let dir = tempfile::tempdir().unwrap();
    let owner = Store::open(&dir, Config::fast().control_socket(true)).unwrap();
    let orders = owner.queue("orders").unwrap();
    owner.queue("audit").unwrap();
    let pool = WorkerPool::new(&orders)
        .workers(2)
        .retry(Retry::fixed(Duration::from_millis(1)).max_attempts(3))
        .start(|_: &Message| Err(Failure::transient("Timeout", "no answer")))
        .unwrap();
    orders.enqueue(b"ORD-1").unwrap();
    pool.run_until_idle().unwrap();

    let client = Client::connect(&dir).unwrap();
    let workers = client.workers().unwrap();
    assert!(workers.live);
    assert_eq!(workers.pid, std::process::id());
    let q = workers.queue("orders").unwrap();
    assert_eq!((q.pools.len(), q.pools[0].workers), (1, 2));
    assert_eq!(q.rates.last_minute.retried, 2);
    assert_eq!(q.rates.last_minute.dead_lettered, 1);
    assert!(workers.queue("audit").unwrap().pools.is_empty());

    // The metrics of the owner carry the pool gauges, 0 for a queue nothing consumes.
    let text = owner.metrics_snapshot().to_prometheus();
    assert!(
        text.contains("deadletter_worker_pools{queue=\"orders\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("deadletter_pool_workers{queue=\"orders\"} 2"),
        "{text}"
    );
    assert!(text.contains("deadletter_pool_handlers_in_flight{queue=\"orders\"} 0"));
    assert!(
        text.contains("deadletter_worker_pools{queue=\"audit\"} 0"),
        "{text}"
    );

    pool.shutdown(Duration::from_secs(5)).unwrap();
    assert!(client
        .workers()
        .unwrap()
        .queue("orders")
        .unwrap()
        .pools
        .is_empty());

    // A snapshot knows no pools: no gauge, and `workers` says it is not live.
    let snapshot = Store::open_read_only(&dir, Config::fast()).unwrap();
    assert!(!snapshot.workers().live);
    let text = snapshot.metrics_snapshot().to_prometheus();
    assert!(!text.contains("deadletter_worker_pools{"), "{text}");
}

#[cfg(feature = "async")]
#[test]
fn an_async_pool_is_listed_while_it_runs() {
    use deadletter::async_api::AsyncWorkerPool;

    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir, Config::fast()).unwrap();
    let orders = store.queue("orders").unwrap();
    orders.enqueue(b"ORD-1").unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let seen = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let s = Arc::clone(&seen);
    let inside = store.clone();
    rt.block_on(
        AsyncWorkerPool::new(&orders)
            .concurrency(4)
            .name("mailer")
            .run_until_idle(move |_: Message| {
                s.lock().extend(inside.attached_pools());
                async { Ok(()) }
            }),
    )
    .unwrap();
    let seen = seen.lock();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].kind, PoolKind::Async);
    assert_eq!(
        (seen[0].workers, seen[0].name.as_deref()),
        (4, Some("mailer"))
    );
    assert!(store.attached_pools().is_empty());
}

/// Polls `f` until it returns a value (10 s at most).
fn wait_until<T>(mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(std::time::Instant::now() < deadline, "timed out");
        std::thread::sleep(Duration::from_millis(5));
    }
}
