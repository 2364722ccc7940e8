//! The async handles on one current-thread tokio runtime: publishes in flight leave the
//! runtime's one thread free for other tasks (a `block_on` inside would panic on it, a
//! blocking wait would starve the timer), and a message's whole life (enqueue, waiting
//! lease, retry, dead-letter, the DLQ's list, stats and replay, ack) runs as futures on it.

mod common;

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use deadletter::async_api::{AsyncDeadLetterQueue, AsyncMessageQueue};
use deadletter::queue::FailureReport;
use deadletter::{Delivery, Failure, Filter, Page, ReplayOptions};

fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a current-thread runtime")
}

#[test]
fn publishes_in_flight_leave_the_runtime_thread_free() {
    const N: u64 = 200;
    let js = common::fresh_namespace(&common::server_url());
    let q = js.queue("jobs").unwrap().asynchronous();
    let submitted = Rc::new(Cell::new(0u64));
    let completed = Rc::new(Cell::new(0u64));
    let (seen_in_flight, ticks) = current_thread().block_on(async {
        let local = tokio::task::LocalSet::new();
        local
            .run_until(async {
                for i in 0..N {
                    let (q, submitted, completed) =
                        (q.clone(), Rc::clone(&submitted), Rc::clone(&completed));
                    tokio::task::spawn_local(async move {
                        submitted.set(submitted.get() + 1);
                        q.enqueue(format!("job-{i}").as_bytes()).await.unwrap();
                        completed.set(completed.get() + 1);
                    });
                }
                let (s, c) = (Rc::clone(&submitted), Rc::clone(&completed));
                let watcher = tokio::task::spawn_local(async move {
                    let (mut seen, mut ticks) = (0u64, 0u64);
                    while c.get() < N {
                        if s.get() > c.get() {
                            seen += 1;
                        }
                        tokio::time::sleep(Duration::from_micros(200)).await;
                        ticks += 1;
                    }
                    (seen, ticks)
                });
                watcher.await.unwrap()
            })
            .await
    });
    println!("timer served {ticks} times, {seen_in_flight} of them with publishes in flight");
    assert_eq!(completed.get(), N);
    assert!(
        seen_in_flight > 0,
        "the runtime never ran another task while publishes awaited the server"
    );
    let stats = current_thread().block_on(q.stats()).unwrap();
    assert_eq!(stats.counts.ready + stats.counts.in_flight, N);
    js.delete_namespace().unwrap();
}

#[test]
fn a_message_lives_its_whole_life_as_futures_on_one_thread() {
    let js = common::fresh_namespace(&common::server_url());
    let options = deadletter_conformance::options(2, 2_000);
    let q = js.queue_with("orders", options).unwrap().asynchronous();
    current_thread().block_on(async {
        let id = q.enqueue(br#"{"orderId":"ord-1"}"#).await.unwrap();
        let wait = Duration::from_secs(5);
        let first = q.lease_wait(1, wait).await.unwrap();
        assert_eq!((first[0].id(), first[0].attempt()), (id, 1));
        let timeout = Failure::transient("Timeout", "upstream timed out");
        let report = FailureReport::new(&timeout);
        let retry_at = deadletter::MessageQueue::now_ms(q.blocking());
        q.retry(&first[0], &report, retry_at).await.unwrap();
        let second = q.lease_wait(1, wait).await.unwrap();
        assert_eq!((second[0].id(), second[0].attempt()), (id, 2));
        let invalid = Failure::permanent("ValidationError", "orderId must be upper case");
        q.dead_letter(&second[0], &FailureReport::new(&invalid))
            .await
            .unwrap();

        let dlq = q.dlq();
        let entries = dlq.list(&Filter::all(), Page::first(10)).await.unwrap();
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].failure.error_kind, "ValidationError");
        assert_eq!(dlq.get(id).await.unwrap().id(), id);
        assert_eq!(dlq.stats().await.unwrap().pending, 1);
        dlq.replay_corrected(id, br#"{"orderId":"ORD-1"}"#, &ReplayOptions::to_origin())
            .await
            .unwrap();
        assert_eq!(dlq.stats().await.unwrap().pending, 0);

        let replayed = q.lease_wait(1, wait).await.unwrap();
        assert_eq!(replayed[0].payload(), br#"{"orderId":"ORD-1"}"#);
        q.ack(&replayed[0]).await.unwrap();
        let stats = q.stats().await.unwrap();
        assert_eq!(stats.counts.ready + stats.counts.in_flight, 0);
    });
    js.delete_namespace().unwrap();
}
