//! Time on enqueue: a delayed message stays invisible until its delay passed; a message
//! past its time to live is not delivered but dead-lettered (kind `expired`) or dropped,
//! per queue.

use std::time::Duration;

use deadletter::clock::ManualClock;
use deadletter::queue::EnqueueOptions;
use deadletter::Error;

use crate::common::{self, T0};
use crate::helpers::{fast, options};

#[test]
fn a_delayed_message_is_invisible_until_its_delay_passed() {
    let clock = ManualClock::new(T0);
    let (_dir, store) = common::temp_store(fast(&clock));
    let q = store.queue("q").unwrap();
    let delayed = q
        .enqueue_with(
            b"later",
            &EnqueueOptions::new().delay(Duration::from_secs(5)),
        )
        .unwrap();
    let now = q.enqueue(b"now").unwrap();
    let got = q.lease(10).unwrap();
    assert_eq!(got.iter().map(|m| m.id()).collect::<Vec<_>>(), vec![now]);
    clock.advance(4_999);
    assert!(q.lease(10).unwrap().is_empty());
    assert_eq!(q.len(), 1, "the delayed message waits in the queue");
    clock.advance(1);
    let got = q.lease(10).unwrap();
    assert_eq!(
        got.iter().map(|m| m.id()).collect::<Vec<_>>(),
        vec![delayed]
    );
    assert_eq!(got[0].payload(), b"later");
}

#[test]
fn ttl_expiry_on_lease_goes_to_the_dlq_or_is_dropped() {
    let clock = ManualClock::new(T0);
    let (_dir, store) = common::temp_store(fast(&clock));
    let to_dlq = store.queue_with("keep", options(3)).unwrap();
    let drop_q = store
        .queue_with("drop", options(3).expired_to_dlq(false))
        .unwrap();
    let ttl = EnqueueOptions::new().ttl(Duration::from_secs(1));
    let a = to_dlq.enqueue_with(b"stale order", &ttl).unwrap();
    let fresh = to_dlq.enqueue(b"fresh order").unwrap();
    let b = drop_q.enqueue_with(b"stale ping", &ttl).unwrap();
    clock.advance(1_000);

    let got = to_dlq.lease(10).unwrap();
    assert_eq!(got.iter().map(|m| m.id()).collect::<Vec<_>>(), vec![fresh]);
    let entry = to_dlq.dlq().get(a).unwrap();
    assert_eq!(entry.failure.error_kind, deadletter::dlq::EXPIRED_KIND);
    assert_eq!(entry.failure.error_kind, "expired");
    assert_eq!(entry.payload, b"stale order");
    assert_eq!(entry.metadata.delivery_count, 0);
    let s = to_dlq.stats();
    assert_eq!(
        (s.counts.expired, s.counts.dead_lettered, s.dlq_size),
        (1, 1, 1)
    );

    assert!(drop_q.lease(10).unwrap().is_empty());
    assert!(drop_q.dlq().is_empty());
    assert!(matches!(drop_q.dlq().get(b), Err(Error::NotFound(_))));
    let s = drop_q.stats();
    assert_eq!(
        (
            s.counts.expired,
            s.counts.dead_lettered,
            s.counts.ready,
            s.dlq_size
        ),
        (1, 0, 0, 0)
    );
}
