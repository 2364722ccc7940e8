//! The fleet DLQ: two device stores forward their DLQ entries to one namespace; there the
//! entries keep their origin, can be listed and filtered by it, and one replayed goes back
//! through the server to the queue it failed in on its own device, once.

use std::sync::atomic::AtomicBool;

use deadletter::queue::{EnqueueOptions, FailureReport};
use deadletter::{Config, Failure, Filter, Store};
use deadletter_jetstream::{ForwardOptions, Forwarder};

mod common;

/// A device store with one entry in `orders`' DLQ per kind.
fn device(kinds: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), Config::fast()).unwrap();
    let q = store.queue("orders").unwrap();
    for kind in kinds {
        let options = EnqueueOptions::new().attribute("kind", *kind);
        q.enqueue_with(format!("order failing with {kind}"), &options)
            .unwrap();
        let m = q.lease(1).unwrap().remove(0);
        let f = Failure::permanent(*kind, format!("{kind} order"));
        q.dead_letter(&m, &FailureReport::new(&f)).unwrap();
    }
    dir
}

fn forward(dir: &std::path::Path, namespace: &str, origin: &str) -> u64 {
    let store = Store::open(dir, Config::fast()).unwrap();
    let options = ForwardOptions::new(common::server_url(), namespace, origin).dlq("orders");
    let mut f = Forwarder::new(&store, options).unwrap();
    f.run_until_drained(&AtomicBool::new(false)).unwrap();
    let status = f.status();
    assert_eq!(status.queues[0].dlq_entries, 0);
    status.forwarded_dlq + status.returned
}

#[test]
fn entries_keep_their_origin_and_replay_to_their_device() {
    let js = common::fresh_namespace(&common::server_url());
    let ns = js.namespace().to_string();
    let a = device(&["Invalid", "Timeout"]);
    let b = device(&["Invalid"]);
    assert_eq!(forward(a.path(), &ns, "dev-a"), 2);
    assert_eq!(forward(b.path(), &ns, "dev-b"), 1);

    let fleet = js.fleet_dlq();
    let all = fleet.list(None, &Filter::all(), 100).unwrap();
    let origins: Vec<&str> = all.iter().map(|e| e.origin.as_str()).collect();
    assert_eq!(origins, ["dev-a", "dev-a", "dev-b"]);
    assert!(all.iter().all(|e| e.queue == "orders"));
    let from_a = fleet.list(Some("dev-a"), &Filter::all(), 100).unwrap();
    assert_eq!(from_a.len(), 2);
    let invalid = fleet
        .list(None, &Filter::error_kind("Invalid"), 100)
        .unwrap();
    assert_eq!(invalid.len(), 2);
    assert_eq!(
        fleet
            .list(Some("dev-c"), &Filter::all(), 100)
            .unwrap()
            .len(),
        0
    );
    assert!(fleet.list(Some("dev.c"), &Filter::all(), 100).is_err());

    // The whole envelope came along.
    let timeout = from_a
        .iter()
        .find(|e| e.entry.failure.error_kind == "Timeout")
        .unwrap();
    assert_eq!(timeout.entry.payload, b"order failing with Timeout");
    assert_eq!(timeout.entry.metadata.attributes["kind"], "Timeout");

    // Replay it: it leaves the fleet DLQ, and device a's forwarder enqueues it back.
    fleet.replay(timeout.sequence).unwrap();
    assert!(matches!(
        fleet.replay(timeout.sequence),
        Err(deadletter::Error::NotFound(_))
    ));
    assert_eq!(
        fleet
            .list(Some("dev-a"), &Filter::all(), 100)
            .unwrap()
            .len(),
        1
    );
    assert_eq!(forward(a.path(), &ns, "dev-a"), 1);
    // Device b gets nothing.
    assert_eq!(forward(b.path(), &ns, "dev-b"), 0);

    let store = Store::open(a.path(), Config::fast()).unwrap();
    let q = store.queue("orders").unwrap();
    let back = q.lease(10).unwrap();
    assert_eq!(back.len(), 1, "the replayed entry, once");
    assert_eq!(back[0].payload(), b"order failing with Timeout");
    assert_eq!(back[0].attributes()["kind"], "Timeout");
    drop((back, q, store));
    // A second run takes nothing more.
    assert_eq!(forward(a.path(), &ns, "dev-a"), 0);
    js.delete_namespace().unwrap();
}
