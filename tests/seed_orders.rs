//! The order-events scenario of the DLQ runnable-patterns post, on the raw queue API:
//! four messages (valid, transient twice then fine, poison, valid), at most 3 attempts with
//! a growing backoff; the poison message must not hold up the fourth; then a person fixes
//! the poison payload and replays it.

mod common;

use std::time::Duration;

use common::T0;
use deadletter::{
    Config, Durability, EntryStatus, Failure, FailureOutcome, FailureReport, ManualClock,
    QueueOptions, ReplayOptions, Store,
};

fn process(payload: &str, attempt: u32) -> Result<(), Failure> {
    if !payload.starts_with('{') {
        return Err(Failure::transient(
            "IllegalArgumentException",
            "payload is not valid JSON",
        ));
    }
    if payload.contains("TRANSIENT") && attempt < 3 {
        return Err(Failure::transient(
            "InventoryTimeout",
            "temporary timeout while checking the inventory",
        ));
    }
    Ok(())
}

#[test]
fn order_events_scenario() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let config = Config::default()
        .durability(Durability::Always)
        .clock(clock.clone());
    let store = Store::open(dir.path(), config.clone()).unwrap();
    let options = QueueOptions::default().max_attempts(3);
    let queue = store.queue_with("order-events", options.clone()).unwrap();
    let payloads = [
        r#"{"orderId":"ORD-1"}"#,
        r#"{"orderId":"ORD-2","note":"TRANSIENT"}"#,
        "orderId=ORD-3;;;",
        r#"{"orderId":"ORD-4"}"#,
    ];
    let ids = queue.enqueue_batch(&payloads).unwrap();

    // (message index, attempt, clock time, outcome)
    let mut log: Vec<(usize, u32, u64, bool)> = Vec::new();
    loop {
        let batch = queue.lease(1).unwrap();
        let Some(msg) = batch.into_iter().next() else {
            if queue.is_empty() {
                break;
            }
            clock.advance(50);
            continue;
        };
        let index = ids.iter().position(|&i| i == msg.id()).unwrap();
        let now = clock.now();
        match process(msg.text().unwrap(), msg.attempt()) {
            Ok(()) => {
                queue.ack(&msg).unwrap();
                log.push((index, msg.attempt(), now, true));
            }
            Err(failure) => {
                let backoff = 100 * msg.attempt() as u64;
                let report = FailureReport::new(&failure).worker("billing-1");
                let outcome = queue.retry(&msg, &report, now + backoff).unwrap();
                log.push((index, msg.attempt(), now, false));
                if msg.attempt() < 3 {
                    assert!(matches!(outcome, FailureOutcome::Retried { .. }));
                } else {
                    assert_eq!(outcome, FailureOutcome::DeadLettered);
                }
            }
        }
    }

    // Message 2 succeeds on its third attempt.
    let m2: Vec<_> = log.iter().filter(|e| e.0 == 1).collect();
    assert_eq!(m2.len(), 3);
    assert!(m2[2].3 && !m2[0].3 && !m2[1].3);
    assert_eq!(m2[2].1, 3);
    // Message 4 is delivered (and succeeds) while message 3 waits out its first backoff.
    let m4 = log.iter().find(|e| e.0 == 3).unwrap();
    let m3_second = log.iter().find(|e| e.0 == 2 && e.1 == 2).unwrap();
    assert!(m4.3);
    assert!(
        m4.2 < m3_second.2,
        "message 4 waited behind message 3: {log:?}"
    );
    assert_eq!(m4.1, 1);

    // Message 3 is in the DLQ with 3 attempts and its error, across a reopen.
    drop(queue);
    store.close().unwrap();
    let store = Store::open(dir.path(), config).unwrap();
    let queue = store.queue_with("order-events", options).unwrap();
    let dlq = queue.dlq();
    assert_eq!(dlq.name(), "order-events-dlq");
    assert_eq!(dlq.len(), 1);
    let entry = dlq.get(ids[2]).unwrap();
    assert_eq!(entry.payload, payloads[2].as_bytes());
    assert_eq!(entry.metadata.delivery_count, 3);
    assert_eq!(entry.failure.attempts.len(), 3);
    assert_eq!(entry.failure.error_kind, "IllegalArgumentException");
    assert_eq!(entry.failure.error_message, "payload is not valid JSON");
    assert_eq!(
        entry
            .failure
            .attempts
            .iter()
            .map(|a| a.number)
            .collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
    assert_eq!(entry.dlq.worker.as_deref(), Some("billing-1"));
    assert_eq!(entry.status, EntryStatus::Pending);
    assert_eq!(dlq.stats().by_error_kind["IllegalArgumentException"], 1);

    // A person fixes the payload and replays it; it succeeds.
    let fixed = r#"{"orderId":"ORD-3"}"#;
    dlq.replay_corrected(ids[2], fixed, &ReplayOptions::to_origin().reset_attempts())
        .unwrap();
    assert_eq!(dlq.len(), 0);
    let msg = queue
        .lease_wait(1, Duration::from_secs(1))
        .unwrap()
        .remove(0);
    assert_eq!(msg.id(), ids[2], "the id is stable across the replay");
    assert_eq!(msg.payload(), fixed.as_bytes());
    assert_eq!(msg.attempt(), 1);
    process(msg.text().unwrap(), msg.attempt()).unwrap();
    queue.ack(&msg).unwrap();
    let stats = dlq.stats();
    assert_eq!(stats.reprocessed_ok, 1);
    assert_eq!(stats.replayed, 1);
    assert_eq!(stats.total, 0);
    assert!(queue.is_empty());
}

trait Now {
    fn now(&self) -> u64;
}

impl Now for ManualClock {
    fn now(&self) -> u64 {
        deadletter::Clock::now_ms(self)
    }
}
