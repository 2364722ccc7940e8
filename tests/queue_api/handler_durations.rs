//! Handler durations: what a queue records through `Queue::observe_handler(s)`, read back
//! as a cumulative histogram in the metrics snapshot.

use std::time::Duration;

use deadletter::clock::ManualClock;
use deadletter::metrics::DurationHistogram;
use deadletter::{Queue, Store};

use crate::helpers::fast;

fn histogram(store: &Store, queue: &Queue) -> Option<DurationHistogram> {
    let metrics = store.metrics_snapshot();
    let q = metrics.queues.iter().find(|q| q.queue == queue.name());
    q.and_then(|q| q.handler_duration.clone())
}

#[test]
fn counts_are_cumulative() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), fast(&ManualClock::new(0))).unwrap();
    let q = store.queue("q").unwrap();
    assert!(histogram(&store, &q).is_none());
    q.observe_handler(Duration::from_micros(800));
    q.observe_handler(Duration::from_millis(7));
    q.observe_handler(Duration::from_secs(120));
    let s = histogram(&store, &q).unwrap();
    assert_eq!(s.cumulative[..3], [1, 1, 2]);
    assert_eq!(s.cumulative[13], 2);
    assert_eq!(s.count, 3);
    assert_eq!(s.sum_micros, 120_007_800);
}

#[test]
fn a_batch_counts_as_its_runs_one_by_one() {
    let runs = [
        Duration::from_micros(3),
        Duration::from_micros(1_000),
        Duration::from_micros(1_001),
        Duration::from_millis(40),
        Duration::from_secs(61),
    ];
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), fast(&ManualClock::new(0))).unwrap();
    let one_by_one = store.queue("one-by-one").unwrap();
    runs.iter().for_each(|&d| one_by_one.observe_handler(d));
    let batched = store.queue("batched").unwrap();
    batched.observe_handlers(&runs);
    batched.observe_handlers(&[]);
    assert_eq!(histogram(&store, &batched), histogram(&store, &one_by_one));
    assert_eq!(histogram(&store, &batched).unwrap().count, 5);
}

/// A pool started on a queue makes its histogram known before its first delivery (all
/// counts 0), so that `/metrics` has the series from the pool's start; a queue no pool
/// started on has none (whether one will is not known).
#[test]
fn a_started_pool_declares_its_histogram() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), fast(&ManualClock::new(0))).unwrap();
    let jobs = store.queue("jobs").unwrap();
    let idle = store.queue("idle").unwrap();
    let pool = deadletter::WorkerPool::new(&jobs)
        .workers(2)
        .start(|_: &deadletter::Message| Ok(()))
        .unwrap();
    let s = histogram(&store, &jobs).expect("declared at start");
    assert_eq!(s.cumulative, vec![0; 14]);
    assert_eq!((s.count, s.sum_micros), (0, 0));
    assert!(histogram(&store, &idle).is_none());
    pool.shutdown(Duration::from_secs(5)).unwrap();
}
