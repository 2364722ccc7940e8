//! What the documentation says about JetStream's own durability, checked on the installed
//! server:
//! - a server killed with SIGKILL (a process crash, not a power cut) keeps every message
//!   whose publish was acknowledged, and every DLQ entry whose move returned;
//! - the servers the tests start fsync every write (`sync_interval: always`) and are of a
//!   supported version; an older server is refused at connect, with a typed error.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::time::Duration;

use deadletter::queue::{FailureReport, QueueOptions};
use deadletter::{DeadLetterQueue, Failure, MessageQueue};
use deadletter_jetstream::{JetStream, JetStreamOptions, UnsupportedServer};

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

/// The servers the tests start are of a supported version and accept
/// `sync_interval: always` (a server that does not know it exits at start, and
/// `LocalServer::start` would fail).
#[test]
fn the_test_servers_fsync_every_write_and_are_supported() {
    let version = deadletter_jetstream::local_server::binary_version().unwrap();
    assert!(
        version >= deadletter_jetstream::MINIMUM_SERVER,
        "the test server {version:?} is older than the supported minimum"
    );
    let server = common::OwnServer::start();
    let config = std::fs::read_to_string(server.store.path().join("server.conf")).unwrap();
    assert!(config.contains("sync_interval: always"), "{config}");
    let js = common::fresh_namespace(&server.url());
    js.delete_namespace().unwrap();
}

/// A server older than the minimum is refused at connect with `UnsupportedServer`. The
/// "server" is a socket that speaks the start of the NATS protocol as nats-server 2.9.10
/// does (its INFO, then PONG to the client's PING), so no old server needs installing.
#[test]
fn an_old_server_is_refused_at_connect() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let fake = std::thread::spawn(move || {
        let (mut socket, _) = listener.accept().unwrap();
        let info = format!(
            "INFO {{\"server_id\":\"OLD\",\"server_name\":\"old\",\"version\":\"2.9.10\",\
             \"proto\":1,\"go\":\"go1.19\",\"host\":\"127.0.0.1\",\"port\":{port},\
             \"headers\":true,\"max_payload\":1048576,\"jetstream\":true}}\r\n"
        );
        socket.write_all(info.as_bytes()).unwrap();
        let mut reader = BufReader::new(socket.try_clone().unwrap());
        let mut line = String::new();
        while reader.read_line(&mut line).map(|n| n > 0).unwrap_or(false) {
            if line.starts_with("PING") {
                let _ = socket.write_all(b"PONG\r\n");
            }
            line.clear();
        }
    });
    let err = JetStream::connect(&format!("nats://127.0.0.1:{port}"), "old")
        .expect_err("a 2.9.10 server is refused");
    let unsupported = std::error::Error::source(&err)
        .and_then(|s| s.downcast_ref::<UnsupportedServer>())
        .unwrap_or_else(|| panic!("not an UnsupportedServer: {err}"));
    assert_eq!(unsupported.version, "2.9.10");
    assert_eq!(unsupported.minimum, deadletter_jetstream::MINIMUM_SERVER);
    assert!(err.to_string().contains("2.10.0 or later"), "{err}");
    fake.join().unwrap();
}

/// A queue's stream that starts its sequences again (here: deleted and created anew
/// under a live handle, as a server that lost the stream would) is detected at the next
/// enqueue: the enqueue fails with `SequenceWentBackwards`, the message stored under a
/// reused sequence is deleted, and no id is ever given to two messages.
#[test]
fn a_stream_that_went_backwards_is_refused() {
    let url = common::server_url();
    let namespace = common::unique_namespace("backwards");
    let js = JetStream::connect_with(&url, JetStreamOptions::new(namespace.clone())).unwrap();
    let queue = js.queue("orders").unwrap();
    let first = queue.enqueue_batch(&["a", "b", "c"]).unwrap();

    let stream = format!("{namespace}-q-orders");
    let raw = JetStream::connect_with(&url, JetStreamOptions::new(namespace.clone())).unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let nats = async_nats::connect(&url).await.unwrap();
        async_nats::jetstream::new(nats)
            .delete_stream(&stream)
            .await
            .unwrap();
    });
    // Another process opens the queue: its stream is created anew, sequences from 1.
    raw.queue("orders").unwrap();

    let err = queue
        .enqueue("d")
        .expect_err("a reused sequence is refused");
    let backwards = std::error::Error::source(&err)
        .and_then(|s| s.downcast_ref::<deadletter_jetstream::SequenceWentBackwards>())
        .unwrap_or_else(|| panic!("not SequenceWentBackwards: {err}"));
    assert_eq!((backwards.sequence, backwards.seen), (1, 3));
    assert_eq!(first.len(), 3);
    // Nothing was kept under the reused id.
    assert_eq!(
        raw.queue("orders").unwrap().stats().unwrap().counts.ready,
        0
    );
    js.delete_namespace().unwrap();
}
