//! A poison message whose handler kills the process (abort) must not crash-loop it: each
//! delivery is counted in the log before the handler runs, so after `max_attempts` restarts
//! the message goes to the DLQ with a reason saying the consumer died, and every other
//! message is processed.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use common::crash::{self, ChildSpec};
use deadletter::pool::Retry;
use deadletter::{Config, Message, Store, WorkerPool};

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
    assert_eq!(q.stats().counts.ready, 0);
    assert_eq!(q.stats().counts.acked, (MESSAGES - 1) as u64);
}

const BATCH_MESSAGES: usize = 400;
const BATCH_POISON_AT: usize = 300;

/// The child of the batch test: one worker with a quick handler, so its reservations grow
/// to many messages, and one attempt per message. On the poison, before aborting, it prints
/// how many messages of the queue are in flight: with one handler running, every other one
/// is reserved and not started.
#[test]
fn child_batch_worker_process() {
    let Some(params) = crash::child("child_batch_worker_process") else {
        return;
    };
    let store = Store::open(params.path("dir"), Config::default()).expect("child opens the store");
    let queue = store.queue("jobs").expect("queue");
    let seen = queue.clone();
    let pool = WorkerPool::new(&queue)
        .workers(1)
        .retry(Retry::fixed(Duration::from_millis(1)).max_attempts(1))
        .start(move |m: &Message| {
            if m.text() == Some("poison") {
                crash::say(format_args!("IN_FLIGHT {}", seen.stats().counts.in_flight));
                std::process::abort();
            }
            crash::say(format_args!("DONE {}", m.id()));
            Ok(())
        })
        .expect("pool");
    pool.run_until_idle().expect("drain");
    pool.shutdown(Duration::from_secs(5)).expect("shutdown");
    crash::say("IDLE");
}

/// The pool reserves messages in batches, each delivery counted in the log before any of the
/// batch's handlers runs; the messages reserved with the poison but not started when it
/// kills the process are not blamed: with one attempt allowed, had their reservation counted,
/// the restart would have sent them to the DLQ as `ConsumerDied` along with the poison.
#[test]
fn messages_reserved_with_the_poison_but_not_started_are_not_blamed() {
    let dir = tempfile::tempdir().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let ids = {
        let store = Store::open(dir.path(), Config::default()).unwrap();
        let q = store.queue("jobs").unwrap();
        let payloads: Vec<String> = (0..BATCH_MESSAGES)
            .map(|i| match i {
                BATCH_POISON_AT => "poison".to_string(),
                _ => format!("job-{i}"),
            })
            .collect();
        let ids = q.enqueue_batch(&payloads).unwrap();
        store.close().unwrap();
        ids
    };
    let mut done: HashMap<u64, usize> = HashMap::new();
    let mut in_flight_at_crash = Vec::new();
    let mut crashes = 0;
    let mut finished = false;
    for _run in 0..4 {
        let child = ChildSpec::new("child_batch_worker_process")
            .param("dir", dir.path().display())
            .spawn(scratch.path());
        let (status, lines) = child.wait(Duration::from_secs(120));
        let mut idle = false;
        for line in lines {
            if let Some(id) = line.strip_prefix("DONE ") {
                *done.entry(id.parse().unwrap()).or_default() += 1;
            } else if let Some(n) = line.strip_prefix("IN_FLIGHT ") {
                in_flight_at_crash.push(n.parse::<u64>().unwrap());
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
    assert_eq!(crashes, 1, "one crash: the poison's only allowed delivery");
    assert_eq!(in_flight_at_crash.len(), 1);
    assert!(
        in_flight_at_crash[0] > 1,
        "the poison was not in a batch with unstarted messages: {in_flight_at_crash:?}"
    );

    let store = Store::open(dir.path(), Config::default()).unwrap();
    let q = store.queue("jobs").unwrap();
    let dlq = q.dlq();
    let entry = dlq.get(ids[BATCH_POISON_AT]).unwrap();
    assert_eq!(entry.failure.error_kind, "ConsumerDied");
    assert_eq!(entry.metadata.delivery_count, 1);
    assert_eq!(dlq.len(), 1, "only the poison is blamed");
    for (i, id) in ids.iter().enumerate() {
        if i != BATCH_POISON_AT {
            assert!(done.contains_key(id), "message {i} was never processed");
        }
    }
    // A start record carries the acks of the messages handled before it, so a crash repeats
    // none of them.
    let twice: Vec<_> = done.iter().filter(|(_, &n)| n > 1).collect();
    assert!(twice.is_empty(), "repeated: {twice:?}");
    assert_eq!(q.stats().counts.ready, 0);
    assert_eq!(q.stats().counts.acked, (BATCH_MESSAGES - 1) as u64);
    println!(
        "messages in flight when the poison killed the process: {}",
        in_flight_at_crash[0]
    );
}
