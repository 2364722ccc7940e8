//! Replay rules: an entry marked reprocessed needs `force`; a replayed entry is gone from
//! the DLQ; a replay to another queue keeps the message's id and attributes, and a failure
//! there lands in that queue's DLQ one generation on.

use deadletter::clock::ManualClock;
use deadletter::dlq::EntryStatus;
use deadletter::queue::{EnqueueOptions, FailureReport};
use deadletter::{Error, Failure, Filter, ReplayOptions};

use crate::common::{self, T0};
use crate::helpers::{fail_one, fast, options};

#[test]
fn replaying_a_reprocessed_entry_needs_force() {
    let clock = ManualClock::new(T0);
    let (_dir, store) = common::temp_store(fast(&clock));
    let q = store.queue_with("q", options(3)).unwrap();
    q.enqueue_batch(&[b"a", b"b"]).unwrap();
    let a = fail_one(&q, "Bad");
    let b = fail_one(&q, "Bad");
    let dlq = q.dlq();
    dlq.mark_reprocessed(a, true).unwrap();
    assert!(matches!(
        dlq.get(a).unwrap().status,
        EntryStatus::Reprocessed { success: true, .. }
    ));
    assert!(matches!(
        dlq.replay_one(a, &ReplayOptions::to_origin()),
        Err(Error::AlreadyReprocessed(id)) if id == a
    ));
    assert!(matches!(
        dlq.replay_corrected(a, b"fixed", &ReplayOptions::to_origin()),
        Err(Error::AlreadyReprocessed(_))
    ));
    // A bulk replay reports it among the failures and replays the rest.
    let report = dlq
        .replay(&Filter::all(), &ReplayOptions::to_origin())
        .unwrap();
    assert_eq!(report.replayed, vec![b]);
    assert_eq!(report.failed.len(), 1);
    assert_eq!(report.failed[0].0, a);
    assert_eq!(dlq.len(), 1);
    // Forced, it goes.
    dlq.replay_one(a, &ReplayOptions::to_origin().force())
        .unwrap();
    assert!(dlq.is_empty());
    let s = dlq.stats();
    assert_eq!((s.replayed, s.reprocessed_ok, s.reprocessed), (2, 1, 0));
    // Replaying an entry that is no longer in the DLQ is NotFound.
    assert!(matches!(
        dlq.replay_one(a, &ReplayOptions::to_origin().force()),
        Err(Error::NotFound(_))
    ));
}

#[test]
fn replay_to_another_queue_keeps_the_id() {
    let clock = ManualClock::new(T0);
    let (_dir, store) = common::temp_store(fast(&clock));
    let orders = store.queue_with("orders", options(3)).unwrap();
    let id = orders
        .enqueue_with(b"ORD-7", &EnqueueOptions::new().attribute("tenant", "acme"))
        .unwrap();
    assert_eq!(fail_one(&orders, "Bad"), id);
    orders
        .dlq()
        .replay_one(
            id,
            &ReplayOptions::to_queue("orders-manual").reset_attempts(),
        )
        .unwrap();
    assert!(orders.dlq().is_empty());
    assert!(orders.lease(1).unwrap().is_empty());
    let manual = store.existing_queue("orders-manual").unwrap();
    let m = manual.lease(1).unwrap().remove(0);
    assert_eq!(m.id(), id);
    assert_eq!(m.payload(), b"ORD-7");
    assert_eq!(m.attempt(), 1);
    assert_eq!(m.attributes()["tenant"], "acme");
    // Failing there, it lands in that queue's DLQ, still with its id, one generation on.
    let f = Failure::permanent("StillBad", "no");
    manual.dead_letter(&m, &FailureReport::new(&f)).unwrap();
    let entry = manual.dlq().get(id).unwrap();
    assert_eq!(entry.generation, 1);
    assert_eq!(entry.metadata.queue, "orders-manual");
    assert_eq!(entry.dlq_name, "orders-manual-dlq");
    assert_eq!(orders.dlq().stats().reprocessed_failed, 1);
}
