//! Delivery: batches, retries and backoff, lost leases, typed payloads, delays and time
//! to live.

use std::collections::BTreeSet;
use std::time::Duration;

use deadletter::queue::{EnqueueOptions, FailureOutcome};
use deadletter::{DeadLetterQueue, Delivery, Error, Failure, MessageQueue};
use serde::{Deserialize, Serialize};

use crate::support::{assert_nothing_visible, eventually, fail, held, lease_n, lease_one};
use crate::{options, TestBackend};

/// A batch enqueue keeps its order; a lease hands out at most what was asked; one ack
/// covers many messages.
pub fn batches<B: TestBackend>(backend: &B) {
    let queue = backend.queue("batches", options(3, 30_000)).unwrap();
    let payloads: Vec<String> = (0..10).map(|i| format!("m-{i}")).collect();
    let ids = queue.enqueue_batch(&payloads).unwrap();
    assert_eq!(ids.len(), 10);
    assert_eq!(ids.iter().collect::<BTreeSet<_>>().len(), 10);
    assert_eq!(held(&queue), 10);

    let first = lease_n(&queue, 4);
    assert_eq!(first.len(), 4);
    let texts: Vec<&str> = first.iter().map(|m| m.text().unwrap()).collect();
    assert_eq!(texts, ["m-0", "m-1", "m-2", "m-3"], "enqueue order");
    assert!(first
        .iter()
        .all(|m| m.attempt() == 1 && m.queue() == "batches"));
    assert_eq!(
        first.iter().map(|m| m.id()).collect::<Vec<_>>(),
        ids[..4].to_vec()
    );
    queue.ack_all(&first).unwrap();

    let small = queue.lease_wait(3, Duration::from_secs(5)).unwrap();
    assert!(!small.is_empty() && small.len() <= 3, "{}", small.len());
    let mut rest = small;
    rest.extend(lease_n(&queue, 6 - rest.len()));
    assert_eq!(rest.len(), 6);
    queue.ack_all(&rest).unwrap();
    assert_eq!(held(&queue), 0);
    assert_nothing_visible(&queue, Duration::from_millis(200));
    assert_eq!(queue.dlq().len().unwrap(), 0);
}

/// A retry becomes visible no earlier than asked, and the message behind it is
/// delivered meanwhile.
pub fn retry_waits_and_blocks_nothing<B: TestBackend>(backend: &B) {
    let queue = backend.queue("backoff", options(3, 30_000)).unwrap();
    let a = queue.enqueue("a").unwrap();
    let b = queue.enqueue("b").unwrap();
    let first = lease_one(&queue);
    assert_eq!(first.id(), a);
    let retry_at = queue.now_ms() + 1_000;
    let report_failure = Failure::transient("Busy", "try later");
    let report = deadletter::queue::FailureReport::new(&report_failure).worker("w");
    match queue.retry(&first, &report, retry_at).unwrap() {
        FailureOutcome::Retried { visible_at_ms } => assert!(visible_at_ms >= retry_at),
        other => panic!("retried expected, got {other:?}"),
    }
    // The next message is not held up by the one waiting out its backoff.
    let second = lease_one(&queue);
    assert_eq!(second.id(), b);
    assert_eq!(second.attempt(), 1);
    queue.ack(&second).unwrap();
    assert_eq!(held(&queue), 1, "the retried message is still held");

    let again = lease_one(&queue);
    assert!(
        queue.now_ms() >= retry_at,
        "redelivered before its retry time"
    );
    assert_eq!((again.id(), again.attempt()), (a, 2));
    assert_eq!(again.payload(), b"a");
    queue.ack(&again).unwrap();
    assert_eq!(held(&queue), 0);
    assert_eq!(queue.dlq().len().unwrap(), 0);
}

/// A lease not reported before its visibility timeout comes back with the next attempt
/// number; where the backend tells deliveries apart, the old delivery's ack is refused.
pub fn lost_lease_comes_back<B: TestBackend>(backend: &B) {
    let queue = backend.queue("lost-lease", options(5, 2_000)).unwrap();
    let id = queue.enqueue("slow").unwrap();
    let first = lease_one(&queue);
    assert_eq!((first.id(), first.attempt()), (id, 1));
    // Not reported: the lease runs out and the message is delivered again.
    let second = lease_one(&queue);
    assert_eq!((second.id(), second.attempt()), (id, 2));
    if backend.refuses_stale_outcomes() {
        assert!(matches!(queue.ack(&first), Err(Error::InvalidState { .. })));
    }
    queue.ack(&second).unwrap();
    assert_eq!(held(&queue), 0);
    assert_eq!(queue.dlq().len().unwrap(), 0);
}

/// A delivery that ends without an outcome on the last allowed attempt sends the message
/// to the DLQ instead of delivering it again, with the reason recorded.
pub fn lost_lease_on_the_last_attempt_goes_to_the_dlq<B: TestBackend>(backend: &B) {
    let queue = backend.queue("last-lease", options(1, 500)).unwrap();
    let id = queue.enqueue("dies in its handler").unwrap();
    let first = lease_one(&queue);
    assert_eq!(first.attempt(), 1);
    drop(first);
    let dlq = queue.dlq();
    eventually("the message reaches the DLQ", || {
        let got = queue.lease_wait(10, Duration::from_millis(200)).unwrap();
        assert!(got.is_empty(), "delivered past its last attempt");
        dlq.len().unwrap() == 1
    });
    let entry = dlq.get(id).unwrap();
    assert!(
        ["LeaseExpired", "ConsumerDied"].contains(&entry.failure.error_kind.as_str()),
        "{}",
        entry.failure.error_kind
    );
    assert_eq!(entry.metadata.delivery_count, 1);
    assert_eq!(entry.payload, b"dies in its handler");
    assert_eq!(entry.failure.attempts.len(), 1);
    assert_eq!(entry.failure.attempts[0].number, 1);
    assert_eq!(held(&queue), 0);
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Order {
    pub(crate) id: String,
    pub(crate) cents: u64,
    pub(crate) lines: Vec<(String, u32)>,
}

/// A typed payload decodes to the value enqueued.
pub fn typed_payloads<B: TestBackend>(backend: &B) {
    let queue = backend.queue("typed", options(3, 30_000)).unwrap();
    let order = Order {
        id: "ORD-7".into(),
        cents: 12_345,
        lines: vec![("book".into(), 2), ("pen".into(), 10)],
    };
    queue.enqueue_typed(&order).unwrap();
    let msg = lease_one(&queue);
    assert_eq!(msg.decode::<Order>().unwrap(), order);
    queue.ack(&msg).unwrap();
}

/// Used by the DLQ scenarios: fails `msg` permanently with `kind`.
pub(crate) fn fail_permanently<Q: MessageQueue>(
    queue: &Q,
    msg: &Q::Message,
    kind: &str,
    worker: &str,
) {
    let outcome = fail(
        queue,
        msg,
        &Failure::permanent(kind, format!("{kind} on {}", msg.text().unwrap_or("?"))),
        worker,
        Duration::ZERO,
    );
    assert_eq!(outcome, FailureOutcome::DeadLettered);
}

/// A delayed message is not delivered before its delay and then counts its first attempt;
/// a message whose time to live passed goes to the DLQ (kind `expired`) instead of being
/// delivered, without using an attempt.
pub fn delays_and_time_to_live<B: TestBackend>(backend: &B) {
    let queue = backend.queue("timed", options(3, 30_000)).unwrap();
    let before = queue.now_ms();
    let delayed = queue
        .enqueue_with(
            "later",
            &EnqueueOptions::new().delay(Duration::from_millis(800)),
        )
        .unwrap();
    let now = queue.enqueue("now").unwrap();
    let first = lease_one(&queue);
    assert_eq!(first.id(), now, "the delayed message waited");
    queue.ack(&first).unwrap();
    let later = lease_one(&queue);
    assert!(queue.now_ms() >= before + 800, "delivered before its delay");
    assert_eq!((later.id(), later.attempt()), (delayed, 1));
    queue.ack(&later).unwrap();

    let short = queue
        .enqueue_with(
            "too late",
            &EnqueueOptions::new().ttl(Duration::from_millis(200)),
        )
        .unwrap();
    std::thread::sleep(Duration::from_millis(400));
    let dlq = queue.dlq();
    eventually("the expired message reaches the DLQ", || {
        let got = queue.lease_wait(10, Duration::from_millis(200)).unwrap();
        assert!(got.is_empty(), "an expired message was delivered");
        dlq.len().unwrap() == 1
    });
    let e = dlq.get(short).unwrap();
    assert_eq!(e.failure.error_kind, deadletter::dlq::EXPIRED_KIND);
    assert_eq!(e.metadata.delivery_count, 0);
    assert!(e.failure.attempts.is_empty());
    assert_eq!(e.payload, b"too late");
    assert_eq!(held(&queue), 0);
}
