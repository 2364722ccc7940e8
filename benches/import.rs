//! Importing exported DLQ entries: 100,000 entries (100-byte payloads, one failure with one
//! attempt each) into a new durable store (`Always`: one fsync per batch) through an
//! `Importer`, in batches of 2,000 as `deadletter import` writes them; then the same
//! entries again, which adds nothing (every one is skipped by identity). Data goes under
//! `target/bench-data/import/` (a real disk).
//!
//! The reported throughput counts entries. The target for the first import is 50,000
//! entries/s or more.

mod common;

use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput};
use deadletter::dlq::{Attempt, DeadLetter, DlqMetadata, FailureInfo, OriginalMetadata};
use deadletter::store::CompactionOptions;
use deadletter::{Config, Store};

const ENTRIES: usize = 100_000;
const BATCH: usize = 2_000;

fn entries() -> Vec<DeadLetter> {
    let t0 = 1_700_000_000_000u64;
    (0..ENTRIES as u64)
        .map(|i| {
            let mut payload = format!("{{\"orderId\":\"ORD-{i:08}\"}}").into_bytes();
            payload.resize(100, b' ');
            let at = t0 + i * 10;
            let failure = FailureInfo::new("ValidationError", format!("order {i} is invalid"), at)
                .attempts(vec![Attempt::new(1, at, "ValidationError", "invalid")]);
            DeadLetter::new(
                payload,
                OriginalMetadata::new(i, "orders", t0 + i).delivery_count(1),
                failure,
                DlqMetadata::new(at),
            )
        })
        .collect()
}

/// Imports every entry into a new store, then again; the two durations.
fn run(entries: &[DeadLetter]) -> (Duration, Duration) {
    let dir = common::fresh_dir("import", "run");
    let config = Config::default().compaction(CompactionOptions::default().interval(None));
    let store = Store::open(&dir, config).expect("open");
    let started = Instant::now();
    let mut importer = store.importer(None).expect("importer");
    let mut imported = 0;
    for batch in entries.chunks(BATCH) {
        imported += importer.import_batch(batch).expect("import").imported.len();
    }
    let first = started.elapsed();
    assert_eq!(imported, ENTRIES);
    let started = Instant::now();
    let mut importer = store.importer(None).expect("importer");
    for batch in entries.chunks(BATCH) {
        let report = importer.import_batch(batch).expect("import again");
        assert!(report.imported.is_empty());
    }
    let again = started.elapsed();
    assert_eq!(
        store.dlq("orders-dlq").expect("dlq").len() as usize,
        ENTRIES
    );
    (first, again)
}

fn bench(c: &mut Criterion) {
    let entries = entries();
    let mut group = c.benchmark_group("import");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(10));
    group.throughput(Throughput::Elements(ENTRIES as u64));
    group.bench_function(BenchmarkId::new("Always", "first-100k"), |b| {
        b.iter_custom(|iters| (0..iters).map(|_| run(&entries).0).sum())
    });
    group.bench_function(BenchmarkId::new("Always", "again-100k-adds-nothing"), |b| {
        b.iter_custom(|iters| (0..iters).map(|_| run(&entries).1).sum())
    });
    group.finish();
}

criterion::criterion_group!(benches, bench);
criterion::criterion_main!(benches);
