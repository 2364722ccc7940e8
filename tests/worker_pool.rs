//! The worker pool with real threads: poison messages, classification, panics, slow
//! handlers and graceful shutdown.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use deadletter::pool::Retry;
use deadletter::{Config, Failure, Message, Store, WorkerPool};

fn store() -> (tempfile::TempDir, Store) {
    common::temp_store(Config::fast())
}

#[test]
fn a_poison_message_never_delays_a_later_one_by_more_than_one_call() {
    let (_dir, store) = store();
    let q = store.queue("jobs").unwrap();
    q.enqueue("poison").unwrap();
    for i in 0..50 {
        q.enqueue(format!("good-{i}")).unwrap();
    }
    let calls = Arc::new(Mutex::new(Vec::<String>::new()));
    let seen = Arc::clone(&calls);
    let pool = WorkerPool::new(&q)
        .workers(1)
        .retry(
            Retry::fixed(Duration::from_millis(30))
                .no_jitter()
                .max_attempts(4),
        )
        .start(move |m: &Message| {
            let text = m.text().unwrap().to_string();
            seen.lock().unwrap().push(text.clone());
            if text == "poison" {
                Err(Failure::transient("Poison", "always fails"))
            } else {
                Ok(())
            }
        })
        .unwrap();
    pool.run_until_idle().unwrap();
    let counters = pool.shutdown(Duration::from_secs(5)).unwrap().counters;
    let calls = calls.lock().unwrap().clone();
    for i in 0..50 {
        let first = calls
            .iter()
            .position(|c| *c == format!("good-{i}"))
            .unwrap();
        let poison_before = calls[..first].iter().filter(|c| *c == "poison").count();
        assert!(
            poison_before <= 1,
            "good-{i} waited behind {poison_before} poison calls"
        );
    }
    assert_eq!(calls.iter().filter(|c| *c == "poison").count(), 4);
    assert_eq!(counters.processed, 50);
    assert_eq!(counters.dead_lettered, 1);
    assert_eq!(q.dlq().len(), 1);
}

#[test]
fn permanent_failures_use_exactly_one_attempt() {
    let (_dir, store) = store();
    let q = store.queue("jobs").unwrap();
    let id = q.enqueue("bad").unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let c = Arc::clone(&calls);
    let pool = WorkerPool::new(&q)
        .retry(Retry::fixed(Duration::from_millis(1)).max_attempts(5))
        .start(move |_m: &Message| {
            c.fetch_add(1, Ordering::SeqCst);
            Err(Failure::permanent("ValidationError", "field missing")
                .with_context("field", "email"))
        })
        .unwrap();
    pool.run_until_idle().unwrap();
    drop(pool);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let entry = q.dlq().get(id).unwrap();
    assert_eq!(entry.metadata.delivery_count, 1);
    assert_eq!(entry.failure.attempts.len(), 1);
    assert_eq!(entry.failure.error_kind, "ValidationError");
    assert_eq!(entry.failure.context["field"], "email");
    assert_eq!(entry.dlq.worker.as_deref(), Some("worker-0"));
}

#[test]
fn transient_failures_use_exactly_max_attempts_and_record_each() {
    let (_dir, store) = store();
    let q = store.queue("jobs").unwrap();
    let id = q.enqueue("flaky").unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let c = Arc::clone(&calls);
    let pool = WorkerPool::new(&q)
        .workers(2)
        .retry(Retry::exponential(Duration::from_millis(2)).max_attempts(4))
        .start(move |m: &Message| {
            c.fetch_add(1, Ordering::SeqCst);
            Err(Failure::transient(
                "Timeout",
                format!("attempt {}", m.attempt()),
            ))
        })
        .unwrap();
    pool.run_until_idle().unwrap();
    let counters = pool.counters();
    drop(pool);
    assert_eq!(calls.load(Ordering::SeqCst), 4);
    assert_eq!(counters.retried, 3);
    assert_eq!(counters.dead_lettered, 1);
    let entry = q.dlq().get(id).unwrap();
    assert_eq!(entry.metadata.delivery_count, 4);
    let numbers: Vec<u32> = entry.failure.attempts.iter().map(|a| a.number).collect();
    assert_eq!(numbers, vec![1, 2, 3, 4]);
    let messages: Vec<&str> = entry
        .failure
        .attempts
        .iter()
        .map(|a| a.error_message.as_str())
        .collect();
    assert_eq!(
        messages,
        vec!["attempt 1", "attempt 2", "attempt 3", "attempt 4"]
    );
    assert!(entry
        .failure
        .attempts
        .windows(2)
        .all(|w| w[0].at_ms <= w[1].at_ms));
}

#[test]
fn a_panicking_handler_does_not_kill_the_pool() {
    let (_dir, store) = store();
    let q = store.queue("jobs").unwrap();
    let bomb = q.enqueue("bomb").unwrap();
    for i in 0..20 {
        q.enqueue(format!("ok-{i}")).unwrap();
    }
    let pool = WorkerPool::new(&q)
        .workers(3)
        .retry(Retry::fixed(Duration::from_millis(1)).max_attempts(3))
        .start(|m: &Message| {
            if m.text() == Some("bomb") {
                panic!("boom in the handler");
            }
            Ok(())
        })
        .unwrap();
    pool.run_until_idle().unwrap();
    let counters = pool.shutdown(Duration::from_secs(5)).unwrap().counters;
    assert_eq!(counters.processed, 20);
    assert_eq!(counters.panics, 3);
    let entry = q.dlq().get(bomb).unwrap();
    assert_eq!(entry.failure.error_kind, "Panic");
    assert!(entry.failure.error_message.contains("boom in the handler"));
    assert_eq!(entry.metadata.delivery_count, 3);
}

#[test]
fn a_handler_running_past_its_lease_is_not_redelivered() {
    let (_dir, store) = store();
    let q = store.queue("jobs").unwrap();
    q.enqueue("slow").unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let c = Arc::clone(&calls);
    let pool = WorkerPool::new(&q)
        .workers(2)
        // The heartbeat extends at half the lease: 200 ms of slack for its wake-up and the
        // extension's write (a 60 ms lease lost it 2 times in 30 on a loaded machine).
        .lease(Duration::from_millis(400))
        .start(move |_m: &Message| {
            c.fetch_add(1, Ordering::SeqCst);
            // Three and a half leases.
            std::thread::sleep(Duration::from_millis(1_400));
            Ok(())
        })
        .unwrap();
    pool.run_until_idle().unwrap();
    let counters = pool.shutdown(Duration::from_secs(5)).unwrap().counters;
    assert_eq!(
        calls.load(Ordering::SeqCst),
        1,
        "the slow message was redelivered"
    );
    assert_eq!(counters.processed, 1);
    assert_eq!(counters.lost_leases, 0);
    assert!(q.dlq().is_empty());
}

#[test]
fn shutdown_loses_nothing_in_flight() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), Config::default()).unwrap();
    let q = store.queue("jobs").unwrap();
    for i in 0..40 {
        q.enqueue(format!("m-{i}")).unwrap();
    }
    let started = Arc::new(AtomicUsize::new(0));
    let s = Arc::clone(&started);
    let pool = WorkerPool::new(&q)
        .workers(2)
        .start(move |_m: &Message| {
            s.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(20));
            Ok(())
        })
        .unwrap();
    while started.load(Ordering::SeqCst) < 5 {
        std::thread::sleep(Duration::from_millis(5));
    }
    let report = pool.shutdown(Duration::from_secs(10)).unwrap();
    assert!(report.drained);
    let handled = started.load(Ordering::SeqCst) as u64;
    assert_eq!(
        report.counters.processed, handled,
        "a started handler was not acked"
    );
    assert_eq!(report.counters.in_flight, 0);
    let stats = q.stats();
    assert_eq!(stats.counts.in_flight, 0);
    assert_eq!(stats.counts.ready + handled, 40);
    drop(q);
    store.close().unwrap();
    let store = Store::open(dir.path(), Config::default()).unwrap();
    let stats = store.queue("jobs").unwrap().stats();
    assert_eq!(stats.counts.ready + stats.counts.acked, 40);
    assert_eq!(stats.counts.acked, handled);
}

#[test]
fn typed_handlers_and_decode_failures() {
    let (_dir, store) = store();
    let q = store.queue("typed").unwrap();
    q.enqueue_typed(&(7u32, "seven".to_string())).unwrap();
    let garbage = q.enqueue([0xffu8; 3]).unwrap();
    let sum = Arc::new(AtomicUsize::new(0));
    let s = Arc::clone(&sum);
    let pool = WorkerPool::new(&q)
        .start_typed(move |(n, name): (u32, String), _m: &Message| {
            assert_eq!(name, "seven");
            s.fetch_add(n as usize, Ordering::SeqCst);
            Ok(())
        })
        .unwrap();
    pool.run_until_idle().unwrap();
    drop(pool);
    assert_eq!(sum.load(Ordering::SeqCst), 7);
    let entry = q.dlq().get(garbage).unwrap();
    assert_eq!(entry.failure.error_kind, "DecodeError");
    assert_eq!(entry.metadata.delivery_count, 1);
}

#[test]
fn the_dlq_alert_fires_through_the_pool() {
    let (_dir, store) = store();
    let q = store.queue("jobs").unwrap();
    let pool = WorkerPool::new(&q)
        .start(|_m: &Message| Err(Failure::permanent("Bad", "bad")))
        .unwrap();
    let alerts = Arc::new(Mutex::new(Vec::new()));
    let a = Arc::clone(&alerts);
    pool.on_dlq_alert(2, move |alert| {
        a.lock().unwrap().push((alert.size, alert.above))
    })
    .unwrap();
    for i in 0..3 {
        q.enqueue(format!("bad-{i}")).unwrap();
    }
    pool.run_until_idle().unwrap();
    drop(pool);
    assert_eq!(alerts.lock().unwrap().first(), Some(&(2, true)));
    let dlq = q.dlq();
    for id in dlq.ids(&deadletter::Filter::all(), None).unwrap() {
        dlq.delete(id).unwrap();
    }
    assert_eq!(alerts.lock().unwrap().last(), Some(&(1, false)));
}

/// `?` on a payload that does not decode dead-letters it at the first attempt; a classifier
/// rule makes a converted error type permanent; an unknown error type stays transient.
#[test]
fn decode_errors_and_classified_errors_skip_retries() {
    use deadletter::pool::Classifier;
    use deadletter::Page;
    let (_dir, store) = store();
    let q = store.queue("typed").unwrap();
    q.enqueue_typed(&7u64).unwrap();
    q.enqueue(vec![253u8]).unwrap(); // a u64 marker with no bytes behind it
    q.enqueue("parse-me").unwrap();
    q.enqueue("io").unwrap();
    let pool = WorkerPool::new(&q)
        .retry(Retry::fixed(Duration::from_millis(1)).max_attempts(3))
        .classify(Classifier::new().permanent::<std::num::ParseIntError>())
        .start(|m: &Message| {
            match m.text() {
                Some("parse-me") => {
                    "x".parse::<u32>()?;
                }
                Some("io") => {
                    Err(std::io::Error::other("disk busy"))?;
                }
                _ => {
                    let n: u64 = m.decode()?;
                    assert_eq!(n, 7);
                }
            }
            Ok(())
        })
        .unwrap();
    pool.run_until_idle().unwrap();
    drop(pool);
    let dlq = q.dlq();
    let entries = dlq
        .list(&deadletter::Filter::all(), Page::first(10))
        .unwrap();
    let attempts = |kind: &str| {
        let e = entries
            .iter()
            .find(|e| e.failure.error_kind == kind)
            .unwrap_or_else(|| panic!("no {kind} entry in {entries:?}"));
        e.failure.attempts.len()
    };
    assert_eq!(entries.len(), 3);
    assert_eq!(attempts(deadletter::pool::DECODE_ERROR_KIND), 1);
    assert_eq!(attempts("ParseIntError"), 1);
    assert_eq!(attempts("Error"), 3); // std::io::Error: unknown, transient
}
