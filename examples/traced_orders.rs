//! One trace for a message's whole life: an order enqueued with a W3C `traceparent` fails
//! twice (a retry, then the DLQ), is replayed once the bug is fixed, and succeeds; every
//! span and event deadletter emits for it (feature `tracing`) carries the same
//! `traceparent`, and a subscriber prints them to stdout. An OpenTelemetry subscriber
//! (tracing-opentelemetry) in its place exports the same spans to a collector.
//!
//! Run: `cargo run --release -p deadletter-examples --features tracing --example traced_orders [STORE_DIR]`

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use deadletter::pool::Retry;
use deadletter::queue::EnqueueOptions;
use deadletter::trace::TraceParent;
use deadletter::{Config, Failure, Message, ReplayOptions, Store, WorkerPool};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_target(false)
        .without_time()
        .init();
    let dir = deadletter_examples::store_dir("traced-orders");
    deadletter_examples::fresh_store_dir(&dir)?;
    let store = Store::open(&dir, Config::default())?;
    let orders = store.queue("orders")?;

    // The request that produced the order started this trace (here: a new one).
    let trace = TraceParent::new_root();
    println!("trace {trace}");
    let id = orders.enqueue_with(
        br#"{"order":"ORD-7"}"#,
        &EnqueueOptions::new().traceparent(&trace),
    )?;

    let fixed = Arc::new(AtomicBool::new(false));
    let run = |fixed: Arc<AtomicBool>| -> deadletter::Result<()> {
        let pool = WorkerPool::new(&orders)
            .retry(Retry::fixed(Duration::from_millis(10)).max_attempts(2))
            .start(move |msg: &Message| {
                // A handler may carry the context on (to an HTTP call, a database).
                let context = msg.traceparent().map(|t| t.child().to_string());
                tracing::info!(outbound_traceparent = context, "charging the card");
                if fixed.load(Ordering::SeqCst) {
                    Ok(())
                } else {
                    Err(Failure::transient(
                        "PaymentTimeout",
                        "the gateway did not answer",
                    ))
                }
            })?;
        pool.run_until_idle()?;
        pool.shutdown(Duration::from_secs(5))?;
        Ok(())
    };
    run(Arc::clone(&fixed))?;
    println!("in the DLQ: {}", orders.dlq().len());

    fixed.store(true, Ordering::SeqCst);
    orders.dlq().replay_one(id, &ReplayOptions::to_origin())?;
    run(fixed)?;
    println!("in the DLQ after the replay: {}", orders.dlq().len());
    store.close()?;
    Ok(())
}
