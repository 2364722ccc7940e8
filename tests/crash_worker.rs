//! A poison message whose handler kills the process (abort) must not crash-loop it: each
//! delivery is counted in the log before the handler runs, so after `max_attempts` restarts
//! the message goes to the DLQ with a reason saying the consumer died, and every other
//! message is processed.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use common::crash::{self, ChildSpec};
use deadletter::{Config, Message, Retry, Store, WorkerPool};

const MESSAGES: usize = 60;
const POISON_AT: usize = 17;
const MAX_ATTEMPTS: u32 = 3;

fn pool_retry() -> Retry {
    Retry::fixed(Duration::from_millis(1)).max_attempts(MAX_ATTEMPTS)
}

/// The child: drains the queue with 2 workers; the handler aborts on the poison message
/// and prints `DONE <id>` for every other one before returning (the ack comes after).
#[test]
fn child_worker_process() {
    let Some(params) = crash::child("child_worker_process") else {
        return;
    };
    let store = Store::open(params.path("dir"), Config::default()).expect("child opens the store");
    let queue = store.queue("jobs").expect("queue");
    let pool = WorkerPool::new(&queue)
        .workers(2)
        .retry(pool_retry())
        .start(|m: &Message| {
            if m.text() == Some("poison") {
                std::process::abort();
            }
            std::thread::sleep(Duration::from_millis(2));
            crash::say(format_args!("DONE {}", m.id()));
            Ok(())
        })
        .expect("pool");
    pool.run_until_idle().expect("drain");
    pool.shutdown(Duration::from_secs(5)).expect("shutdown");
    crash::say("IDLE");
}

#[test]
fn poison_that_kills_the_process_ends_in_the_dlq_after_max_attempts_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let mut ids = Vec::new();
    {
        let store = Store::open(dir.path(), Config::default()).unwrap();
        let q = store.queue("jobs").unwrap();
        for i in 0..MESSAGES {
            let payload = if i == POISON_AT {
                "poison".to_string()
            } else {
                format!("job-{i}")
            };
            ids.push(q.enqueue(payload).unwrap());
        }
        store.close().unwrap();
    }
    let mut done: HashMap<u64, usize> = HashMap::new();
    let mut crashes = 0;
    let mut finished = false;
    for _run in 0..(MAX_ATTEMPTS as usize + 3) {
        let child = ChildSpec::new("child_worker_process")
            .param("dir", dir.path().display())
            .spawn(scratch.path());
        let (status, lines) = child.wait(Duration::from_secs(120));
        let mut idle = false;
        for line in lines {
            if let Some(id) = line.strip_prefix("DONE ") {
                *done.entry(id.parse().unwrap()).or_default() += 1;
            } else if line == "IDLE" {
                idle = true;
            }
        }
        if idle && status.success() {
            finished = true;
            break;
        }
        crashes += 1;
    }
    assert!(finished, "the queue never drained");
    assert_eq!(
        crashes, MAX_ATTEMPTS as usize,
        "one crash per allowed delivery of the poison"
    );

    let store = Store::open(dir.path(), Config::default()).unwrap();
    let q = store.queue("jobs").unwrap();
    let dlq = q.dlq();
    assert_eq!(dlq.len(), 1);
    let entry = dlq.get(ids[POISON_AT]).unwrap();
    assert_eq!(entry.failure.error_kind, "ConsumerDied");
    assert!(entry.failure.error_message.contains("died"));
    assert_eq!(entry.metadata.delivery_count, MAX_ATTEMPTS);
    assert_eq!(entry.payload, b"poison");
    for (i, id) in ids.iter().enumerate() {
        if i != POISON_AT {
            assert!(done.contains_key(id), "message {i} was never processed");
        }
    }
    let twice: Vec<_> = done.iter().filter(|(_, &n)| n > 1).collect();
    // Only a crash between a handler's return and its ack can repeat a message, and only
    // for the other worker's message at the moment of the abort: at most one per crash.
    assert!(twice.len() <= crashes, "too many repeats: {twice:?}");
    println!(
        "crashes: {crashes}; messages processed twice (crash between handler and ack): {}",
        twice.len()
    );
    assert_eq!(q.stats().ready, 0);
    assert_eq!(q.stats().acked, (MESSAGES - 1) as u64);
}
