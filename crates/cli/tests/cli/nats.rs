//! The commands on a JetStream namespace (`nats://host:port/namespace` in place of the
//! directory), against the machine's NATS server (`DEADLETTER_NATS_URL`, default
//! `nats://127.0.0.1:4250`, the server `.ci/run` starts), each test in a fresh namespace.

use deadletter::queue::FailureReport;
use deadletter::{DeadLetterQueue, Failure, MessageQueue};
use deadletter_jetstream::{JetStream, JetStreamOptions};
use serde_json::Value;

use crate::http;
use crate::run::{json as ok_json, run, serial, stdout};

fn server() -> String {
    std::env::var("DEADLETTER_NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4250".into())
}

/// A fresh namespace with queue `orders`: two entries in its DLQ (kinds `Invalid` and
/// `Timeout`) and one message waiting.
fn namespace() -> (JetStream, String) {
    let ns = format!(
        "cli_{}_{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos()
    );
    let js = JetStream::connect_with(&server(), JetStreamOptions::new(ns.clone())).unwrap();
    let orders = js.queue("orders").unwrap();
    orders.enqueue_batch(&["{bad", "slow", "ORD-3"]).unwrap();
    let msgs = orders.lease(2).unwrap();
    for (msg, kind) in msgs.iter().zip(["Invalid", "Timeout"]) {
        let f = Failure::permanent(kind, format!("{kind} order"));
        orders
            .dead_letter(msg, &FailureReport::new(&f).worker("billing-1"))
            .unwrap();
    }
    let target = format!("{}/{ns}", server());
    (js, target)
}

#[test]
fn read_commands_on_a_namespace() {
    let _serial = serial();
    let (js, target) = namespace();
    // The same document as a store's (the dashboard's /api/stats).
    let stats = ok_json(&["--json", "stats", &target]);
    assert_eq!(stats["dir"], target.as_str());
    let q = &stats["queues"][0];
    assert_eq!(q["queue"], "orders");
    assert_eq!(
        (q["depth"].as_u64(), q["dlq_size"].as_u64()),
        (Some(1), Some(2))
    );
    assert_eq!(q["dlq_stats"]["by_error_kind"]["Invalid"], 1);
    assert!(stdout(&run(&["stats", &target])).contains("orders-dlq"));

    let list = ok_json(&["--json", "list", &target, "--error-kind", "Timeout"]);
    let entries = list["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 1);
    let id = entries[0]["id"].as_u64().unwrap();
    let text = stdout(&run(&["list", &target]));
    assert!(
        text.contains("Invalid") && text.contains("orders-dlq"),
        "{text}"
    );

    let shown = stdout(&run(&["show", &target, &id.to_string()]));
    assert!(shown.contains("Timeout: Timeout order"), "{shown}");
    assert!(shown.contains("billing-1"), "{shown}");

    let analysis = ok_json(&["--json", "analyze", &target]);
    assert_eq!(analysis["dlqs"][0]["analysis"]["total"], 2);

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("dlq.ndjson");
    let out = run(&["export", &target, "-o", file.to_str().unwrap()]);
    assert!(out.status.success());
    let lines = std::fs::read_to_string(&file).unwrap();
    assert_eq!(lines.lines().count(), 2);
    assert!(lines.contains("Invalid order"));

    // Reads changed nothing.
    assert_eq!(js.queue("orders").unwrap().dlq().len().unwrap(), 2);
    // What is about a directory says so.
    let out = run(&["verify", &target]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(run(&["import", &target]).status.code(), Some(2));
    js.delete_namespace().unwrap();
}

#[test]
fn changes_on_a_namespace() {
    let _serial = serial();
    let (js, target) = namespace();
    let orders = js.queue("orders").unwrap();
    let dlq = orders.dlq();
    let timeout = dlq
        .ids(&deadletter::Filter::error_kind("Timeout"), None)
        .unwrap()[0];

    let dry = ok_json(&["--json", "replay", &target, "--all", "--dry-run"]);
    assert_eq!(dry["replayed"].as_array().unwrap().len(), 2);
    assert_eq!(dlq.len().unwrap(), 2, "a dry run changes nothing");

    let replayed = ok_json(&[
        "--json",
        "replay",
        &target,
        &timeout.to_string(),
        "--reset-attempts",
    ]);
    assert_eq!(replayed["replayed"][0]["id"].as_u64(), Some(timeout));
    assert_eq!(dlq.len().unwrap(), 1);
    let back = orders
        .lease_wait(10, std::time::Duration::from_secs(5))
        .unwrap();
    assert!(back.iter().any(|m| deadletter::Delivery::id(m) == timeout));
    orders.ack_all(&back).unwrap();

    let purge = ok_json(&["--json", "purge", &target, "--older-than", "0s", "--yes"]);
    assert_eq!(purge["deleted"], 0, "pending entries are kept");
    let deleted = ok_json(&["--json", "delete", &target, "--error-kind", "Invalid"]);
    assert_eq!(deleted["deleted"], 1);
    assert_eq!(dlq.len().unwrap(), 0);

    let enq = ok_json(&["--json", "enqueue", &target, "-q", "orders", "ORD-9"]);
    assert_eq!(enq["queue"], "orders");
    assert_eq!(orders.stats().unwrap().counts.ready, 1);
    // A mistyped queue is refused with the nearest name, and no stream is created.
    let o = run(&["--json", "enqueue", &target, "-q", "ordrs", "ORD-10"]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let err: serde_json::Value = serde_json::from_slice(&o.stderr).unwrap();
    assert_eq!(err["error"]["kind"], "unknown_queue", "{err}");
    assert_eq!(err["error"]["suggestion"], "orders", "{err}");
    assert_eq!(js.queue_names().unwrap(), ["orders"]);
    js.delete_namespace().unwrap();
}

#[test]
fn serve_a_namespace() {
    let _serial = serial();
    let (js, target) = namespace();
    let (mut child, addr) = crate::serve::start(&target);
    let stats = http::request(addr, "GET", "/api/stats", &[], "");
    let list = http::request(
        addr,
        "GET",
        "/api/dlq/orders-dlq?error_kind=Invalid",
        &[],
        "",
    );
    let metrics = http::request(addr, "GET", "/metrics", &[], "");
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(stats.status, 200, "{}", stats.body);
    let v: Value = serde_json::from_str(&stats.body).unwrap();
    assert_eq!(v["queues"][0]["dlq_size"], 2);
    assert_eq!(list.status, 200, "{}", list.body);
    let v: Value = serde_json::from_str(&list.body).unwrap();
    assert_eq!(v["matched"], 1);
    assert_eq!(v["entries"][0]["error_kind"], "Invalid");
    // The DLQ's size is the sum of its entries by kind; its name is in the info family.
    let by_kind: f64 = metrics
        .body
        .lines()
        .filter(|l| l.starts_with(r#"deadletter_dlq_entries{queue="orders","#))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert_eq!(by_kind, 2.0, "{}", metrics.body);
    assert!(
        metrics
            .body
            .contains("deadletter_queue_info{queue=\"orders\",dlq=\"orders-dlq\"} 1\n"),
        "{}",
        metrics.body
    );
    js.delete_namespace().unwrap();
}
