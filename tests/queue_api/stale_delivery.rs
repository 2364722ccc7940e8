//! Lease ownership: a delivery whose lease expired and was handed out again cannot ack,
//! retry, dead-letter or extend; one acked late, before anyone else took it, is acked.

use std::time::Duration;

use deadletter::clock::ManualClock;
use deadletter::queue::FailureReport;
use deadletter::{Error, Failure};

use crate::common::{self, T0};
use crate::helpers::{fast, options};

#[test]
fn a_stale_delivery_cannot_report_after_a_redelivery() {
    let clock = ManualClock::new(T0);
    let (_dir, store) = common::temp_store(fast(&clock));
    let q = store.queue_with("q", options(5)).unwrap();
    let id = q.enqueue(b"job").unwrap();
    let first = q.lease(1).unwrap().remove(0);
    clock.advance(1_000); // the visibility timeout passes
    let second = q.lease(1).unwrap().remove(0);
    assert_eq!((second.id(), second.attempt()), (id, 2));
    let f = Failure::transient("Timeout", "late");
    assert!(matches!(q.ack(&first), Err(Error::InvalidState { .. })));
    assert!(matches!(
        q.retry(&first, &FailureReport::new(&f), T0),
        Err(Error::InvalidState { .. })
    ));
    assert!(matches!(
        q.dead_letter(&first, &FailureReport::new(&f)),
        Err(Error::InvalidState { .. })
    ));
    assert!(matches!(
        q.extend(&first, Duration::from_secs(1)),
        Err(Error::InvalidState { .. })
    ));
    q.ack(&second).unwrap();
    assert!(matches!(q.ack(&second), Err(Error::NotFound(i)) if i == id));
    // A message acked late, before anyone else took it, is still acked.
    q.enqueue(b"slow").unwrap();
    let slow = q.lease(1).unwrap().remove(0);
    clock.advance(5_000);
    q.ack(&slow).unwrap();
    assert!(q.lease(1).unwrap().is_empty());
}
