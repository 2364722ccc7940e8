//! The worker pool on the backend: outcomes and counters, the pool's own retry policy
//! and typed handlers, the heartbeat that keeps a slow handler's lease, and a shutdown
//! that gives back what it has not started. The suite runs each twice: on the backend's
//! own batching ([`WorkerQueue`](deadletter::backend::WorkerQueue)) and on the defaults
//! built on the core ([`ThroughCore`](crate::ThroughCore)).

use std::collections::BTreeSet;
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use deadletter::pool::{Retry, DECODE_ERROR_KIND};
use deadletter::queue::MessageId;
use deadletter::{DeadLetterQueue, Delivery, Failure, Filter, MessageQueue, Page, WorkerPool};

use crate::delivery::Order;
use crate::support::{held, lease_n, PATIENCE};
use crate::{options, TestBackend};

/// What a handler of backend `B`'s queues is given.
type Msg<B> = <<B as TestBackend>::Queue as MessageQueue>::Message;

/// The worker pool on the backend: successes, transient failures retried, a permanent
/// failure and a panicking handler in the DLQ with their history, counters, and a
/// graceful shutdown.
pub fn worker_pool<B: TestBackend>(backend: &B) {
    let queue = backend.queue("pool", options(3, 30_000)).unwrap();
    let mut payloads: Vec<String> = (0..20).map(|i| format!("ok-{i}")).collect();
    payloads.extend((0..5).map(|i| format!("flaky-{i}")));
    payloads.push("bad".into());
    payloads.push("boom".into());
    let ids = queue.enqueue_batch(&payloads).unwrap();
    let pool = WorkerPool::new(&queue)
        .workers(3)
        .retry(
            Retry::fixed(Duration::from_millis(50))
                .no_jitter()
                .max_attempts(3),
        )
        .lease(Duration::from_secs(10))
        .name("pool-worker")
        .start(|msg: &Msg<B>| handle(msg))
        .unwrap();
    pool.run_until_idle().unwrap();
    let report = pool.shutdown(Duration::from_secs(10)).unwrap();
    assert!(report.drained);
    let c = report.counters;
    assert_eq!((c.processed, c.dead_lettered, c.panics), (25, 2, 3));
    assert_eq!(c.retried, 5 + 2);
    assert_eq!(c.in_flight, 0);
    assert_eq!(held(&queue), 0);

    let dlq = queue.dlq();
    assert_eq!(dlq.len().unwrap(), 2);
    let bad = dlq.get(ids[25]).unwrap();
    assert_eq!(bad.failure.error_kind, "InvalidPayload");
    assert_eq!(bad.metadata.delivery_count, 1);
    assert!(bad
        .dlq
        .worker
        .as_deref()
        .is_some_and(|w| w.starts_with("pool-worker-")));
    let boom = dlq.get(ids[26]).unwrap();
    assert_eq!(boom.failure.error_kind, "Panic");
    assert!(boom.failure.error_message.contains("kaboom"));
    assert_eq!(boom.metadata.delivery_count, 3);
    assert_eq!(
        boom.failure
            .attempts
            .iter()
            .map(|a| a.number)
            .collect::<Vec<_>>(),
        [1, 2, 3]
    );
    let listed = dlq.list(&Filter::all(), Page::first(10)).unwrap();
    assert_eq!(listed.len(), 2);
}

fn handle(msg: &impl Delivery) -> Result<(), Failure> {
    let text = msg.text().unwrap_or_default();
    if text.starts_with("flaky-") && msg.attempt() == 1 {
        return Err(Failure::transient("Timeout", "first try times out"));
    }
    match text {
        "bad" => Err(Failure::permanent("InvalidPayload", "cannot be processed")),
        "boom" => panic!("kaboom"),
        _ => Ok(()),
    }
}

/// The pool's retry policy is the queue's while it runs (here 2 attempts on a queue
/// opened with 5), failures record the pool's worker names, and a typed handler gets the
/// decoded value, a payload that does not decode being a permanent `DecodeError`.
pub fn pool_policy_and_typed_handlers<B: TestBackend>(backend: &B) {
    let queue = backend.queue("typed-pool", options(5, 30_000)).unwrap();
    let order = |id: &str, cents| Order {
        id: id.into(),
        cents,
        lines: vec![("book".into(), 1)],
    };
    let paid = queue.enqueue_typed(&order("ORD-1", 1_200)).unwrap();
    let declined = queue.enqueue_typed(&order("ORD-2", 0)).unwrap();
    let garbage = queue.enqueue("not an order").unwrap();
    let seen: Arc<Mutex<Vec<(String, MessageId)>>> = Arc::default();
    let log = Arc::clone(&seen);
    let pool = WorkerPool::new(&queue)
        .name("billing")
        .retry(
            Retry::fixed(Duration::from_millis(20))
                .no_jitter()
                .max_attempts(2),
        )
        .start_typed(move |o: Order, msg: &Msg<B>| {
            log.lock().unwrap().push((o.id.clone(), msg.id()));
            match o.cents {
                0 => Err(Failure::transient("Declined", "the card was declined")),
                _ => Ok(()),
            }
        })
        .unwrap();
    pool.run_until_idle().unwrap();
    let c = pool.shutdown(Duration::from_secs(10)).unwrap().counters;
    assert_eq!((c.processed, c.retried, c.dead_lettered), (1, 1, 2));
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen.iter()
            .filter(|(o, id)| o == "ORD-2" && *id == declined)
            .count(),
        2,
        "{seen:?}"
    );
    assert!(seen.contains(&("ORD-1".to_string(), paid)));
    assert!(seen.iter().all(|(_, id)| *id != garbage), "{seen:?}");
    assert_eq!(held(&queue), 0);

    let dlq = queue.dlq();
    assert_eq!(dlq.len().unwrap(), 2);
    let e = dlq.get(declined).unwrap();
    assert_eq!(e.failure.error_kind, "Declined");
    assert_eq!(
        e.metadata.delivery_count, 2,
        "the pool's limit, not the queue's"
    );
    let numbers: Vec<u32> = e.failure.attempts.iter().map(|a| a.number).collect();
    assert_eq!(numbers, [1, 2]);
    assert!(e.failure.attempts.iter().all(|a| a
        .worker
        .as_deref()
        .is_some_and(|w| w.starts_with("billing-"))));
    let g = dlq.get(garbage).unwrap();
    assert_eq!(g.failure.error_kind, DECODE_ERROR_KIND);
    assert_eq!(g.metadata.delivery_count, 1, "permanent: no retry");
    assert_eq!(g.payload, b"not an order");
}

/// A handler that runs longer than the pool's lease keeps it (the heartbeat extends it):
/// no message is delivered twice, and nothing counts as a lost lease.
pub fn slow_handlers_keep_their_lease<B: TestBackend>(backend: &B) {
    let queue = backend.queue("slow", options(3, 30_000)).unwrap();
    let ids = queue
        .enqueue_batch(&["slow-1", "quick-1", "slow-2", "quick-2", "quick-3"])
        .unwrap();
    let seen: Arc<Mutex<Vec<(MessageId, u32)>>> = Arc::default();
    let log = Arc::clone(&seen);
    let pool = WorkerPool::new(&queue)
        .workers(2)
        .lease(Duration::from_secs(1))
        .start(move |msg: &Msg<B>| {
            log.lock().unwrap().push((msg.id(), msg.attempt()));
            if msg.text().is_some_and(|t| t.starts_with("slow")) {
                std::thread::sleep(Duration::from_millis(2_500));
            }
            Ok(())
        })
        .unwrap();
    pool.run_until_idle().unwrap();
    let c = pool.shutdown(Duration::from_secs(10)).unwrap().counters;
    assert_eq!((c.processed, c.retried, c.lost_leases), (5, 0, 0));
    let mut seen = seen.lock().unwrap().clone();
    seen.sort_unstable();
    let once: Vec<(MessageId, u32)> = ids.iter().map(|&id| (id, 1)).collect();
    assert_eq!(
        seen, once,
        "each message handled once, on its first delivery"
    );
    assert_eq!(held(&queue), 0);
    assert_eq!(queue.dlq().len().unwrap(), 0);
}

/// A pool stopped while a handler runs lets that handler finish and handles nothing
/// more; the messages it holds but has not started go back uncounted: each is
/// delivered later on its first attempt.
pub fn shutdown_gives_back_what_has_not_started<B: TestBackend>(backend: &B) {
    let queue = backend.queue("stop", options(3, 30_000)).unwrap();
    let payloads: Vec<String> = (0..300).map(|i| format!("m-{i}")).collect();
    let ids = queue.enqueue_batch(&payloads).unwrap();
    let (reached, reached_rx) = mpsc::channel();
    let (release, release_rx) = mpsc::channel::<()>();
    let release_rx = Mutex::new(release_rx);
    let pool = WorkerPool::new(&queue)
        .start(move |msg: &Msg<B>| {
            if msg.text() == Some("m-100") {
                reached.send(()).unwrap();
                let _ = release_rx.lock().unwrap().recv_timeout(PATIENCE);
            }
            Ok(())
        })
        .unwrap();
    reached_rx
        .recv_timeout(PATIENCE)
        .expect("the pool reached m-100");
    // The handler of m-100 ends once the pool is stopping.
    let releaser = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        let _ = release.send(());
    });
    let report = pool.shutdown(PATIENCE).unwrap();
    releaser.join().unwrap();
    assert!(report.drained);
    assert_eq!(report.counters.processed, 101, "m-0 to m-100, and no more");
    assert_eq!(report.counters.in_flight, 0);

    let rest = lease_n(&queue, 199);
    let got: BTreeSet<MessageId> = rest.iter().map(|m| m.id()).collect();
    assert_eq!(got, ids[101..].iter().copied().collect());
    assert!(
        rest.iter().all(|m| m.attempt() == 1),
        "a message whose handler never started was charged an attempt"
    );
    queue.ack_all(&rest).unwrap();
    assert_eq!(held(&queue), 0);
    assert_eq!(queue.dlq().len().unwrap(), 0);
}
