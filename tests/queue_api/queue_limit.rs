//! A queue's limit of pending messages (`QueueOptions::max_pending`): a store filled while
//! nothing consumes (an edge device offline) accepts messages up to the limit, then
//! refuses enqueues with `Error::QueueFull`, counted, writing nothing and dropping nothing;
//! it accepts again once messages leave.

use std::time::Duration;

use deadletter::clock::ManualClock;
use deadletter::queue::QueueOptions;
use deadletter::{Error, Store};

use crate::helpers;

#[test]
fn a_full_queue_refuses_enqueues_with_a_typed_error_and_counts_them() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(1_700_000_000_000);
    let limited = QueueOptions::default().max_pending(1_000);
    let kept: Vec<u64> = {
        let store = Store::open(dir.path(), helpers::config(&clock)).unwrap();
        let q = store.queue_with("readings", limited.clone()).unwrap();
        let mut kept = Vec::new();
        let mut refused = 0;
        for i in 0..1_200u32 {
            match q.enqueue(i.to_le_bytes()) {
                Ok(id) => kept.push(id),
                Err(Error::QueueFull { queue, limit }) => {
                    assert_eq!((queue.as_str(), limit), ("readings", 1_000));
                    refused += 1;
                }
                Err(e) => panic!("unexpected error {e}"),
            }
        }
        assert_eq!((kept.len(), refused), (1_000, 200));
        // A batch that does not fit whole is refused whole.
        let err = q.enqueue_batch(&[b"x"; 2]).unwrap_err();
        assert!(matches!(err, Error::QueueFull { .. }));
        let stats = q.stats();
        assert_eq!(
            (stats.counts.ready, stats.counts.enqueued, stats.refused),
            (1_000, 1_000, 202)
        );
        let text = store.metrics_snapshot().to_prometheus();
        assert!(text.contains("deadletter_enqueue_refused_total{queue=\"readings\"} 202\n"));

        // Messages in flight count too; once some leave, enqueues are accepted again.
        let leased = q.lease_for(10, Duration::from_secs(30)).unwrap();
        assert!(matches!(q.enqueue(b"late"), Err(Error::QueueFull { .. })));
        q.ack_all(&leased).unwrap();
        kept.extend(q.enqueue_batch(&[b"after"; 10]).unwrap());
        assert!(matches!(q.enqueue(b"late"), Err(Error::QueueFull { .. })));
        // Other queues have no limit.
        store.queue("other").unwrap().enqueue(b"free").unwrap();
        kept.split_off(10)
    };

    // Nothing refused was written, nothing accepted was dropped.
    let store = Store::open(dir.path(), helpers::config(&clock)).unwrap();
    let q = store.queue_with("readings", limited).unwrap();
    let mut found = Vec::new();
    loop {
        let batch = q.lease(500).unwrap();
        if batch.is_empty() {
            break;
        }
        found.extend(batch.iter().map(|m| m.id()));
        q.ack_all(&batch).unwrap();
    }
    assert_eq!(found, kept);
    assert_eq!(q.stats().refused, 0, "the count starts again at each open");
}
