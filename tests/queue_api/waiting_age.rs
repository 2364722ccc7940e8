//! The age of the oldest waiting message is right after a reopen that cut leases: a
//! message whose delivery died with the process has waited since the process stopped,
//! not since time 0; and an older message still waiting is still the oldest.

use deadletter::clock::ManualClock;
use deadletter::Store;

use crate::common::T0;
use crate::helpers::{config, options};

const MIN: u64 = 60_000;

#[test]
fn lost_leases_age_from_the_restart() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let store = Store::open(dir.path(), config(&clock)).unwrap();
    let q = store.queue_with("jobs", options(3)).unwrap();
    q.enqueue("leased").unwrap();
    let held = q.lease(1).unwrap();
    clock.advance(5 * MIN);
    q.enqueue("waiting").unwrap(); // the last record before the "crash", at T0 + 5 min
    drop((held, q, store));

    clock.advance(10 * MIN);
    let store = Store::open(dir.path(), config(&clock)).unwrap();
    let q = store.queue_with("jobs", options(3)).unwrap();
    let stats = q.stats();
    assert_eq!(stats.counts.ready, 2);
    // The waiting message (visible since T0 + 5 min) and the one whose lease was cut
    // (waiting since the last record, T0 + 5 min): 10 minutes, not 56 years.
    let metrics = store.metrics_snapshot();
    assert_eq!(metrics.queues[0].oldest_message_age_ms, Some(10 * MIN));
    // The suspect is delivered at once, on its own; then only the other waits.
    let first = q.lease(1).unwrap();
    assert_eq!(first[0].text(), Some("leased"));
    assert_eq!(q.stats().oldest_ready_at_ms, Some(T0 + 5 * MIN));
    q.ack_all(&first).unwrap();

    // An older message still waiting stays the oldest while suspects wait too.
    q.enqueue("old").unwrap();
    let held = q.lease(2).unwrap(); // "waiting" and "old"
    assert_eq!(held.len(), 2);
    q.enqueue("older than the restart").unwrap(); // at T0 + 15 min
    clock.advance(30 * MIN);
    q.enqueue("last record").unwrap(); // at T0 + 45 min
    drop((held, q, store));
    clock.advance(MIN);
    let store = Store::open(dir.path(), config(&clock)).unwrap();
    let metrics = store.metrics_snapshot();
    assert_eq!(metrics.queues[0].depth, 4);
    // Waiting since T0 + 15 min: 31 minutes at T0 + 46 min.
    assert_eq!(metrics.queues[0].oldest_message_age_ms, Some(31 * MIN));
}
