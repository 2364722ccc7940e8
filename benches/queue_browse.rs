//! Browsing a queue of 1,000,000 pending messages (100-byte payloads), 1,000 of them
//! retrying and 1,000 delayed: what an operator's `deadletter messages` costs, and that
//! it is paid by the listing, not by enqueue, lease or ack (which keep no bookkeeping for
//! it: the states are derived from the index).
//!
//! - `first_50`: the first page of every state (`Queue::messages`);
//! - `retrying_50`: the first page of the retrying messages, found among the million;
//! - `counts`: the messages per state (`Queue::message_counts`);
//! - `get`: one message by id (`Queue::message`).
//!
//! Each listing holds the index lock for one pass over the store's messages per chunk, so
//! its time is also how long it can hold up a writer. Run with
//! `cargo bench --bench queue_browse`; the store lives under
//! `target/bench-data/queue_browse` and is removed afterwards.

mod common;

use std::time::Duration;

use criterion::{black_box, Criterion};
use deadletter::queue::{EnqueueOptions, FailureReport, QueuedState};
use deadletter::store::CompactionOptions;
use deadletter::{Config, Failure, Filter, Page, Store};

const PENDING: usize = 1_000_000;
const RETRYING: usize = 1_000;
const DELAYED: usize = 1_000;

fn bench(c: &mut Criterion) {
    let dir = common::fresh_dir("queue_browse", "store");
    let config = Config::fast().compaction(CompactionOptions::default().interval(None));
    let store = Store::open(&dir, config).expect("open");
    let queue = store.queue("bench").expect("queue");
    let payload = vec![b'x'; 100];
    let failing: Vec<Vec<u8>> = (0..RETRYING).map(|_| payload.clone()).collect();
    queue.enqueue_batch(&failing).expect("enqueue");
    let timeout = Failure::transient("Timeout", "upstream took too long");
    let later = store.config().clock.now_ms() + 3_600_000;
    for m in queue.lease(RETRYING).expect("lease") {
        queue
            .retry(&m, &FailureReport::new(&timeout), later)
            .expect("retry");
    }
    let delay = EnqueueOptions::new().delay(Duration::from_secs(3600));
    for _ in 0..DELAYED {
        queue
            .enqueue_with(&payload, &delay)
            .expect("enqueue delayed");
    }
    let batch: Vec<Vec<u8>> = (0..1_000).map(|_| payload.clone()).collect();
    for _ in 0..PENDING / batch.len() {
        queue.enqueue_batch(&batch).expect("enqueue");
    }
    let counts = queue.message_counts();
    assert_eq!(
        (counts.ready, counts.delayed, counts.retrying),
        (PENDING as u64, DELAYED as u64, RETRYING as u64)
    );
    let mut g = c.benchmark_group("queue_browse");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    g.bench_function("first_50", |b| {
        b.iter(|| {
            let page = queue.messages(None, &Filter::all(), Page::first(50));
            assert_eq!(black_box(page.expect("list")).len(), 50);
        })
    });
    g.bench_function("retrying_50", |b| {
        b.iter(|| {
            let state = Some(QueuedState::Retrying);
            let page = queue.messages(state, &Filter::all(), Page::first(50));
            assert_eq!(black_box(page.expect("list")).len(), 50);
        })
    });
    g.bench_function("counts", |b| b.iter(|| black_box(queue.message_counts())));
    let mut id = 0;
    g.bench_function("get", |b| {
        b.iter(|| {
            id = (id + 7919) % (PENDING as u64);
            black_box(queue.message(id).expect("get"));
        })
    });
    g.finish();
    drop(queue);
    store.close().expect("close");
    let _ = std::fs::remove_dir_all(dir);
}

criterion::criterion_group!(benches, bench);
criterion::criterion_main!(benches);
