//! What the documentation says about JetStream's own durability, checked on the installed
//! server:
//! - a server killed with SIGKILL (a process crash, not a power cut) keeps every message
//!   whose publish was acknowledged, and every DLQ entry whose move returned;
//! - the `sync_interval` setting (fsync on every write with `always`) exists from
//!   nats-server 2.10 on; a 2.9 server refuses a configuration that has it.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use deadletter::queue::{FailureReport, QueueOptions};
use deadletter::{DeadLetterQueue, Failure, MessageQueue};
use deadletter_jetstream::{JetStream, JetStreamOptions};

mod common;

#[test]
fn a_killed_server_keeps_what_it_acknowledged() {
    let mut server = common::OwnServer::start();
    let namespace = common::unique_namespace("durable");
    let open = |url: &str| {
        let js = JetStream::connect_with(url, JetStreamOptions::new(namespace.clone())).unwrap();
        let q = js
            .queue_with(
                "events",
                QueueOptions::default()
                    .max_attempts(2)
                    .visibility_timeout(Duration::from_secs(1)),
            )
            .unwrap();
        (js, q)
    };
    let (js, queue) = open(&server.url());
    let payloads: Vec<String> = (0..2_000).map(|i| format!("event-{i}")).collect();
    for chunk in payloads.chunks(100) {
        queue.enqueue_batch(chunk).unwrap();
    }
    let failure = Failure::permanent("Invalid", "rejected");
    for msg in queue.lease_wait(20, Duration::from_secs(5)).unwrap() {
        queue
            .dead_letter(&msg, &FailureReport::new(&failure))
            .unwrap();
    }
    let moved = 2_000 - queue.stats().unwrap().counts.ready;
    assert!(moved > 0);
    drop((queue, js));

    server.kill();
    server.restart();
    let (js, queue) = open(&server.url());
    // Every acknowledged message and every entry is still there.
    assert_eq!(queue.stats().unwrap().counts.enqueued, 2_000);
    let dlq = queue.dlq();
    assert_eq!(dlq.len().unwrap(), moved);
    // The server may have forgotten acknowledgements and terminations (it writes them
    // lazily): a moved message is then in the stream again, but it is never delivered
    // again; the others are all delivered.
    // (A delivery the server remembers but whose termination it forgot comes back when its
    // lease runs out: the loop runs until the queue is empty.)
    let mut delivered = std::collections::BTreeSet::new();
    let give_up = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let stats = queue.stats().unwrap();
        if stats.counts.ready + stats.counts.in_flight == 0 {
            break;
        }
        assert!(
            std::time::Instant::now() < give_up,
            "never drained: {stats:?}"
        );
        let got = queue.lease_wait(100, Duration::from_millis(500)).unwrap();
        for m in &got {
            assert!(
                dlq.get(deadletter::Delivery::id(m)).is_err(),
                "a moved message came back"
            );
            assert!(delivered.insert(deadletter::Delivery::id(m)));
        }
        queue.ack_all(&got).unwrap();
    }
    assert_eq!(delivered.len() as u64, 2_000 - moved);
    assert_eq!(queue.stats().unwrap().counts.acked, 2_000 - moved);
    js.delete_namespace().unwrap();
}

/// The installed server's version, such as (2, 9, 10).
fn server_version() -> (u32, u32, u32) {
    let out = Command::new("nats-server")
        .arg("--version")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let v = text.trim().rsplit('v').next().unwrap();
    let mut parts = v.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    (
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
    )
}

#[test]
fn sync_interval_exists_from_2_10_on() {
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let conf = dir.path().join("server.conf");
    let mut f = std::fs::File::create(&conf).unwrap();
    writeln!(
        f,
        "listen: 127.0.0.1:{port}\njetstream {{ store_dir: {:?}, sync_interval: always }}",
        dir.path().join("store")
    )
    .unwrap();
    drop(f);
    let mut child = Command::new("nats-server")
        .arg("-c")
        .arg(&conf)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let version = server_version();
    if version < (2, 10, 0) {
        let out = child.wait_with_output().unwrap();
        assert!(
            !out.status.success(),
            "a {version:?} server accepted sync_interval"
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("unknown field \"sync_interval\""), "{err}");
    } else {
        common::wait_for_port(port);
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
