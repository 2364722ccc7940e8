//! A reopen never hands one message out twice: a message that is ready again after the
//! reopen (its lease cut by it, or replayed from the DLQ), or retried twice at once before
//! it, is in its queue's ready list once.
//!
//! Regression: replaying the log left a message's enqueue-time entry in the ready list
//! next to the entry that made it ready again, so one lease delivered it twice (found by
//! the newsletter scenario, now in the conformance suite).

use deadletter::clock::ManualClock;
use deadletter::queue::{FailureOutcome, FailureReport, QueueOptions};
use deadletter::{Config, Failure, ReplayOptions, Store};

use crate::common::T0;

#[test]
fn reopen_does_not_deliver_a_message_twice() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let config = Config::fast().clock(clock.clone());
    let open = |dir: &std::path::Path| {
        let store = Store::open(dir, config.clone()).unwrap();
        let queue = store
            .queue_with("newsletter", QueueOptions::default())
            .unwrap();
        (store, queue)
    };
    let (store, queue) = open(dir.path());
    let a = queue
        .enqueue(r#"{"email":"alice@email.com","name":"Alice","plan":"premium"}"#)
        .unwrap();
    let b = queue
        .enqueue(r#"{"email":"bad@.com","name":"Grace","plan":"free"}"#)
        .unwrap();
    let c = queue
        .enqueue(r#"{"email":"bob@email.com","name":"Bob","plan":"free"}"#)
        .unwrap();
    let leased = queue.lease(3).unwrap();
    assert_eq!(leased.len(), 3);
    // a: left leased (the process "dies"); b: dead-lettered; c: retried twice at once.
    let invalid = Failure::permanent(
        "ValidationError",
        "invalid e-mail address 'bad@.com': the domain '.com' is not valid",
    );
    queue
        .dead_letter(&leased[1], &FailureReport::new(&invalid))
        .unwrap();
    let timeout = Failure::transient("TimeoutError", "timed out sending to bob@email.com");
    queue
        .retry(&leased[2], &FailureReport::new(&timeout), 0)
        .unwrap();
    // A retry "at once" is visible one millisecond later, behind what already waits.
    clock.advance(1);
    let again = queue.lease(3).unwrap();
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].id(), c);
    let outcome = queue
        .retry(&again[0], &FailureReport::new(&timeout), 0)
        .unwrap();
    assert_eq!(
        outcome,
        FailureOutcome::Retried {
            visible_at_ms: T0 + 2
        }
    );
    drop((leased, again, queue));
    store.close().unwrap();

    let (store, queue) = open(dir.path());
    queue
        .dlq()
        .replay_one(b, &ReplayOptions::to_origin())
        .unwrap();
    clock.advance(1);
    let got: Vec<u64> = queue.lease(10).unwrap().iter().map(|m| m.id()).collect();
    assert_eq!(
        got,
        [a, b, c],
        "each message exactly once, in (visible-at, id) order"
    );
    assert!(queue.lease(10).unwrap().is_empty());
    let qs = queue.stats();
    assert_eq!((qs.counts.ready, qs.counts.in_flight), (0, 3));
    drop(queue);
    store.close().unwrap();
}
