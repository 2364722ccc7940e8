//! The async worker pool in a child process killed with SIGKILL: every enqueue whose
//! future completed (acknowledged) is still there after the kill, handled or waiting,
//! nothing is invented and nothing dead-lettered; and a poison message whose async handler
//! kills the process ends in the DLQ after `max_attempts` restarts (its deliveries were
//! counted before the handler ran), while every other message is handled.

mod common;

use std::collections::HashSet;
use std::time::Duration;

use common::crash::{self, ChildSpec};
use deadletter::async_api::{AsyncQueue, AsyncWorkerPool};
use deadletter::pool::Retry;
use deadletter::{Config, Message, Store};

const MAX_ATTEMPTS: u32 = 3;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .expect("runtime")
}

/// The child: 8 producer tasks enqueue durably through the async API and print `ENQ <id>`
/// once each enqueue's future completed, while an async pool of 8 handles the queue
/// (printing `HANDLED <id>` before each success) until the process is killed. A message
/// `poison` aborts the process in its handler. With `drain=1` it runs the pool until the
/// queue is idle instead, then prints `IDLE`.
#[test]
fn child_async_pool_process() {
    let Some(params) = crash::child("child_async_pool_process") else {
        return;
    };
    let store = Store::open(params.path("dir"), Config::default()).expect("child opens the store");
    let queue = store.queue("jobs").expect("queue");
    let drain: u32 = params.get("drain");
    runtime().block_on(async {
        let pool = AsyncWorkerPool::new(&queue)
            .concurrency(8)
            .retry(Retry::fixed(Duration::from_millis(1)).max_attempts(MAX_ATTEMPTS));
        let handler = |m: Message| async move {
            if m.text() == Some("poison") {
                std::process::abort();
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
            crash::say(format_args!("HANDLED {}", m.id()));
            Ok(())
        };
        if drain == 1 {
            pool.run_until_idle(handler).await.expect("drain");
            crash::say("IDLE");
            return;
        }
        for t in 0..8 {
            let q = AsyncQueue::new(&queue);
            tokio::spawn(async move {
                for i in 0.. {
                    let id = q.enqueue(format!("p{t}-{i}")).await.expect("enqueue");
                    crash::say(format_args!("ENQ {id}"));
                }
            });
        }
        pool.run(handler, std::future::pending())
            .await
            .expect("pool");
    });
}

fn ids_after(lines: &[String], prefix: &str) -> Vec<u64> {
    lines
        .iter()
        .filter_map(|l| l.strip_prefix(prefix))
        .map(|id| id.parse().expect("an id"))
        .collect()
}

#[test]
fn sigkill_of_an_async_pool_loses_no_acknowledged_enqueue() {
    let dir = tempfile::tempdir().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let mut enqueued = HashSet::new();
    let mut handled = HashSet::new();
    for round in 0..3 {
        let mut child = ChildSpec::new("child_async_pool_process")
            .param("dir", dir.path().display())
            .param("drain", 0)
            .spawn(scratch.path());
        let count = std::cell::Cell::new(0usize);
        let mut lines = child.wait_for(
            |l| {
                if l.starts_with("ENQ ") {
                    count.set(count.get() + 1);
                }
                count.get() >= 300
            },
            Duration::from_secs(120),
        );
        lines.extend(child.kill());
        let new = ids_after(&lines, "ENQ ");
        assert!(!new.is_empty(), "round {round}: nothing enqueued");
        enqueued.extend(new);
        handled.extend(ids_after(&lines, "HANDLED "));

        let store = Store::open(dir.path(), Config::default()).unwrap();
        let q = store.queue("jobs").unwrap();
        assert_eq!(q.dlq().len(), 0, "nothing was to fail");
        // Waiting: ready again after the reopen (a suspect, in flight at the kill, too).
        let waiting = |id: u64| {
            let state = store.history(id).map(|h| h.state);
            matches!(state, Ok(deadletter::audit::MessageState::Queued { .. }))
        };
        let mut left = 0;
        for &id in &enqueued {
            let queued = waiting(id);
            left += usize::from(queued);
            assert!(
                queued || handled.contains(&id),
                "round {round}: acknowledged enqueue {id} neither handled nor in the queue"
            );
        }
        let stats = q.stats().counts;
        println!(
            "round {round}: {} acknowledged enqueues so far, {} handled, {} waiting, {} acked",
            enqueued.len(),
            handled.len(),
            left,
            stats.acked
        );
        store.close().unwrap();
    }
    // A last run drains the queue: every acknowledged enqueue ends handled.
    let child = ChildSpec::new("child_async_pool_process")
        .param("dir", dir.path().display())
        .param("drain", 1)
        .spawn(scratch.path());
    let (status, lines) = child.wait(Duration::from_secs(120));
    assert!(status.success(), "the draining run failed");
    assert!(lines.iter().any(|l| l == "IDLE"));
    handled.extend(ids_after(&lines, "HANDLED "));
    let missing: Vec<_> = enqueued.difference(&handled).collect();
    assert!(missing.is_empty(), "never handled: {missing:?}");
    let store = Store::open(dir.path(), Config::default()).unwrap();
    assert!(store.queue("jobs").unwrap().is_empty());
}

#[test]
fn a_poison_that_kills_the_async_pool_ends_in_the_dlq_after_max_attempts_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let ids = {
        let store = Store::open(dir.path(), Config::default()).unwrap();
        let q = store.queue("jobs").unwrap();
        let payloads: Vec<String> = (0..40)
            .map(|i| {
                if i == 13 {
                    "poison".into()
                } else {
                    format!("job-{i}")
                }
            })
            .collect();
        let ids = q.enqueue_batch(&payloads).unwrap();
        store.close().unwrap();
        ids
    };
    let mut handled = HashSet::new();
    let mut crashes = 0;
    let mut finished = false;
    for _ in 0..(MAX_ATTEMPTS + 3) {
        let child = ChildSpec::new("child_async_pool_process")
            .param("dir", dir.path().display())
            .param("drain", 1)
            .spawn(scratch.path());
        let (status, lines) = child.wait(Duration::from_secs(120));
        handled.extend(ids_after(&lines, "HANDLED "));
        if status.success() && lines.iter().any(|l| l == "IDLE") {
            finished = true;
            break;
        }
        crashes += 1;
    }
    assert!(finished, "the queue never drained");
    assert_eq!(
        crashes, MAX_ATTEMPTS,
        "one crash per allowed delivery of the poison"
    );
    let store = Store::open(dir.path(), Config::default()).unwrap();
    let q = store.queue("jobs").unwrap();
    let dlq = q.dlq();
    assert_eq!(dlq.len(), 1);
    let entry = dlq.get(ids[13]).unwrap();
    assert_eq!(entry.failure.error_kind, "ConsumerDied");
    assert_eq!(entry.metadata.delivery_count, MAX_ATTEMPTS);
    for (i, id) in ids.iter().enumerate() {
        if i != 13 {
            assert!(handled.contains(id), "message {i} was never handled");
        }
    }
    assert!(q.is_empty());
}
