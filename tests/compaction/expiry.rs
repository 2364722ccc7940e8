//! Expiry in a compaction run: messages past their time to live go to the DLQ (kind
//! `expired`) or are dropped, per queue; DLQ entries past their retention are removed and
//! counted; a clock jump neither expires everything at once nor brings anything back.

use std::time::Duration;

use deadletter::clock::ManualClock;
use deadletter::queue::{EnqueueOptions, FailureReport, QueueOptions};
use deadletter::{Failure, Store};

use crate::common::{self, T0};
use crate::helpers::config;

#[test]
fn ttl_expiry_to_the_dlq_or_dropped() {
    let clock = ManualClock::new(T0);
    let (_dir, store) = common::temp_store(config(&clock));
    let to_dlq = store.queue("to-dlq").unwrap();
    let dropped = store
        .queue_with("dropped", QueueOptions::default().expired_to_dlq(false))
        .unwrap();
    let ttl = EnqueueOptions::new().ttl(Duration::from_secs(60));
    let a = to_dlq.enqueue_with("a", &ttl).unwrap();
    dropped.enqueue_with("b", &ttl).unwrap();
    to_dlq.enqueue("no ttl").unwrap();
    clock.advance(59_000);
    let r = store.compact_now().unwrap();
    assert_eq!((r.expired_to_dlq, r.expired_dropped), (0, 0));
    clock.advance(2_000);
    let r = store.compact_now().unwrap();
    assert_eq!((r.expired_to_dlq, r.expired_dropped), (1, 1));
    assert_eq!(to_dlq.dlq().get(a).unwrap().failure.error_kind, "expired");
    assert_eq!(to_dlq.stats().counts.expired, 1);
    assert_eq!(to_dlq.stats().counts.ready, 1);
    assert_eq!(dropped.stats().counts.expired, 1);
    assert_eq!(dropped.stats().counts.ready, 0);
}

#[test]
fn dlq_retention_removes_old_entries_and_counts_them() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let mut cfg = config(&clock);
    cfg.retention = Some(Duration::from_secs(3600));
    let store = Store::open(dir.path(), cfg).unwrap();
    let q = store.queue("q").unwrap();
    q.enqueue("x").unwrap();
    let m = q.lease(1).unwrap().remove(0);
    q.dead_letter(&m, &FailureReport::new(&Failure::permanent("K", "m")))
        .unwrap();
    clock.advance(3_599_000);
    assert_eq!(store.compact_now().unwrap().retention_removed, 0);
    clock.advance(2_000);
    assert_eq!(store.compact_now().unwrap().retention_removed, 1);
    let stats = q.dlq().stats();
    assert_eq!((stats.total, stats.expired), (0, 1));
}

#[test]
fn clock_jumps_neither_mass_expire_nor_resurrect() {
    let clock = ManualClock::new(T0);
    let (_dir, store) = common::temp_store(config(&clock));
    let q = store.queue("q").unwrap();
    let ttl = |s| EnqueueOptions::new().ttl(Duration::from_secs(s));
    q.enqueue_with("short", &ttl(60)).unwrap();
    q.enqueue_with("day", &ttl(86_400)).unwrap();
    // A jump a year ahead is followed at most one hour per reading.
    clock.set(T0 + 365 * 86_400_000);
    let r = store.compact_now().unwrap();
    assert_eq!(
        r.expired_to_dlq, 1,
        "only the 60 s message is due within the first hour"
    );
    assert_eq!(q.stats().counts.ready, 1);
    // Back to the right time: nothing already expired comes back, nothing new expires.
    clock.set(T0 + 120_000);
    let r = store.compact_now().unwrap();
    assert_eq!(r.expired_to_dlq, 0);
    assert_eq!(q.dlq().len(), 1);
    assert_eq!(q.stats().counts.ready, 1);
}
