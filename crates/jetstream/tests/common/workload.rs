//! The failing-pool workload of the kill tests (`chaos.rs`: one server SIGKILLed 30
//! times; `cluster.rs`: the stream leader of a three-node cluster SIGKILLed): a pool of 4
//! workers with succeeding, flaky, poison and always-failing handlers, an enqueuer that
//! keeps enqueueing with idempotency keys (each retried until the server acknowledges
//! it), and the checks once the servers stay up ([`settle_and_check`]):
//! - every acknowledged enqueue ended exactly one way: acknowledged after its handler
//!   succeeded, or in the DLQ exactly once (never both, never neither); nothing else
//!   settled but a second copy of an enqueue that was resent after the kill took its
//!   acknowledgement (see the comment at the check: the server's limit, counted);
//! - no id was given to two messages;
//! - no delivery reported an attempt past `max_attempts`, and no failing handler ran
//!   more than `max_attempts` times for one message but for a known gap (one run more,
//!   counted and printed: see the comment at the check);
//! - the pool never stopped (it rode through every kill on its own, and settles what
//!   was enqueued after the last one);
//! - the queue's stats match the messages.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use deadletter::pool::{Retry, RunningPool};
use deadletter::queue::{EnqueueOptions, QueueOptions};
use deadletter::{DeadLetterQueue, Delivery, Failure, Filter, MessageQueue, Page, WorkerPool};
use deadletter_jetstream::{JetStream, JetStreamMessage, JetStreamQueue};

pub const MAX_ATTEMPTS: u32 = 4;
pub const LEASE: Duration = Duration::from_secs(2);

/// A small xorshift generator: the kill times differ per run, and the seed is printed.
pub struct Rng(pub u64);

impl Rng {
    /// Seeded from the clock (never 0).
    pub fn from_clock() -> Rng {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
            | 1;
        Rng(seed)
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub fn millis(&mut self, low: u64, high: u64) -> Duration {
        Duration::from_millis(low + self.next() % (high - low + 1))
    }
}

pub fn payload(i: u64) -> String {
    match i % 20 {
        3 | 11 => format!("flaky-{i}"),
        7 => format!("poison-{i}"),
        13 => format!("fail-{i}"),
        _ => format!("ok-{i}"),
    }
}

/// What the handlers saw, by message id.
#[derive(Default)]
pub struct Seen {
    /// Ids whose handler succeeded (their ack follows).
    pub succeeded: BTreeSet<u64>,
    /// The payload of every id a handler saw.
    pub payloads: BTreeMap<u64, String>,
    /// Runs of a failing handler, by id.
    pub failing_runs: BTreeMap<u64, u32>,
    /// The highest attempt number a delivery carried.
    pub max_attempt: u32,
    /// Successful handler runs of a message that had succeeded before (an ack the server
    /// lost with the kill: the message came back).
    pub repeated_successes: u64,
}

/// The queue of the workload: `max_attempts` and lease as the pool's.
pub fn open_queue(js: &JetStream) -> JetStreamQueue {
    js.queue_with(
        "jobs",
        QueueOptions::default()
            .max_attempts(MAX_ATTEMPTS)
            .visibility_timeout(LEASE),
    )
    .unwrap()
}

/// The pool of 4 workers, recording what its handlers see in `seen`.
pub fn start_pool(queue: &JetStreamQueue, seen: &Arc<Mutex<Seen>>) -> RunningPool<JetStreamQueue> {
    let seen = Arc::clone(seen);
    WorkerPool::new(queue)
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
}

/// What the enqueuer ends with: the acknowledged enqueues (id -> i) and the i whose
/// publish had to be sent again.
pub type Enqueued = (BTreeMap<u64, u64>, BTreeSet<u64>);

/// The enqueuer: one message at a time, each retried under its key until acknowledged.
pub struct Enqueuer {
    stop: Arc<AtomicBool>,
    count: Arc<AtomicU64>,
    thread: JoinHandle<Enqueued>,
}

impl Enqueuer {
    pub fn start(queue: &JetStreamQueue) -> Enqueuer {
        let queue = queue.clone();
        let stop = Arc::new(AtomicBool::new(false));
        let count = Arc::new(AtomicU64::new(0));
        let thread = {
            let stop = Arc::clone(&stop);
            let count = Arc::clone(&count);
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
                    count.store(i, Ordering::Release);
                    std::thread::sleep(Duration::from_millis(2));
                }
                (acknowledged, retried)
            })
        };
        Enqueuer {
            stop,
            count,
            thread,
        }
    }

    /// Enqueues acknowledged so far.
    pub fn acknowledged(&self) -> u64 {
        self.count.load(Ordering::Acquire)
    }

    /// Stops after the enqueue under way is acknowledged.
    pub fn stop(self) -> Enqueued {
        self.stop.store(true, Ordering::Release);
        self.thread.join().unwrap()
    }
}

/// Lets the pool settle everything (the servers stay up now; the pool runs on, never
/// restarted), shuts it down, and checks the workload's outcome (the module's list).
pub fn settle_and_check(
    pool: RunningPool<JetStreamQueue>,
    queue: &JetStreamQueue,
    (acknowledged, retried): Enqueued,
    seen: &Mutex<Seen>,
) {
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
        "{} acknowledged enqueues, pool {:?}",
        acknowledged.len(),
        report.counters
    );

    let dlq = queue.dlq();
    let mut dead = BTreeMap::new();
    let mut page = Page::first(1_000);
    loop {
        let entries = dlq.list(&Filter::all(), page).unwrap();
        for e in &entries {
            let why = (e.failure.error_kind.clone(), e.metadata.delivery_count);
            assert!(
                dead.insert(e.id(), why).is_none(),
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
            "message {i} (id {id}) both acknowledged and in the DLQ ({:?}), its failing \
             handler ran {} times",
            dead.get(&id),
            seen.failing_runs.get(&id).copied().unwrap_or(0)
        );
        if !ok && !in_dlq {
            lost.push(i);
        }
        let expected_dlq = matches!(i % 20, 7 | 13);
        assert_eq!(
            in_dlq,
            expected_dlq,
            "message {i} (id {id}): in the DLQ {in_dlq} ({:?}), its failing handler ran {} times",
            dead.get(&id),
            seen.failing_runs.get(&id).copied().unwrap_or(0)
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
}
