//! The failure history (dead-letterings per hour, `Dlq::failure_timeline`) counts what was
//! dead-lettered, not what is left: replays, deletes and purges leave it as it was; it
//! survives compaction (which deletes the records it was counted from, so it must be in
//! the checkpoint) and a reopen; and it keeps 90 days.

use deadletter::clock::{Clock, ManualClock};
use deadletter::dlq::HISTORY_HOURS;
use deadletter::queue::{FailureReport, QueueOptions};
use deadletter::{Failure, ReplayOptions, Store};

use crate::common::T0;
use crate::helpers::{churn, config, store_first_segment};

const HOUR: u64 = 3_600_000;

/// Dead-letters `n` messages of error kind `kind` on queue "orders", now.
fn fail(store: &Store, n: usize, kind: &str) -> Vec<u64> {
    let q = store
        .queue_with("orders", QueueOptions::default().max_attempts(1))
        .unwrap();
    let payloads: Vec<String> = (0..n).map(|i| format!("order-{i}")).collect();
    q.enqueue_batch(&payloads).unwrap();
    let failure = Failure::permanent(kind, "broken");
    q.lease(n)
        .unwrap()
        .iter()
        .map(|m| {
            q.dead_letter(m, &FailureReport::new(&failure)).unwrap();
            m.id()
        })
        .collect()
}

/// (buckets, Invalid's buckets, earlier) of the last `hours` hours.
fn timeline(store: &Store, clock: &ManualClock, hours: u32) -> (Vec<u64>, Vec<u64>, u64) {
    let t = store
        .dlq("orders")
        .unwrap()
        .failure_timeline(clock.now_ms(), hours)
        .unwrap();
    assert!(t.persisted);
    let invalid = t.by_kind.get("Invalid").cloned().unwrap_or_default();
    (t.buckets, invalid, t.earlier)
}

#[test]
fn replays_deletes_compaction_and_reopen_keep_the_history() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0 - T0 % HOUR);
    let store = Store::open(dir.path(), config(&clock)).unwrap();
    let first = fail(&store, 3, "Invalid");
    clock.advance(2 * HOUR + 5);
    let second = fail(&store, 2, "Timeout");
    let expected = (vec![3, 0, 2], vec![3, 0, 0], 0);
    assert_eq!(timeline(&store, &clock, 3), expected);

    // Replays and deletes change the DLQ, not its history.
    let dlq = store.dlq("orders").unwrap();
    dlq.replay_ids(&first[..2], &ReplayOptions::to_origin())
        .unwrap();
    dlq.delete(second[0]).unwrap();
    clock.advance(1);
    assert_eq!(dlq.purge(std::time::Duration::ZERO, true).unwrap(), 2);
    assert!(dlq.is_empty());
    assert_eq!(timeline(&store, &clock, 3), expected);

    // Compaction reclaims the segments the dead-letter records were in: the history is in
    // the checkpoint it writes, and the reopen reads it there.
    let before = store_first_segment(dir.path());
    churn(&store, 1000);
    store.compact_now().unwrap();
    churn(&store, 1000);
    store.compact_now().unwrap();
    assert!(
        store_first_segment(dir.path()) > before,
        "segments reclaimed"
    );
    assert_eq!(timeline(&store, &clock, 3), expected);
    drop((dlq, store));
    let store = Store::open(dir.path(), config(&clock)).unwrap();
    assert_eq!(timeline(&store, &clock, 3), expected);
    // A wider window: the same counts, at the end; a narrower one: the rest is earlier.
    let (wide, ..) = timeline(&store, &clock, 48);
    assert_eq!((wide.len(), wide.iter().sum::<u64>()), (48, 5));
    assert_eq!(timeline(&store, &clock, 1), (vec![2], vec![], 3));
}

#[test]
fn ninety_days_are_kept() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0 - T0 % HOUR);
    let store = Store::open(dir.path(), config(&clock)).unwrap();
    fail(&store, 1, "Invalid");
    clock.advance(u64::from(HISTORY_HOURS - 1) * HOUR);
    fail(&store, 1, "Invalid");
    let (buckets, _, earlier) = timeline(&store, &clock, HISTORY_HOURS);
    assert_eq!((buckets[0], buckets[buckets.len() - 1], earlier), (1, 1, 0));
    // One hour later the first hour is past 90 days: dropped.
    clock.advance(HOUR);
    fail(&store, 1, "Invalid");
    let (buckets, _, earlier) = timeline(&store, &clock, HISTORY_HOURS);
    assert_eq!((buckets.iter().sum::<u64>(), earlier), (2, 0));
    let dlq = store.dlq("orders").unwrap();
    assert!(dlq.failure_timeline(clock.now_ms(), 0).is_err());
    assert!(dlq
        .failure_timeline(clock.now_ms(), HISTORY_HOURS + 1)
        .is_err());
}
