//! Bad input gets a typed error and changes nothing: a message over the size limit (alone,
//! in a batch, or as a corrected replay), an unknown queue or DLQ name, an empty name.

use deadletter::clock::ManualClock;
use deadletter::{Error, ReplayOptions};

use crate::common::{self, T0};
use crate::helpers::{fail_one, fast, options};

#[test]
fn oversized_messages_are_refused_with_a_typed_error() {
    let clock = ManualClock::new(T0);
    let cfg = fast(&clock).max_message_size(1000);
    let (_dir, store) = common::temp_store(cfg);
    let q = store.queue_with("q", options(3)).unwrap();
    q.enqueue(vec![7u8; 1000]).unwrap();
    match q.enqueue(vec![7u8; 1001]) {
        Err(Error::TooLarge { size, max }) => assert_eq!((size, max), (1001, 1000)),
        other => panic!("expected TooLarge, got {other:?}"),
    }
    // A batch with one oversized message enqueues nothing.
    let batch = vec![vec![1u8; 10], vec![2u8; 5000], vec![3u8; 10]];
    assert!(matches!(
        q.enqueue_batch(&batch),
        Err(Error::TooLarge { size: 5000, .. })
    ));
    assert_eq!(q.len(), 1);
    // A corrected payload too large for a replay is refused the same way.
    let id = fail_one(&q, "Bad");
    assert!(matches!(
        q.dlq()
            .replay_corrected(id, vec![0u8; 1001], &ReplayOptions::to_origin()),
        Err(Error::TooLarge { .. })
    ));
    assert_eq!(q.dlq().len(), 1);
}

#[test]
fn unknown_queues_are_a_typed_error() {
    let clock = ManualClock::new(T0);
    let (_dir, store) = common::temp_store(fast(&clock));
    store.queue("orders").unwrap();
    assert!(matches!(
        store.existing_queue("payments"),
        Err(Error::UnknownQueue(n)) if n == "payments"
    ));
    assert!(matches!(
        store.dlq("payments-dlq"),
        Err(Error::UnknownQueue(n)) if n == "payments-dlq"
    ));
    assert_eq!(store.existing_queue("orders").unwrap().name(), "orders");
    assert_eq!(store.dlq("orders-dlq").unwrap().name(), "orders-dlq");
    assert_eq!(store.dlq("orders").unwrap().name(), "orders-dlq");
    assert!(matches!(
        store.queue(""),
        Err(Error::InvalidQueueName { .. })
    ));
}

#[test]
fn queue_and_dlq_names_share_one_namespace() {
    let clock = ManualClock::new(T0);
    let (_dir, store) = common::temp_store(fast(&clock));
    store.queue("zz-dlq").unwrap();
    // "zz"'s DLQ would be named like the existing queue "zz-dlq".
    match store.queue("zz") {
        Err(Error::NameClash { name, existing }) => {
            assert_eq!((name.as_str(), existing.as_str()), ("zz", "zz-dlq"))
        }
        other => panic!("expected NameClash, got {other:?}"),
    }
    store.queue("orders").unwrap();
    // A queue named like an existing queue's DLQ.
    assert!(matches!(
        store.queue("orders-dlq"),
        Err(Error::NameClash { existing, .. }) if existing == "orders"
    ));
    assert_eq!(store.queue_names(), vec!["zz-dlq", "orders"]);
    // Existing queues still open, and each DLQ name resolves to one queue's DLQ.
    store.queue("zz-dlq").unwrap();
    assert_eq!(store.dlq("zz-dlq-dlq").unwrap().name(), "zz-dlq-dlq");
    assert!(matches!(store.dlq("zz"), Err(Error::UnknownQueue(_))));
}
