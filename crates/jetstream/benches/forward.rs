//! Forwarding throughput: a store holding N messages forwarded to the machine's NATS
//! server (`DEADLETTER_NATS_URL`, default `nats://127.0.0.1:4250`, the server `.ci/run` starts) until drained, beside
//! the same messages published straight to a JetStream queue by `enqueue_batch` (no local
//! store: the cost of JetStream alone), in one run.
//!
//! The forwarder's store is durable (`Durability::Always`: its lease and its ack of each
//! window are fsynced) and filled before the timer starts; each iteration uses a fresh
//! namespace, deleted afterwards. `cargo bench -p deadletter-jetstream --bench forward`.

use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use deadletter::queue::QueueOptions;
use deadletter::{Config, MessageQueue, Store};
use deadletter_jetstream::{ForwardOptions, Forwarder, JetStream, JetStreamOptions};

const MESSAGES: usize = 20_000;
const PAYLOAD: usize = 128;

fn url() -> String {
    deadletter_jetstream::local_server::shared_url()
}

fn namespace() -> String {
    format!(
        "bench_{}_{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    )
}

/// Fills a fresh store with `MESSAGES` messages; times forwarding them all.
fn forward_once(max_in_flight: usize) -> Duration {
    let dir = tempfile::tempdir().unwrap();
    let config = Config::default().queue_defaults(QueueOptions::default().max_attempts(u32::MAX));
    let store = Store::open(dir.path(), config).unwrap();
    let q = store.queue("readings").unwrap();
    let payload = vec![b'r'; PAYLOAD];
    for _ in 0..MESSAGES / 1000 {
        q.enqueue_batch(&vec![payload.as_slice(); 1000]).unwrap();
    }
    let ns = namespace();
    let options = ForwardOptions::new(url(), ns.clone(), "bench-device")
        .queue("readings")
        .max_in_flight(max_in_flight);
    let mut forwarder = Forwarder::new(&store, options).unwrap();
    let start = Instant::now();
    forwarder
        .run_until_drained(&AtomicBool::new(false))
        .unwrap();
    let took = start.elapsed();
    assert_eq!(forwarder.status().forwarded, MESSAGES as u64);
    JetStream::connect(&url(), &ns)
        .unwrap()
        .delete_namespace()
        .unwrap();
    took
}

/// Times publishing `MESSAGES` messages to a JetStream queue in batches of `batch`.
fn publish_once(batch: usize) -> Duration {
    let js = JetStream::connect_with(&url(), JetStreamOptions::new(namespace())).unwrap();
    let q = js.queue("readings").unwrap();
    let payload = vec![b'r'; PAYLOAD];
    let start = Instant::now();
    for _ in 0..MESSAGES / batch {
        q.enqueue_batch(&vec![payload.as_slice(); batch]).unwrap();
    }
    let took = start.elapsed();
    js.delete_namespace().unwrap();
    took
}

fn forwarding(c: &mut Criterion) {
    let mut g = c.benchmark_group("forward");
    g.sample_size(10)
        .measurement_time(Duration::from_secs(20))
        .warm_up_time(Duration::from_secs(1))
        .throughput(Throughput::Elements(MESSAGES as u64));
    for in_flight in [64, 1024] {
        g.bench_with_input(
            BenchmarkId::new("store_to_jetstream", in_flight),
            &in_flight,
            |b, &n| b.iter_custom(|iters| (0..iters).map(|_| forward_once(n)).sum()),
        );
    }
    g.bench_with_input(
        BenchmarkId::new("jetstream_enqueue_batch", 1024),
        &1024,
        |b, &n| b.iter_custom(|iters| (0..iters).map(|_| publish_once(n)).sum()),
    );
    g.finish();
}

criterion_group!(benches, forwarding);
criterion_main!(benches);
