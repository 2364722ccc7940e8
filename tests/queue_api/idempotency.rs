//! An idempotency key makes a repeated enqueue within the window a no-op that returns the
//! first id, per queue, across a reopen; past the window the key enqueues again.

use std::time::Duration;

use deadletter::clock::ManualClock;
use deadletter::queue::EnqueueOptions;
use deadletter::Store;

use crate::common::{self, T0};
use crate::helpers::config;

#[test]
fn idempotency_key_makes_a_repeat_within_the_window_a_no_op() {
    let clock = ManualClock::new(T0);
    let cfg = config(&clock).idempotency_window(Duration::from_secs(60));
    let (dir, store) = common::temp_store(cfg.clone());
    let q = store.queue("payments").unwrap();
    let other = store.queue("refunds").unwrap();
    let key = EnqueueOptions::new().idempotency_key("pay-42");
    let first = q.enqueue_with(b"charge 42", &key).unwrap();
    clock.advance(30_000);
    assert_eq!(q.enqueue_with(b"charge 42 again", &key).unwrap(), first);
    assert_eq!(q.len(), 1);
    // Keys belong to their queue.
    assert_ne!(other.enqueue_with(b"refund 42", &key).unwrap(), first);
    // The window survives a reopen.
    drop((q, other));
    store.close().unwrap();
    let store = Store::open(dir.path(), cfg).unwrap();
    let q = store.queue("payments").unwrap();
    clock.advance(29_000);
    assert_eq!(
        q.enqueue_with(b"charge 42, third try", &key).unwrap(),
        first
    );
    assert_eq!(q.len(), 1);
    // Past the window, the same key enqueues a new message.
    clock.advance(2_000);
    let second = q.enqueue_with(b"charge 42, next day", &key).unwrap();
    assert_ne!(second, first);
    assert_eq!(q.len(), 2);
    let payloads: Vec<Vec<u8>> = q
        .lease(10)
        .unwrap()
        .iter()
        .map(|m| m.payload().to_vec())
        .collect();
    assert_eq!(
        payloads,
        vec![b"charge 42".to_vec(), b"charge 42, next day".to_vec()]
    );
}
