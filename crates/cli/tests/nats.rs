//! The commands on a JetStream namespace (`nats://host:port/namespace` in place of the
//! directory), against the machine's NATS server (`DEADLETTER_NATS_URL`, default
//! `nats://127.0.0.1:4222`), each test in a fresh namespace.

use std::process::{Command, Output};

use deadletter::{DeadLetterQueue, Failure, FailureReport, MessageQueue};
use deadletter_jetstream::{JetStream, JetStreamOptions};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_deadletter");

fn server() -> String {
    std::env::var("DEADLETTER_NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".into())
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

fn run(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().unwrap()
}

fn ok_json(args: &[&str]) -> Value {
    let out = run(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn read_commands_on_a_namespace() {
    let (js, target) = namespace();
    let stats = ok_json(&["--json", "stats", &target]);
    let q = &stats["queues"][0];
    assert_eq!(q["name"], "orders");
    assert_eq!(
        (q["ready"].as_u64(), q["dlq_size"].as_u64()),
        (Some(1), Some(2))
    );
    assert_eq!(q["dlq_stats"]["by_error_kind"]["Invalid"], 1);

    let list = ok_json(&["--json", "list", &target, "--error-kind", "Timeout"]);
    let entries = list["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 1);
    let id = entries[0]["id"].as_u64().unwrap();
    let text = String::from_utf8(run(&["list", &target]).stdout).unwrap();
    assert!(
        text.contains("Invalid") && text.contains("orders-dlq"),
        "{text}"
    );

    let shown = String::from_utf8(run(&["show", &target, &id.to_string()]).stdout).unwrap();
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
    js.delete_namespace().unwrap();
}

#[test]
fn changes_on_a_namespace() {
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

    let purge = ok_json(&["--json", "purge", &target, "--older-than", "0s"]);
    assert_eq!(purge["deleted"], 0, "pending entries are kept");
    let deleted = ok_json(&["--json", "delete", &target, "--error-kind", "Invalid"]);
    assert_eq!(deleted["deleted"], 1);
    assert_eq!(dlq.len().unwrap(), 0);

    let enq = ok_json(&["--json", "enqueue", &target, "-q", "orders", "ORD-9"]);
    assert_eq!(enq["queue"], "orders");
    assert_eq!(orders.stats().unwrap().ready, 1);
    js.delete_namespace().unwrap();
}
