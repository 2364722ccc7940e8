//! `Queue::lease_in_order`: after a restart, the messages that were leased when the process
//! died (suspects) come back one at a time, and an in-order lease never hands out the
//! messages behind a suspect it must hold back, where `lease` does.

use std::time::Duration;

use deadletter::{Config, Store};

const LEASE: Duration = Duration::from_secs(60);

fn ids(msgs: &[deadletter::Message]) -> Vec<u64> {
    msgs.iter().map(|m| m.id()).collect()
}

#[test]
fn in_order_lease_stops_before_a_held_back_suspect() {
    let dir = tempfile::tempdir().unwrap();
    let enqueued = {
        let store = Store::open(dir.path(), Config::fast()).unwrap();
        let q = store.queue("q").unwrap();
        let enqueued = q.enqueue_batch(&vec![b"m".to_vec(); 8]).unwrap();
        // Four messages in flight when the process "dies".
        assert_eq!(q.lease_for(4, LEASE).unwrap().len(), 4);
        enqueued
    };

    let store = Store::open(dir.path(), Config::fast()).unwrap();
    let q = store.queue("q").unwrap();
    let mut forwarded = Vec::new();
    let mut sizes = Vec::new();
    loop {
        let batch = q.lease_in_order(100, LEASE).unwrap();
        if batch.is_empty() {
            break;
        }
        sizes.push(batch.len());
        forwarded.extend(ids(&batch));
        q.ack_all(&batch).unwrap();
    }
    // The suspects one at a time, in order; the last one with the fresh messages behind it.
    assert_eq!(sizes, vec![1, 1, 1, 5]);
    assert_eq!(forwarded, enqueued);
    assert_eq!(q.stats().counts.acked, 8);
}

#[test]
fn plain_lease_skips_the_held_back_suspects() {
    let dir = tempfile::tempdir().unwrap();
    let enqueued = {
        let store = Store::open(dir.path(), Config::fast()).unwrap();
        let q = store.queue("q").unwrap();
        let enqueued = q.enqueue_batch(&vec![b"m".to_vec(); 4]).unwrap();
        assert_eq!(q.lease_for(2, LEASE).unwrap().len(), 2);
        enqueued
    };
    let store = Store::open(dir.path(), Config::fast()).unwrap();
    let q = store.queue("q").unwrap();
    let batch = q.lease_for(10, LEASE).unwrap();
    // The first suspect, then the two fresh ones; the second suspect waits.
    assert_eq!(ids(&batch), vec![enqueued[0], enqueued[2], enqueued[3]]);
    assert_eq!(batch[0].generation(), 0);
}
