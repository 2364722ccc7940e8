//! Chaos: the test's own nats-server (`sync_interval: always`) is killed with SIGKILL at
//! random every 1 to 3 s and restarted after 0.05 to 1.5 s, at least 30 times, while a
//! pool of 4 workers with succeeding, flaky, poison and always-failing handlers runs and
//! an enqueuer keeps enqueueing (with idempotency keys, retrying each until the server
//! acknowledges it). At the end:
//! - every acknowledged enqueue ended exactly one way: acknowledged after its handler
//!   succeeded, or in the DLQ exactly once (never both, never neither); nothing else
//!   settled but a second copy of an enqueue that was resent after the kill took its
//!   acknowledgement (see the comment at the check: the server's limit, counted);
//! - no id was given to two messages;
//! - no delivery reported an attempt past `max_attempts`, and no failing handler ran
//!   more than `max_attempts` times for one message but for a known gap (one run more,
//!   counted and printed: see the comment at the check);
//! - the pool never stopped (it rode through every restart on its own);
//! - the queue's stats match the messages.
//!
//! `DEADLETTER_CHAOS_KILLS=N` runs N kills (default 30) for a longer soak.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use deadletter::pool::Retry;
use deadletter::queue::{EnqueueOptions, QueueOptions};
use deadletter::{DeadLetterQueue, Delivery, Failure, Filter, MessageQueue, Page, WorkerPool};
use deadletter_jetstream::{JetStream, JetStreamMessage, JetStreamOptions};

mod common;

const MAX_ATTEMPTS: u32 = 4;
const LEASE: Duration = Duration::from_secs(2);

/// A small xorshift generator: the kill times differ per run, and the seed is printed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn millis(&mut self, low: u64, high: u64) -> Duration {
        Duration::from_millis(low + self.next() % (high - low + 1))
    }
}

fn payload(i: u64) -> String {
    match i % 20 {
        3 | 11 => format!("flaky-{i}"),
        7 => format!("poison-{i}"),
        13 => format!("fail-{i}"),
        _ => format!("ok-{i}"),
    }
}

/// What the handlers saw, by message id.
#[derive(Default)]
struct Seen {
    /// Ids whose handler succeeded (their ack follows).
    succeeded: BTreeSet<u64>,
    /// The payload of every id a handler saw.
    payloads: BTreeMap<u64, String>,
    /// Runs of a failing handler, by id.
    failing_runs: BTreeMap<u64, u32>,
    /// The highest attempt number a delivery carried.
    max_attempt: u32,
    /// Successful handler runs of a message that had succeeded before (an ack the server
    /// lost with the kill: the message came back).
    repeated_successes: u64,
}

#[test]
fn a_pool_rides_through_server_kills_losing_and_repeating_nothing() {
    let kills: u32 = std::env::var("DEADLETTER_CHAOS_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30);
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    eprintln!("chaos seed {seed}, {kills} kills");
    let mut rng = Rng(seed);

    let mut server = common::OwnServer::start();
    let options = JetStreamOptions::new(common::unique_namespace("chaos"))
        .request_timeout(Duration::from_secs(2))
        .move_patience(Duration::from_secs(10));
    let js = JetStream::connect_with(&server.url(), options).unwrap();
    let queue = js
        .queue_with(
            "jobs",
            QueueOptions::default()
                .max_attempts(MAX_ATTEMPTS)
                .visibility_timeout(LEASE),
        )
        .unwrap();

    let seen = Arc::new(Mutex::new(Seen::default()));
    let pool = {
        let seen = Arc::clone(&seen);
        WorkerPool::new(&queue)
            .workers(4)
            .retry(Retry::fixed(Duration::from_millis(20)).max_attempts(MAX_ATTEMPTS))
            .lease(LEASE)
            .start(move |m: &JetStreamMessage| {
                let text = m.text().unwrap_or_default().to_string();
                let mut s = seen.lock().unwrap();
                s.max_attempt = s.max_attempt.max(m.attempt());
                s.payloads.insert(m.id(), text.clone());
                let fails = text.starts_with("poison")
                    || text.starts_with("fail")
                    || (text.starts_with("flaky") && m.attempt() < 3);
                if fails {
                    *s.failing_runs.entry(m.id()).or_default() += 1;
                    drop(s);
                    return if text.starts_with("poison") {
                        Err(Failure::permanent("Poison", "cannot be handled"))
                    } else {
                        Err(Failure::transient("Timeout", "the service did not answer"))
                    };
                }
                if !s.succeeded.insert(m.id()) {
                    s.repeated_successes += 1;
                }
                Ok(())
            })
            .unwrap()
    };

    // The enqueuer: one message at a time, each retried under its key until acknowledged.
    let stop = Arc::new(AtomicBool::new(false));
    let enqueuer = {
        let queue = queue.clone();
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let mut acknowledged: BTreeMap<u64, u64> = BTreeMap::new(); // id -> i
            let mut retried = BTreeSet::new(); // i whose publish had to be sent again
            let mut i = 0u64;
            while !stop.load(Ordering::Acquire) {
                let options = EnqueueOptions::new().idempotency_key(format!("key-{i}"));
                // Retried under its key until acknowledged, even once told to stop: a
                // publish whose acknowledgement was lost may be stored.
                let id = loop {
                    match queue.enqueue_with(payload(i), &options) {
                        Ok(id) => break id,
                        Err(_) => {
                            retried.insert(i);
                            std::thread::sleep(Duration::from_millis(20));
                        }
                    }
                };
                if let Some(other) = acknowledged.insert(id, i) {
                    panic!("id {id} given to message {other} and to message {i}");
                }
                i += 1;
                std::thread::sleep(Duration::from_millis(2));
            }
            (acknowledged, retried)
        })
    };

    let started = Instant::now();
    for _ in 0..kills {
        std::thread::sleep(rng.millis(1_000, 3_000));
        server.kill();
        std::thread::sleep(rng.millis(50, 1_500));
        server.restart();
    }
    let chaos = started.elapsed();
    stop.store(true, Ordering::Release);
    let (acknowledged, retried) = enqueuer.join().unwrap();

    // Everything settles once the server stays up: the pool runs on (never restarted).
    let give_up = Instant::now() + Duration::from_secs(120);
    loop {
        match pool.run_until_idle() {
            Ok(()) => break,
            Err(e) => {
                assert!(
                    Instant::now() < give_up,
                    "never idle: {e}; {:?}",
                    queue.stats()
                );
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    }
    let report = pool.shutdown(Duration::from_secs(30)).unwrap();
    eprintln!(
        "{kills} kills in {chaos:?}: {} acknowledged enqueues, pool {:?}",
        acknowledged.len(),
        report.counters
    );

    let dlq = queue.dlq();
    let mut dead = BTreeMap::new();
    let mut page = Page::first(1_000);
    loop {
        let entries = dlq.list(&Filter::all(), page).unwrap();
        for e in &entries {
            assert!(
                dead.insert(e.id(), e.failure.error_kind.clone()).is_none(),
                "{} in the DLQ twice",
                e.id()
            );
            assert!(
                e.metadata.delivery_count <= MAX_ATTEMPTS,
                "{} reports {} deliveries",
                e.id(),
                e.metadata.delivery_count
            );
        }
        if entries.len() < 1_000 {
            break;
        }
        page = Page::after(entries.last().unwrap().id(), 1_000);
    }

    let seen = seen.lock().unwrap();
    let mut lost = Vec::new();
    for (&id, &i) in &acknowledged {
        let ok = seen.succeeded.contains(&id);
        let in_dlq = dead.contains_key(&id);
        assert!(
            !(ok && in_dlq),
            "message {i} (id {id}) both acknowledged and in the DLQ"
        );
        if !ok && !in_dlq {
            lost.push(i);
        }
        let expected_dlq = matches!(i % 20, 7 | 13);
        assert_eq!(
            in_dlq, expected_dlq,
            "message {i} (id {id}): in the DLQ {in_dlq}"
        );
    }
    assert!(
        lost.is_empty(),
        "acknowledged messages never settled: {lost:?}"
    );
    // Nothing settled that was not acknowledged, except a second copy of an enqueue
    // whose acknowledgement the kill took: the client sent it again under its key, and
    // the server had forgotten the key (a work-queue stream rebuilds its deduplication
    // window at a restart from the messages it still holds, so a first copy already
    // consumed and removed before the kill is not among them). Such a copy is a message
    // of its own, with an id of its own, handled once: a duplicate of the payload, never
    // a loss, and never an id given twice.
    let mut copies = 0;
    for id in seen.succeeded.iter().chain(dead.keys()) {
        if acknowledged.contains_key(id) {
            continue;
        }
        let text = seen.payloads.get(id).cloned().unwrap_or_default();
        let i: u64 = text
            .rsplit('-')
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or(u64::MAX);
        assert!(
            retried.contains(&i) && acknowledged.values().any(|&a| a == i),
            "id {id} ({text:?}) settled but never acknowledged, and not a resent enqueue"
        );
        copies += 1;
    }
    // Known gap, measured here and not hidden: after a restart the server can hand out a
    // delivery that a worker still holds (it forgot the delivery was pending), and two
    // workers that fail it at once both write the same next history record, so one
    // failure goes uncounted and the message runs once more. Never more than once more.
    let over: Vec<(&u64, &u32)> = seen
        .failing_runs
        .iter()
        .filter(|(_, runs)| **runs > MAX_ATTEMPTS)
        .collect();
    for (id, runs) in &over {
        assert!(
            **runs <= MAX_ATTEMPTS + 1,
            "the failing handler of {id} ran {runs} times (max_attempts {MAX_ATTEMPTS})"
        );
    }
    eprintln!(
        "{} of {} failing messages ran one attempt past max_attempts",
        over.len(),
        seen.failing_runs.len()
    );
    assert!(
        seen.max_attempt <= MAX_ATTEMPTS,
        "attempt {}",
        seen.max_attempt
    );

    let stats = queue.stats().unwrap();
    assert_eq!(stats.counts.ready + stats.counts.in_flight, 0, "{stats:?}");
    // Every stored message is an acknowledged enqueue or a resent copy of one.
    assert_eq!(
        stats.counts.enqueued,
        (acknowledged.len() + copies) as u64,
        "{stats:?}"
    );
    assert_eq!(stats.counts.dead_lettered, dead.len() as u64, "{stats:?}");
    assert_eq!(stats.dlq_size, dead.len() as u64, "{stats:?}");
    assert_eq!(stats.counts.acked, seen.succeeded.len() as u64, "{stats:?}");
    eprintln!(
        "settled: {} acknowledged, {} dead-lettered, {} successes repeated after a lost ack, \
         {copies} resent enqueues stored twice",
        seen.succeeded.len(),
        dead.len(),
        seen.repeated_successes
    );
    js.delete_namespace().unwrap();
}
