//! The order events on the async API (feature `async`): 64 tasks enqueue orders durably
//! (each future completes once the fsync covering it did; the tasks share fsyncs), an async
//! worker pool handles them with an async handler (a pretend inventory service, a tokio
//! sleep), the poison orders end in the DLQ, and a replay after the fix drains it.
//!
//! Run: `cargo run --release -p deadletter-examples --features async --example async_orders [STORE_DIR]`

use std::time::{Duration, Instant};

use deadletter::async_api::{AsyncQueue, AsyncWorkerPool};
use deadletter::pool::Retry;
use deadletter::{Config, Failure, Filter, Message, Page, ReplayOptions, Store};

/// The business logic: a pretend call to an inventory service, then a check that the
/// order is JSON (permanent failure otherwise).
async fn process(msg: Message) -> Result<(), Failure> {
    tokio::time::sleep(Duration::from_millis(1)).await; // the service's answer
    match msg.text() {
        Some(order) if order.starts_with('{') => Ok(()),
        _ => Err(Failure::permanent(
            "InvalidPayload",
            "payload is not valid JSON",
        )),
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = deadletter_examples::store_dir("async-orders");
    deadletter_examples::fresh_store_dir(&dir)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_time()
        .build()?;
    runtime.block_on(async {
        let store = Store::open(&dir, Config::default())?; // durable: fsync per write
        let queue = store.queue("order-events")?;
        let orders = AsyncQueue::new(&queue);

        let started = Instant::now();
        let fsyncs = store.storage_stats().fsyncs;
        let tasks: Vec<_> = (0..64)
            .map(|t| {
                let orders = orders.clone();
                tokio::spawn(async move {
                    for i in 0..16 {
                        let order = if (t * 16 + i) % 100 == 7 {
                            format!("orderId=ORD-{t}-{i}") // poison: not JSON
                        } else {
                            format!(r#"{{"orderId":"ORD-{t}-{i}"}}"#)
                        };
                        orders.enqueue(order).await?;
                    }
                    Ok::<(), deadletter::Error>(())
                })
            })
            .collect();
        for t in tasks {
            t.await??;
        }
        println!(
            "1024 durable enqueues from 64 tasks in {:?}, {} fsyncs",
            started.elapsed(),
            store.storage_stats().fsyncs - fsyncs
        );

        let report = AsyncWorkerPool::new(&queue)
            .concurrency(32)
            .retry(Retry::exponential(Duration::from_millis(5)).max_attempts(3))
            .run_until_idle(process)
            .await?;
        println!(
            "pool: {} processed, {} dead-lettered",
            report.counters.processed, report.counters.dead_lettered
        );

        let dlq = orders.dlq();
        let stats = dlq.stats().await?;
        println!(
            "DLQ: {} entries, by kind {:?}",
            stats.total, stats.by_error_kind
        );
        for entry in dlq.list(&Filter::all(), Page::first(3)).await? {
            println!(
                "  {}: {:?} ({})",
                entry.id(),
                String::from_utf8_lossy(&entry.payload),
                entry.failure.error_message
            );
        }
        // The fix: every poison order corrected and replayed.
        for entry in dlq.list(&Filter::all(), Page::first(100)).await? {
            let fixed = format!(
                r#"{{"orderId":"{}"}}"#,
                String::from_utf8_lossy(&entry.payload)
            );
            dlq.replay_corrected(
                entry.id(),
                fixed,
                &ReplayOptions::to_origin().reset_attempts(),
            )
            .await?;
        }
        let report = AsyncWorkerPool::new(&queue).run_until_idle(process).await?;
        println!("after the replay: {} processed", report.counters.processed);
        assert!(dlq.dlq().is_empty() && queue.is_empty());
        Ok::<(), Box<dyn std::error::Error>>(())
    })?;
    Ok(())
}
