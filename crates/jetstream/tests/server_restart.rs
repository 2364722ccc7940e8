//! The server stops during a move to the DLQ and comes back: each entry is in the DLQ
//! exactly once and gone from the queue. The test runs its own nats-server (a free
//! loopback port, a temporary store directory) and kills it with SIGKILL at a different
//! moment of the move in each round.

use std::time::{Duration, Instant};

use deadletter::queue::{FailureReport, QueueOptions};
use deadletter::{DeadLetterQueue, Delivery, Failure, Filter, MessageQueue, Page};
use deadletter_jetstream::{JetStream, JetStreamOptions};

mod common;

const ROUNDS: u64 = 8;

#[test]
fn a_server_restart_during_dlq_moves_leaves_each_entry_once() {
    let mut server = common::OwnServer::start();
    let options = JetStreamOptions::new(common::unique_namespace("restart"))
        .move_patience(Duration::from_secs(30));
    let js = JetStream::connect_with(&server.url(), options).unwrap();
    let queue = js
        .queue_with(
            "payments",
            QueueOptions::default()
                .max_attempts(3)
                .visibility_timeout(Duration::from_secs(1)),
        )
        .unwrap();
    // Twice as many messages as rounds: a move that the kill interrupted after the server
    // had stored it (the entry and the termination on disk, the confirmation lost) fails
    // in the client, and the retry below then moves the next message too; the drain at
    // the end moves whatever the rounds left.
    let payloads: Vec<String> = (0..2 * ROUNDS).map(|i| format!("payment-{i}")).collect();
    let ids = queue.enqueue_batch(&payloads).unwrap();
    let failure = Failure::permanent("Declined", "the card was declined");

    for round in 0..ROUNDS {
        let msg = queue
            .lease_wait(1, Duration::from_secs(10))
            .unwrap()
            .pop()
            .unwrap_or_else(|| panic!("no message to move in round {round}: {:?}", queue.stats()));
        // The move runs while the server is killed: at once, or a few milliseconds in.
        let mover = {
            let queue = queue.clone();
            let msg = msg.clone();
            let failure = failure.clone();
            std::thread::spawn(move || {
                let report = FailureReport::new(&failure).worker("payments-1");
                queue.dead_letter(&msg, &report)
            })
        };
        std::thread::sleep(Duration::from_millis(round * 2));
        server.kill();
        std::thread::sleep(Duration::from_millis(300));
        server.restart();
        // The move finishes once the server is back (it retries), or it gave up and the
        // message comes back to be moved again, as a worker would.
        if mover.join().unwrap().is_err() {
            let again = queue.lease_wait(1, Duration::from_secs(10)).unwrap();
            for m in again {
                let report = FailureReport::new(&failure).worker("payments-1");
                queue.dead_letter(&m, &report).unwrap();
            }
        }
        assert!(payloads.iter().any(|p| p.as_bytes() == msg.payload()));
    }

    // Whatever a restart interrupted is settled by the next delivery: drain.
    let give_up = Instant::now() + Duration::from_secs(30);
    loop {
        let stats = queue.stats().unwrap();
        if stats.counts.ready + stats.counts.in_flight == 0 {
            break;
        }
        assert!(
            Instant::now() < give_up,
            "the queue never emptied: {stats:?}"
        );
        for m in queue.lease_wait(10, Duration::from_millis(500)).unwrap() {
            let report = FailureReport::new(&failure).worker("payments-1");
            queue.dead_letter(&m, &report).unwrap();
        }
    }

    let dlq = queue.dlq();
    let entries = dlq.list(&Filter::all(), Page::first(100)).unwrap();
    let mut listed: Vec<u64> = entries.iter().map(|e| e.id()).collect();
    listed.sort_unstable();
    assert_eq!(listed, ids, "each message in the DLQ exactly once");
    assert_eq!(dlq.len().unwrap(), 2 * ROUNDS);
    for e in &entries {
        assert_eq!(e.failure.error_kind, "Declined");
        // A move the outage interrupted before it wrote anything is done again by the
        // next delivery, which is counted: one attempt or two.
        let last = e.failure.attempts.last().expect("the failed attempt");
        assert_eq!(last.number, e.metadata.delivery_count, "{e:?}");
        assert!((1..=2).contains(&e.metadata.delivery_count), "{e:?}");
    }
    let stats = queue.stats().unwrap();
    assert_eq!(stats.counts.dead_lettered, 2 * ROUNDS, "counted once each");
    assert_eq!(stats.counts.acked, 0);
    js.delete_namespace().unwrap();
}
