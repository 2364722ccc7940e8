//! The worker pool's failure reports under `Durability::Always`, on a simulated disk whose
//! power cuts lose every write no fsync covered.
//!
//! The pool writes its failure reports without waiting for an fsync (its next reservation,
//! its final acks or an explicit sync makes them durable), so these tests cut the power at
//! the moments the pool promises durability:
//! - right after `run_until_idle` returns (the pool still running), on a copy of the disk;
//! - after `shutdown`, on the disk itself, the store dropped as a crash would.
//!
//! Reopened, the store must hold every outcome the pool reported: each dead-lettered
//! message in the DLQ with every attempt recorded, nothing left in the queue. And at the
//! level of one report: a deferred report is visible at once, lost by a power cut before
//! anything covers it (the message is then delivered again, never lost), and durable once
//! `make_durable` returns.

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use deadletter::backend::WorkerQueue;
use deadletter::pool::Retry;
use deadletter::queue::FailureReport;
use deadletter::sim::{PowerCutOptions, SimDisk, SimRng, StoreHooks, Vfs};
use deadletter::store::Durability;
use deadletter::{Failure, Filter, Message, MessageQueue, Store, WorkerPool};

const ROOT: &str = "/store";
const MESSAGES: usize = 60;
const MAX_ATTEMPTS: u32 = 2;

fn disk() -> SimDisk {
    let disk = SimDisk::new();
    disk.create_dir_all(Path::new(ROOT)).unwrap();
    disk.sync_dir(Path::new("/")).unwrap();
    disk
}

fn open(disk: &SimDisk) -> Store {
    // Small segments: a copy of the disk and a power cut copy every segment's bytes.
    let config = common::config()
        .durability(Durability::Always)
        .segment_size(256 << 10)
        .max_message_size(1024)
        .vfs(Arc::new(disk.clone()));
    Store::open(ROOT, config).expect("open the store")
}

/// A power cut that loses every change no fsync made durable.
fn lose_everything_unsynced(disk: &SimDisk) {
    let nothing = PowerCutOptions {
        keep: 0.0,
        garble: 0.0,
        tear: 0.0,
        keep_len: 0.0,
        keep_dir_op: 0.0,
    };
    disk.power_cut_with(&mut SimRng::new(1), &nothing);
}

/// Message `i`: every third one succeeds, every third fails permanently, the others fail
/// transiently every time (so they go to the DLQ on their last attempt). The last ones
/// fail, so the pool's last outcomes are failure reports.
fn payload(i: usize) -> String {
    let kind = match i % 3 {
        0 if i + 3 < MESSAGES => "ok",
        0 | 1 => "bad",
        _ => "flaky",
    };
    format!("{kind}-{i}")
}

fn handle(m: &Message) -> Result<(), Failure> {
    match m.text().unwrap_or_default().split('-').next() {
        Some("ok") => Ok(()),
        Some("bad") => Err(Failure::permanent("Invalid", "bad input")),
        _ => Err(Failure::transient("Timeout", "try again")),
    }
}

/// The store on `disk`, reopened after a power cut, holds every outcome of the run.
fn check_outcomes(disk: &SimDisk, label: &str) {
    let store = open(disk);
    let queue = store.queue("jobs").unwrap();
    let stats = queue.stats();
    let failing: Vec<String> = (0..MESSAGES)
        .map(payload)
        .filter(|p| !p.starts_with("ok"))
        .collect();
    assert_eq!(
        (stats.counts.ready, stats.counts.in_flight),
        (0, 0),
        "{label}: an outcome was lost"
    );
    assert_eq!(stats.dlq_size, failing.len() as u64, "{label}");
    let dlq = queue.dlq();
    let mut found = Vec::new();
    for id in dlq.ids(&Filter::all(), None).unwrap() {
        let entry = dlq.get(id).unwrap();
        let text = String::from_utf8(entry.payload.clone()).unwrap();
        let attempts = if text.starts_with("flaky") {
            MAX_ATTEMPTS as usize
        } else {
            1
        };
        assert_eq!(
            entry.failure.attempts.len(),
            attempts,
            "{label}: the attempts of {text}"
        );
        found.push(text);
    }
    found.sort();
    let mut expected = failing;
    expected.sort();
    assert_eq!(found, expected, "{label}");
    drop(queue);
    store.close().unwrap();
}

#[test]
fn every_failure_the_pool_reported_survives_a_power_cut_once_it_says_so() {
    for workers in [1, 4] {
        let disk = disk();
        let store = open(&disk);
        let queue = store.queue("jobs").unwrap();
        let payloads: Vec<String> = (0..MESSAGES).map(payload).collect();
        queue.enqueue_batch(&payloads).unwrap();
        let pool = WorkerPool::new(&queue)
            .workers(workers)
            .retry(Retry::fixed(Duration::from_millis(1)).max_attempts(MAX_ATTEMPTS))
            .start(handle)
            .unwrap();
        pool.run_until_idle().unwrap();

        // Idle: a power cut now, the pool still running, keeps every outcome.
        let copy = disk.fork();
        lose_everything_unsynced(&copy);
        check_outcomes(&copy, &format!("{workers} workers, after run_until_idle"));

        // Stopped: likewise, the store dropped without a sync.
        let counters = pool.shutdown(Duration::from_secs(10)).unwrap().counters;
        let failing = payloads.iter().filter(|p| !p.starts_with("ok")).count();
        assert_eq!(counters.dead_lettered, failing as u64);
        drop(queue);
        store.abandon();
        lose_everything_unsynced(&disk);
        check_outcomes(&disk, &format!("{workers} workers, after shutdown"));
    }
}

#[test]
fn a_deferred_report_is_written_at_once_and_durable_after_make_durable() {
    let disk = disk();
    let store = open(&disk);
    let queue = store.queue("jobs").unwrap();
    queue.enqueue("poison").unwrap();
    let msg = MessageQueue::lease(&queue, 1).unwrap().remove(0);
    let failure = Failure::permanent("Invalid", "bad input");
    let mark = queue
        .dead_letter_deferred(&msg, &FailureReport::new(&failure))
        .unwrap();
    assert!(!mark.is_durable(), "written, not fsynced");
    assert_eq!(queue.dlq().len(), 1, "visible at once");

    // Cut before anything covers it: the report is lost, the message is not: its lease
    // was durable, so the reopen delivers it again (its delivery counted).
    let early = disk.fork();
    lose_everything_unsynced(&early);
    {
        let reopened = open(&early);
        let q = reopened.queue("jobs").unwrap();
        assert_eq!((q.stats().counts.ready, q.dlq().len()), (1, 0));
        let again = q.lease(1).unwrap();
        assert_eq!(again.len(), 1);
        assert_eq!(again[0].text(), Some("poison"));
        assert_eq!(again[0].attempt(), 2);
    }

    queue.make_durable(mark).unwrap();
    let late = disk.fork();
    lose_everything_unsynced(&late);
    let reopened = open(&late);
    let q = reopened.queue("jobs").unwrap();
    assert_eq!(
        (
            q.stats().counts.ready,
            q.stats().counts.in_flight,
            q.dlq().len()
        ),
        (0, 0, 1)
    );
}

#[test]
fn without_waiting_for_fsyncs_a_deferred_report_has_nothing_to_wait_for() {
    let disk = disk();
    let config = common::config()
        .durability(Durability::Never)
        .vfs(Arc::new(disk.clone()));
    let store = Store::open(ROOT, config).unwrap();
    let queue = store.queue("jobs").unwrap();
    queue.enqueue("flaky").unwrap();
    let msg = MessageQueue::lease(&queue, 1).unwrap().remove(0);
    let failure = Failure::transient("Timeout", "try again");
    let (_, mark) = queue
        .retry_deferred(&msg, &FailureReport::new(&failure), 0)
        .unwrap();
    assert!(mark.is_durable());
}
