//! `Queue::ack_and_lease`: one write acks a delivery and leases the next ones.

use std::time::Duration;

use deadletter::clock::ManualClock;
use deadletter::Error;

use crate::common::{self, T0};

#[test]
fn acks_and_leases_in_one_write_and_refuses_a_lost_lease() {
    let clock = ManualClock::new(T0);
    let (_dir, store) = common::temp_store(common::config_at(&clock));
    let q = store.queue("q").unwrap();
    q.enqueue_batch(&["a", "b", "c"]).unwrap();
    let a = q.lease(1).unwrap().remove(0);
    let fsyncs = store.storage_stats().fsyncs;
    let next = q.ack_and_lease(&a, 2).unwrap();
    assert_eq!(
        store.storage_stats().fsyncs,
        fsyncs + 1,
        "one fsync for ack and lease"
    );
    assert_eq!(
        next.iter()
            .map(|m| m.payload().to_vec())
            .collect::<Vec<_>>(),
        vec![b"b".to_vec(), b"c".to_vec()]
    );
    assert_eq!(q.stats().counts.acked, 1);
    assert_eq!(q.stats().counts.in_flight, 2);

    // A delivery whose lease expired and was handed out again cannot ack: nothing is leased.
    clock.advance(Duration::from_secs(31).as_millis() as u64);
    let again = q.lease(2).unwrap();
    assert_eq!(again.len(), 2);
    let err = q.ack_and_lease(&next[0], 1).unwrap_err();
    assert!(matches!(err, Error::InvalidState { .. }), "{err:?}");
    assert_eq!(q.stats().counts.in_flight, 2);
    q.ack_all(&again).unwrap();
    assert!(q.is_empty());
}
