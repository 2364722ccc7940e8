//! The order-events scenario: four events, one with a transient inventory timeout that
//! succeeds on its third attempt, one poison payload that is not JSON, and two valid ones.
//! The poison message goes to the DLQ without blocking the others, an alert fires, then a
//! person fixes its payload and replays it.
//!
//! Run: `cargo run --release --example orders [STORE_DIR]`

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use deadletter::pool::Retry;
use deadletter::queue::EnqueueOptions;
use deadletter::{Config, Failure, Filter, Message, ReplayOptions, Store, WorkerPool};

/// The business logic: permanent failure for a payload that is not JSON, a transient
/// inventory timeout for the first two attempts of a message marked TRANSIENT.
fn process(msg: &Message) -> Result<(), Failure> {
    let payload = msg.text().unwrap_or("");
    if !payload.starts_with('{') {
        return Err(
            Failure::permanent("InvalidPayload", "payload is not valid JSON")
                .with_context("step", "parse"),
        );
    }
    if payload.contains("TRANSIENT") && msg.attempt() < 3 {
        return Err(Failure::transient(
            "InventoryTimeout",
            "timed out while checking the inventory",
        ));
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = deadletter_examples::store_dir("orders");
    deadletter_examples::fresh_store_dir(&dir)?;
    let started = Instant::now();
    let store = Store::open(&dir, Config::default())?;
    let queue = store.queue("order-events")?;
    println!(
        "store: {} (durable: every call returns after fsync)\n",
        dir.display()
    );

    let events = [
        ("MSG-1", r#"{"orderId":"ORD-1"}"#),
        ("MSG-2", r#"{"orderId":"ORD-2","note":"TRANSIENT"}"#),
        ("MSG-3", "orderId=ORD-3;;;"),
        ("MSG-4", r#"{"orderId":"ORD-4"}"#),
    ];
    for (event, payload) in events {
        queue.enqueue_with(payload, &EnqueueOptions::new().attribute("event", event))?;
    }
    println!("=== consumer processing order-events (1 worker, 3 attempts, backoff 100 ms x2) ===");

    let handled = Arc::new(AtomicU32::new(0));
    let seen = Arc::clone(&handled);
    let t0 = Instant::now();
    let pool = WorkerPool::new(&queue)
        .workers(1)
        .retry(Retry::exponential(Duration::from_millis(100)).max_attempts(3).no_jitter())
        .name("billing")
        .start(move |msg: &Message| {
            seen.fetch_add(1, Ordering::Relaxed);
            let event = msg.attributes().get("event").cloned().unwrap_or_default();
            let result = process(msg);
            let at = t0.elapsed().as_millis();
            match &result {
                Ok(()) => println!(
                    "{at:>5} ms  {event} attempt {}/3: processed {}",
                    msg.attempt(),
                    msg.text().unwrap_or("")
                ),
                Err(f) if f.is_permanent() => println!(
                    "{at:>5} ms  {event} attempt {}/3: permanent failure ({f}): straight to the DLQ",
                    msg.attempt()
                ),
                Err(f) => println!(
                    "{at:>5} ms  {event} attempt {}/3: failed ({f}); retried after a backoff, the queue keeps flowing",
                    msg.attempt()
                ),
            }
            result
        })?;
    pool.on_dlq_alert(1, |alert| {
        if alert.above {
            println!(
                "        ALERT: {} holds {} message(s)",
                alert.dlq, alert.size
            );
        } else {
            println!(
                "        alert cleared: {} is back under {}",
                alert.dlq, alert.threshold
            );
        }
    })?;
    pool.run_until_idle()?;

    let dlq = queue.dlq();
    println!(
        "\n=== monitoring: {} holds {} message(s) ===",
        dlq.name(),
        dlq.len()
    );
    for entry in dlq.list(&Filter::all(), deadletter::Page::first(10))? {
        println!(
            "  {} (id {}) | {}: {} | deliveries: {} | payload: {}",
            entry
                .metadata
                .attributes
                .get("event")
                .map(String::as_str)
                .unwrap_or("?"),
            entry.id(),
            entry.failure.error_kind,
            entry.failure.error_message,
            entry.metadata.delivery_count,
            String::from_utf8_lossy(&entry.payload)
        );
    }

    println!("\n=== a person fixes the payload and replays it ===");
    let poison = dlq.ids(&Filter::error_kind("InvalidPayload"), Some(1))?;
    for id in poison {
        dlq.replay_corrected(
            id,
            r#"{"orderId":"ORD-3"}"#,
            &ReplayOptions::to_origin().reset_attempts(),
        )?;
    }
    pool.run_until_idle()?;
    let report = pool.shutdown(Duration::from_secs(5))?;
    let stats = dlq.stats();
    println!(
        "\nprocessed {} | retried {} | dead-lettered {} | handler calls {} | DLQ now {} (replayed {}, reprocessed ok {})",
        report.counters.processed,
        report.counters.retried,
        report.counters.dead_lettered,
        handled.load(Ordering::Relaxed),
        stats.total,
        stats.replayed,
        stats.reprocessed_ok
    );
    println!("done in {} ms", started.elapsed().as_millis());
    Ok(())
}
