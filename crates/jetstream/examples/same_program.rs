//! The same program on both backends: the order-events flow (a worker pool, a poison
//! message to the DLQ, browse, fix and replay) written once against the backend traits,
//! run on an embedded store and then on a JetStream namespace.
//!
//! `cargo run -p deadletter-jetstream --example same_program` (needs a NATS server with
//! JetStream: `DEADLETTER_NATS_URL`, default `nats://127.0.0.1:4250`, the server `.ci/run` starts).

use std::time::Duration;

use deadletter::backend::WorkerQueue;
use deadletter::pool::Retry;
use deadletter::{
    Config, DeadLetterQueue, Delivery, Failure, Filter, Page, ReplayOptions, Store, WorkerPool,
};
use deadletter_jetstream::JetStream;

/// The whole flow, for any backend.
fn orders_flow<Q: WorkerQueue>(orders: &Q) -> deadletter::Result<()> {
    orders.enqueue_batch(&[
        r#"{"orderId":"ORD-1"}"#,
        "orderId=ORD-2;;;",
        r#"{"orderId":"ORD-3"}"#,
    ])?;
    let pool = WorkerPool::new(orders)
        .workers(2)
        .retry(Retry::exponential(Duration::from_millis(10)).max_attempts(3))
        .start(|msg: &Q::Message| match msg.text() {
            Some(order) if order.starts_with('{') => Ok(()), // acked
            _ => Err(Failure::permanent("InvalidPayload", "not JSON")), // to the DLQ
        })?;
    pool.run_until_idle()?;
    let counters = pool.shutdown(Duration::from_secs(5))?.counters;
    println!(
        "  processed {}, dead-lettered {}",
        counters.processed, counters.dead_lettered
    );

    let dlq = orders.dlq();
    let stats = dlq.stats()?; // counts, ages, by error kind
    println!(
        "  {}: {} entries {:?}",
        stats.name, stats.total, stats.by_error_kind
    );
    for entry in dlq.list(&Filter::error_kind("InvalidPayload"), Page::first(10))? {
        println!(
            "  entry {}: {:?} after {} attempt(s): {}",
            entry.id(),
            String::from_utf8_lossy(&entry.payload),
            entry.metadata.delivery_count,
            entry.failure.error_message
        );
        // After the fix: the corrected payload goes back, with fresh attempts.
        let fixed = r#"{"orderId":"ORD-2"}"#;
        dlq.replay_corrected(
            entry.id(),
            fixed,
            &ReplayOptions::to_origin().reset_attempts(),
        )?;
    }
    let replayed = orders.lease_wait(1, Duration::from_secs(5))?;
    for msg in &replayed {
        println!(
            "  replayed {} is back: {}",
            msg.id(),
            msg.text().unwrap_or("?")
        );
    }
    orders.ack_all(&replayed)?;
    println!("  DLQ now holds {} entries", dlq.len()?);
    Ok(())
}

fn main() -> deadletter::Result<()> {
    let dir = std::env::temp_dir().join(format!("deadletter-same-program-{}", std::process::id()));
    let store = Store::open(&dir, Config::default())?;
    println!("embedded store in {}:", dir.display());
    orders_flow(&store.queue("orders")?)?;
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);

    let url =
        std::env::var("DEADLETTER_NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4250".into());
    let namespace = format!("same_program_{}", std::process::id());
    let js = JetStream::connect(&url, &namespace)?;
    println!("JetStream namespace {namespace} on {url}:");
    orders_flow(&js.queue("orders")?)?;
    js.delete_namespace()
}
