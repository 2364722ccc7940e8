//! `forward`: a store filled while offline up to its queue's limit (further enqueues
//! refused with `QueueFull`), then forwarded to the machine's NATS server by the real
//! binary until drained: every message and the DLQ entry leave the store, and the queue
//! accepts messages again.

use deadletter::queue::{FailureReport, QueueOptions};
use deadletter::{Config, Error, Failure, Store};

use crate::run::{json as ok_json, serial};

fn server() -> String {
    std::env::var("DEADLETTER_NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4250".into())
}

#[test]
fn forward_drains_a_store_filled_offline_to_its_limit() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let limited = QueueOptions::default().max_pending(500);
    {
        let store = Store::open(dir.path(), Config::default()).unwrap();
        let q = store.queue_with("readings", limited.clone()).unwrap();
        let mut accepted = 0;
        let refused = loop {
            match q.enqueue(format!("reading-{accepted}")) {
                Ok(_) => accepted += 1,
                Err(e) => break e,
            }
        };
        assert!(matches!(refused, Error::QueueFull { limit: 500, .. }));
        assert_eq!(accepted, 500);
        let m = q.lease(1).unwrap().remove(0);
        let f = Failure::permanent("BadReading", "out of range");
        q.dead_letter(&m, &FailureReport::new(&f)).unwrap();
        store.close().unwrap();
    }
    let ns = format!(
        "cli_fwd_{}_{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos()
    );
    let to = format!("{}/{ns}", server());
    let d = dir.path().to_str().unwrap();
    let status = ok_json(&[
        "--json",
        "forward",
        d,
        "--to",
        &to,
        "--origin",
        "dev-1",
        "-q",
        "readings",
        "--dlq",
        "readings",
        "--until-drained",
        "--status-every",
        "0s",
    ]);
    assert_eq!(status["origin"], "dev-1");
    assert_eq!(status["link"], "up");
    assert_eq!(status["forwarded"], 499);
    assert_eq!(status["forwarded_dlq"], 1);
    assert_eq!(status["queues"][0]["lag_messages"], 0);

    let store = Store::open(dir.path(), Config::default()).unwrap();
    let q = store.queue_with("readings", limited).unwrap();
    let stats = q.stats();
    assert_eq!(
        (stats.counts.ready, stats.counts.in_flight, stats.dlq_size),
        (0, 0, 0)
    );
    assert_eq!(stats.counts.acked, 499);
    // Room again.
    q.enqueue_batch(&vec![b"x".to_vec(); 500]).unwrap();
    drop((q, store));

    // The fleet DLQ holds the entry with its origin; replayed, it comes back to the store.
    let listed = ok_json(&["--json", "fleet", "list", &to, "--origin", "dev-1"]);
    let entries = listed["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0]["origin"], "dev-1");
    assert_eq!(entries[0]["queue"], "readings");
    assert_eq!(
        entries[0]["envelope"]["failure"]["error_kind"],
        "BadReading"
    );
    let none = ok_json(&["--json", "fleet", "list", &to, "--origin", "dev-9"]);
    assert_eq!(none["entries"].as_array().unwrap().len(), 0);
    let seq = entries[0]["sequence"].as_u64().unwrap().to_string();
    ok_json(&["--json", "fleet", "replay", &to, &seq]);
    let status = ok_json(&[
        "--json",
        "forward",
        d,
        "--to",
        &to,
        "--origin",
        "dev-1",
        "--dlq",
        "readings",
        "--until-drained",
        "--status-every",
        "0s",
    ]);
    assert_eq!(status["returned"], 1);
    let store = Store::open(dir.path(), Config::default()).unwrap();
    let q = store.queue("readings").unwrap();
    assert_eq!(
        q.stats().counts.ready,
        501,
        "the 500 enqueued since, and the replayed one"
    );
    crate::run::fails(&["fleet", "list", d], 2, "JetStream namespace");
    delete_namespace(&ns);
}

fn delete_namespace(ns: &str) {
    deadletter_jetstream::JetStream::connect(&server(), ns)
        .unwrap()
        .delete_namespace()
        .unwrap();
}

/// `forward --serve`: the store's dashboard from the forwarding process, its `/metrics`
/// with the forwarder's own metrics; its token, from `$DEADLETTER_TOKEN`, not printed.
#[test]
fn forward_serves_the_dashboard_with_the_forwarder_metrics() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};

    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    {
        let store = Store::open(dir.path(), Config::default()).unwrap();
        store.queue("readings").unwrap().enqueue(b"r1").unwrap();
        store.close().unwrap();
    }
    let ns = format!("cli_fwd_serve_{}", std::process::id());
    let to = format!("{}/{ns}", server());
    let mut child = Command::new(crate::run::BIN)
        .args(["--json", "forward"])
        .arg(dir.path())
        .args(["--to", &to, "--origin", "dev-2", "-q", "readings"])
        .args(["--serve", "127.0.0.1:0", "--status-every", "0s"])
        .env("DEADLETTER_TOKEN", "fwd-s3cret")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let info: serde_json::Value = serde_json::from_str(&line).unwrap();
    // A token from the environment is not printed.
    assert!(!line.contains("fwd-s3cret"), "{line}");
    assert_eq!(info["token"], serde_json::Value::Null);
    assert_eq!(info["token_from"], "env");
    let addr: std::net::SocketAddr = info["addr"].as_str().unwrap().parse().unwrap();
    // Wait until the message is forwarded (the link is up).
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let body = loop {
        let reply = crate::http::request(addr, "GET", "/metrics", &[], "");
        assert_eq!(reply.status, 200);
        if reply
            .body
            .contains("deadletter_forward_forwarded_total{origin=\"dev-2\"} 1\n")
        {
            break reply.body;
        }
        assert!(
            std::time::Instant::now() < give_up,
            "not forwarded: {}",
            reply.body
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let _ = child.kill();
    let _ = child.wait();
    assert!(body.contains("deadletter_forward_link_up{origin=\"dev-2\"} 1\n"));
    assert!(
        body.contains("deadletter_forward_lag_messages{origin=\"dev-2\",queue=\"readings\"} 0\n")
    );
    // The store's own families are there too.
    assert!(body.contains("deadletter_acked_total{queue=\"readings\"} 1\n"));
    delete_namespace(&ns);
}
