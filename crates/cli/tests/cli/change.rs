//! Commands that change a store: `replay` (one, a filter, all, a dry run that changes
//! nothing), `delete`, `purge` and `enqueue` (from an argument and from standard input).

use deadletter::Store;
use serde_json::Value;

use crate::fixture::{empty_store, fixture, small_config};
use crate::run::{fails, json, ok, run_stdin, serial, stderr};

#[test]
fn replay_one_filter_all_and_dry_run() {
    let _serial = serial();
    let f = fixture();
    let entries = f.entries();
    let before = f.open().metrics_snapshot();

    // A dry run names what would move and changes nothing.
    let dry = json(&[
        "replay",
        f.path(),
        "--error-kind",
        "InvalidPayload",
        "--dry-run",
        "--json",
    ]);
    assert_eq!(dry["dry_run"], true);
    assert_eq!(dry["replayed"].as_array().unwrap().len(), 2);
    assert_eq!(dry["replayed"][0]["to"], "orders");
    let text = ok(&[
        "replay",
        f.path(),
        "--error-kind",
        "InvalidPayload",
        "--dry-run",
    ]);
    assert!(text.contains("would replay 2") && text.contains("nothing was changed"));
    let after = f.open().metrics_snapshot();
    assert_eq!(after, same_but_time(&before, &after));

    // One id, attempts reset, to the original queue.
    let id = entries["ORD-5"].id().to_string();
    let one = json(&["replay", f.path(), &id, "--reset-attempts", "--json"]);
    assert_eq!(
        one["replayed"][0]["id"].as_u64(),
        Some(entries["ORD-5"].id())
    );
    let store = f.open();
    let orders = store.existing_queue("orders").unwrap();
    assert_eq!(orders.len(), 2);
    assert_eq!(orders.dlq().len(), 3);
    drop((orders, store));

    // The same id again: it is no longer in a DLQ.
    fails(
        &["replay", f.path(), &id],
        1,
        &format!("no DLQ entry with id {id}"),
    );

    // A filter, to another queue (created on the fly).
    let moved = json(&[
        "replay",
        f.path(),
        "--error-kind",
        "PaymentDeclined",
        "--to",
        "orders-manual",
        "--create",
        "--json",
    ]);
    assert_eq!(moved["replayed"][0]["to"], "orders-manual");
    let store = f.open();
    assert_eq!(store.existing_queue("orders-manual").unwrap().len(), 1);
    drop(store);

    // --all of one DLQ.
    let all = json(&["replay", f.path(), "--all", "--queue", "emails", "--json"]);
    assert_eq!(all["replayed"].as_array().unwrap().len(), 1);
    let store = f.open();
    assert!(store.dlq("emails-dlq").unwrap().is_empty());
    assert_eq!(store.dlq("orders-dlq").unwrap().len(), 2);
}

/// `before` with the time-dependent fields of `now` (what a dry run may not change is the
/// rest).
fn same_but_time(
    before: &deadletter::metrics::Metrics,
    now: &deadletter::metrics::Metrics,
) -> deadletter::metrics::Metrics {
    let mut b = before.clone();
    b.at_ms = now.at_ms;
    for (q, n) in b.queues.iter_mut().zip(&now.queues) {
        q.oldest_message_age_ms = n.oldest_message_age_ms;
        q.dlq_oldest_age_ms = n.dlq_oldest_age_ms;
        // How much of the current rate bucket has passed: the counts must stay.
        if let (Some(r), Some(now)) = (&mut q.rates, &n.rates) {
            r.last_minute.covered_ms = now.last_minute.covered_ms;
            r.last_5_minutes.covered_ms = now.last_5_minutes.covered_ms;
        }
    }
    b
}

#[test]
fn delete_and_purge() {
    let _serial = serial();
    let f = fixture();
    let entries = f.entries();
    let id = entries["ORD-4"].id().to_string();
    let dry = json(&["delete", f.path(), &id, "--dry-run", "--json"]);
    assert_eq!(dry["deleted"], 1);
    assert_eq!(f.open().dlq("orders-dlq").unwrap().len(), 4);
    let del = json(&["delete", f.path(), &id, "--json"]);
    assert_eq!(del["deleted"], 1);
    assert_eq!(f.open().dlq("orders-dlq").unwrap().len(), 3);
    let by_kind = ok(&["delete", f.path(), "--error-kind", "InvalidPayload"]);
    assert!(by_kind.contains("deleted 2 entries"), "{by_kind}");
    assert_eq!(f.open().dlq("orders-dlq").unwrap().len(), 1);

    // Purge keeps pending entries unless asked: nothing is reprocessed here.
    let dry = json(&[
        "purge",
        f.path(),
        "--older-than",
        "1m",
        "--dry-run",
        "--json",
    ]);
    assert_eq!(dry["deleted"], 0);
    assert_eq!(dry["kept_pending"], 2);
    // Without a terminal to ask on, deleting everything or purging needs --yes.
    fails(&["delete", f.path(), "--all"], 2, "--yes");
    fails(
        &[
            "purge",
            f.path(),
            "--older-than",
            "30d",
            "--include-pending",
        ],
        2,
        "--yes",
    );
    let none = json(&[
        "purge",
        f.path(),
        "--older-than",
        "30d",
        "--include-pending",
        "--yes",
        "--json",
    ]);
    assert_eq!(none["deleted"], 0, "nothing is 30 days old");
    let text = ok(&[
        "purge",
        f.path(),
        "--older-than",
        "90m",
        "--include-pending",
        "-y",
    ]);
    assert!(text.contains("deleted 2 entries"), "{text}");
    let store = f.open();
    assert!(store.dlq("orders-dlq").unwrap().is_empty());
    assert!(store.dlq("emails-dlq").unwrap().is_empty());
}

#[test]
fn enqueue_from_argument_and_stdin() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    // `enqueue --create` creates a store (with the default 64 MiB segment)...
    let fresh = dir.path().join("fresh");
    let v = json(&[
        "enqueue",
        fresh.to_str().unwrap(),
        "-q",
        "jobs",
        "first",
        "--create",
        "--json",
    ]);
    assert_eq!(v["id"], 0);
    assert_eq!(v["created"]["store"], fresh.to_str().unwrap());
    assert_eq!(
        deadletter::verify::verify(&fresh).unwrap().segments.len(),
        1
    );
    // ... and adds to an existing one.
    let store_dir = dir.path().join("store");
    empty_store(&store_dir);
    let d = store_dir.to_str().unwrap();
    let v = json(&[
        "enqueue",
        d,
        "--queue",
        "orders",
        r#"{"orderId":"X"}"#,
        "--attr",
        "source=cli",
        "--create",
        "--json",
    ]);
    let first = v["id"].as_u64().unwrap();
    assert_eq!(v["created"]["queues"][0], "orders");
    assert_eq!(v["queue"], "orders");
    let binary = [0u8, 255, 10, 13, 128, 7];
    let o = run_stdin(&["enqueue", d, "--queue", "orders", "--json"], &binary);
    assert!(o.status.success(), "{}", stderr(&o));
    let second: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(second["bytes"], 6);
    let text = ok(&["enqueue", d, "-q", "orders", "plain"]);
    assert!(text.starts_with("enqueued message"), "{text}");

    let store = Store::open(&store_dir, small_config()).unwrap();
    let q = store.existing_queue("orders").unwrap();
    let msgs = q.lease(10).unwrap();
    assert_eq!(msgs.len(), 3);
    assert_eq!(msgs[0].id(), first);
    assert_eq!(msgs[0].payload(), br#"{"orderId":"X"}"#);
    assert_eq!(
        msgs[0].attributes().get("source").map(String::as_str),
        Some("cli")
    );
    assert_eq!(msgs[1].payload(), binary);
    assert_eq!(msgs[2].payload(), b"plain");
}
