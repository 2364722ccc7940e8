//! Reading a DLQ of 100,000 entries (100-byte and 1 KiB payloads, four error kinds in
//! rotation, the comparison harness's shape): the calls a UI makes while someone pages
//! through it. At 1 KiB the log spans two segments, and a page reads from both.
//!
//! - `list_kind_100`: the first 100 entries of one error kind, whole envelopes
//!   (`Dlq::list`);
//! - `list_summaries_kind_100`: the same page as summaries (`Dlq::list_summaries`: id,
//!   kind, message, attempts, time, status, payload), what the comparison harness's
//!   `dlq_list_filtered` asks of every contestant;
//! - `get`: one whole entry by id, ids drawn at random (`Dlq::get`);
//! - `summary`: one entry's summary by id (`Dlq::summary`, the harness's `dlq_get`).
//!
//! Run with `cargo bench --bench dlq_read`. The store lives under
//! `target/bench-data/dlq_read` (on disk, not a tmpfs) and is removed afterwards.
//! Throughputs are in calls per second. `DLQ_READ_LOOP=<secs>` skips criterion and loops
//! over each call for that long, for a profiler (`perf record`, `valgrind`); with
//! `DLQ_READ_ONLY=<name>`, over that call only.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use criterion::{black_box, BenchmarkId, Criterion, Throughput};
use deadletter::queue::{FailureReport, MessageId};
use deadletter::store::CompactionOptions;
use deadletter::{Config, Dlq, Failure, Filter, Page, Store};

const ENTRIES: usize = 100_000;
const KINDS: [&str; 4] = ["validation", "timeout", "unauthorized", "not_found"];
const PAGE: usize = 100;

/// A store whose queue `bench` has `ENTRIES` DLQ entries, and their ids.
fn fill(dir: &Path, size: usize) -> (Store, Dlq, Vec<MessageId>) {
    let config = Config::fast().compaction(CompactionOptions::default().interval(None));
    let store = Store::open(dir, config).expect("open");
    let queue = store.queue("bench").expect("queue");
    let payloads: Vec<Vec<u8>> = (0..ENTRIES)
        .map(|i| {
            let mut p = format!("{{\"seq\":{i}}}").into_bytes();
            p.resize(size, b' ');
            p
        })
        .collect();
    for chunk in payloads.chunks(1_000) {
        queue.enqueue_batch(chunk).expect("enqueue");
    }
    loop {
        let msgs = queue.lease(1_000).expect("lease");
        if msgs.is_empty() {
            break;
        }
        for m in &msgs {
            let i = m.id() as usize;
            let failure = Failure::permanent(
                KINDS[i % KINDS.len()],
                format!("message {i} rejected by handler"),
            );
            queue
                .dead_letter(m, &FailureReport::new(&failure))
                .expect("dead-letter");
        }
    }
    let dlq = queue.dlq();
    let ids = dlq.ids(&Filter::all(), None).expect("ids");
    assert_eq!(ids.len(), ENTRIES);
    (store, dlq, ids)
}

/// A random id of `ids` (xorshift).
fn pick(ids: &[MessageId], x: &mut u64) -> MessageId {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    ids[(*x % ids.len() as u64) as usize]
}

/// A call measured, by name.
type Call<'a> = (&'static str, Box<dyn FnMut() + 'a>);

/// The calls measured.
fn calls<'a>(dlq: &'a Dlq, ids: &'a [MessageId]) -> Vec<Call<'a>> {
    let filter = Filter::error_kind(KINDS[1]);
    let by_kind = filter.clone();
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    let mut y = x;
    vec![
        (
            "list_kind_100",
            Box::new(move || {
                let page = dlq.list(&filter, Page::first(PAGE)).expect("list");
                assert_eq!(page.len(), PAGE);
                black_box(page);
            }),
        ),
        (
            "list_summaries_kind_100",
            Box::new(move || {
                let page = dlq
                    .list_summaries(&by_kind, Page::first(PAGE))
                    .expect("list_summaries");
                assert_eq!(page.len(), PAGE);
                black_box(page);
            }),
        ),
        (
            "get",
            Box::new(move || {
                black_box(dlq.get(pick(ids, &mut x)).expect("get"));
            }),
        ),
        (
            "summary",
            Box::new(move || {
                black_box(dlq.summary(pick(ids, &mut y)).expect("summary"));
            }),
        ),
    ]
}

fn bench(c: &mut Criterion) {
    for size in [100, 1024] {
        let dir = common::fresh_dir("dlq_read", "store");
        let (store, dlq, ids) = fill(&dir, size);
        if let Some(secs) = std::env::var("DLQ_READ_LOOP")
            .ok()
            .and_then(|s| s.parse::<f64>().ok())
        {
            let only = std::env::var("DLQ_READ_ONLY").ok();
            for (name, mut call) in calls(&dlq, &ids) {
                if only.as_deref().is_some_and(|o| o != name) {
                    continue;
                }
                let started = Instant::now();
                let mut n = 0u64;
                while started.elapsed().as_secs_f64() < secs {
                    call();
                    n += 1;
                }
                println!("{name}/{size} B: {:.0} calls/s", n as f64 / secs);
            }
        } else {
            let mut g = c.benchmark_group("dlq_read");
            g.sample_size(20)
                .warm_up_time(Duration::from_millis(500))
                .measurement_time(Duration::from_secs(3))
                .throughput(Throughput::Elements(1));
            for (name, mut call) in calls(&dlq, &ids) {
                g.bench_function(BenchmarkId::new(name, format!("{size}B")), |b| {
                    b.iter(&mut call)
                });
            }
            g.finish();
        }
        drop(dlq);
        store.close().expect("close");
        let _ = std::fs::remove_dir_all(dir);
    }
}

criterion::criterion_group!(benches, bench);
criterion::criterion_main!(benches);
