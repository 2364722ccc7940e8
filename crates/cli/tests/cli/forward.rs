//! `forward`: a store filled while offline up to its queue's limit (further enqueues
//! refused with `QueueFull`), then forwarded to the machine's NATS server by the real
//! binary until drained: every message and the DLQ entry leave the store, and the queue
//! accepts messages again.

use deadletter::{Config, Error, Failure, FailureReport, QueueOptions, Store};

use crate::run::{json as ok_json, serial};

fn server() -> String {
    std::env::var("DEADLETTER_NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".into())
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
    assert_eq!((stats.ready, stats.in_flight, stats.dlq_size), (0, 0, 0));
    assert_eq!(stats.acked, 499);
    // Room again.
    q.enqueue_batch(&vec![b"x".to_vec(); 500]).unwrap();
}
