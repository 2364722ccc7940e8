//! A message the server can never take (larger than its `max_payload`, 1 MiB by default,
//! while a store takes up to 4 MiB) does not stop the forwarder: it goes to the local DLQ
//! with kind `ForwardRefused` and the reason, counted as an error, and the messages behind
//! it are forwarded in order; its DLQ entry, too large as well, stays in the local DLQ and
//! is skipped, counted, never dropped.

use std::sync::atomic::AtomicBool;

use deadletter::{Config, Filter, Store};
use deadletter_jetstream::{ForwardOptions, Forwarder, LinkState};

mod common;

#[test]
fn a_message_too_large_for_the_server_goes_to_the_local_dlq_and_the_rest_flow() {
    let js = common::fresh_namespace(&common::server_url());
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), Config::fast()).unwrap();
    let q = store.queue("readings").unwrap();
    let big = vec![b'x'; 2 << 20];
    let ids = [
        q.enqueue(b"before").unwrap(),
        q.enqueue(&big).unwrap(),
        q.enqueue(b"after").unwrap(),
    ];
    let options = ForwardOptions::new(common::server_url(), js.namespace(), "dev-big")
        .queue("readings")
        .dlq("readings");
    let mut forwarder = Forwarder::new(&store, options).unwrap();
    forwarder
        .run_until_drained(&AtomicBool::new(false))
        .unwrap();
    let status = forwarder.status();
    assert_eq!(status.forwarded, 2);
    assert_eq!(status.forwarded_dlq, 0);
    assert_eq!(status.errors, 2, "the message, then its DLQ entry");
    assert_eq!(
        status.link,
        LinkState::Up,
        "a refusal does not drop the link"
    );
    assert!(status
        .last_error
        .as_deref()
        .unwrap()
        .contains("stays in the local DLQ"));

    let entry = q.dlq().get(ids[1]).unwrap();
    assert_eq!(entry.failure.error_kind, "ForwardRefused");
    assert!(entry.failure.error_message.contains("max_payload"));
    assert_eq!(entry.payload.len(), big.len());
    assert_eq!(q.stats().counts.ready, 0);
    assert!(js
        .fleet_dlq()
        .list(None, &Filter::all(), 10)
        .unwrap()
        .is_empty());
    js.delete_namespace().unwrap();
}
