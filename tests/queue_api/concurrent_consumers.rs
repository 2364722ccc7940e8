//! Four consumer threads on one durable queue: each message goes to exactly one of them and
//! is acked once (their leases and acks share fsyncs).

use std::collections::{BTreeSet, HashSet};
use std::time::Duration;

use deadletter::queue::QueueOptions;

use crate::common;

#[test]
fn concurrent_consumers_each_get_distinct_messages_and_ack_all_once() {
    // The real clock and the durable default: leases and acks of several threads share
    // fsyncs (group commit).
    let (_dir, store) = common::temp_store(common::config().preallocate(false));
    let q = store
        .queue_with(
            "jobs",
            QueueOptions::default().visibility_timeout(Duration::from_secs(600)),
        )
        .unwrap();
    const N: usize = 600;
    const THREADS: usize = 4;
    let ids: BTreeSet<u64> = q
        .enqueue_batch(&(0..N).map(|i| format!("job-{i}")).collect::<Vec<_>>())
        .unwrap()
        .into_iter()
        .collect();
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let q = q.clone();
            std::thread::spawn(move || {
                let mut mine = Vec::new();
                loop {
                    let got = q.lease(1 + t * 3).unwrap();
                    if got.is_empty() {
                        if q.stats().counts.ready == 0 {
                            return mine;
                        }
                        continue;
                    }
                    for m in &got {
                        assert_eq!(m.attempt(), 1, "message {} delivered twice", m.id());
                        assert_eq!(m.payload(), format!("job-{}", m.id()).as_bytes());
                        mine.push(m.id());
                    }
                    if t % 2 == 0 {
                        q.ack_all(&got).unwrap();
                    } else {
                        for m in &got {
                            q.ack(m).unwrap();
                        }
                    }
                }
            })
        })
        .collect();
    let mut seen = HashSet::new();
    let mut per_thread = Vec::new();
    for h in handles {
        let mine = h.join().unwrap();
        per_thread.push(mine.len());
        for id in mine {
            assert!(
                seen.insert(id),
                "message {id} was delivered to two consumers"
            );
        }
    }
    assert_eq!(seen.into_iter().collect::<BTreeSet<_>>(), ids);
    let s = q.stats();
    assert_eq!(
        (s.counts.acked, s.counts.ready, s.counts.in_flight),
        (N as u64, 0, 0)
    );
    println!("messages per consumer: {per_thread:?}");
}
