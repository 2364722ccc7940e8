//! Failure history is bounded: an entry keeps its last `max_history` attempts, in order,
//! and counts the ones it dropped.

use std::time::Duration;

use deadletter::clock::{Clock, ManualClock};
use deadletter::queue::{FailureOutcome, FailureReport};
use deadletter::Failure;

use crate::common::{self, T0};
use crate::helpers::{fast, options};

#[test]
fn history_keeps_the_last_attempts_and_counts_the_dropped_ones() {
    let clock = ManualClock::new(T0);
    let cfg = fast(&clock).max_history(3);
    let (_dir, store) = common::temp_store(cfg);
    let q = store.queue_with("q", options(10)).unwrap();
    let id = q.enqueue(b"flaky").unwrap();
    for attempt in 1..=7u32 {
        let m = q.lease(1).unwrap().remove(0);
        assert_eq!(m.attempt(), attempt);
        let f = Failure::transient("Timeout", format!("timeout #{attempt}"));
        let report = FailureReport::new(&f).duration(Duration::from_millis(attempt as u64));
        let now = clock.now_ms();
        assert!(matches!(
            q.retry(&m, &report, now).unwrap(),
            FailureOutcome::Retried { .. }
        ));
        clock.advance(10);
    }
    let m = q.lease(1).unwrap().remove(0);
    let f = Failure::permanent("Invalid", "gave up");
    q.dead_letter(&m, &FailureReport::new(&f)).unwrap();
    let entry = q.dlq().get(id).unwrap();
    assert_eq!(entry.metadata.delivery_count, 8);
    let numbers: Vec<u32> = entry.failure.attempts.iter().map(|a| a.number).collect();
    assert_eq!(numbers, vec![6, 7, 8]);
    assert_eq!(entry.failure.attempts_dropped, 5);
    assert_eq!(entry.failure.attempts[0].error_message, "timeout #6");
    assert_eq!(entry.failure.attempts[0].duration_ms, 6);
    assert_eq!(entry.failure.error_kind, "Invalid");
}
