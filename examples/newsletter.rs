//! The newsletter scenario: seven subscribers, three with invalid addresses, and a 10%
//! chance that a send times out. Invalid addresses are permanent failures and go to the DLQ
//! at once; timeouts are retried with backoff. Then the DLQ is inspected, support corrects
//! one address and replays it, and the remaining entries are handled by hand with a fixed
//! validator and marked reprocessed, as the original blog post does.
//!
//! Run: `cargo run --release --example newsletter [STORE_DIR]`

use std::time::Duration;

use deadletter::pool::Retry;
use deadletter::{Config, Failure, Filter, Message, Page, ReplayOptions, Store, WorkerPool};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Subscriber {
    email: String,
    name: String,
    plan: String,
}

fn subscribers() -> Vec<Subscriber> {
    let rows = [
        ("alice@email.com", "Alice", "premium"),
        ("bob@email.com", "Bob", "free"),
        ("INVALID_EMAIL", "Charlie", "free"),
        ("diana@email.com", "Diana", "premium"),
        ("", "Eve", "free"),
        ("frank@email.com", "Frank", "business"),
        ("bad@.com", "Grace", "free"),
    ];
    rows.iter()
        .map(|(email, name, plan)| Subscriber {
            email: email.to_string(),
            name: name.to_string(),
            plan: plan.to_string(),
        })
        .collect()
}

/// A strict address check: something before '@', a domain with a dot that neither starts
/// nor ends the domain.
fn validate(email: &str) -> Result<(), Failure> {
    let Some((local, domain)) = email.split_once('@') else {
        return Err(Failure::permanent(
            "InvalidEmail",
            format!("invalid e-mail address '{email}'"),
        ));
    };
    if local.is_empty() || !domain.contains('.') || domain.starts_with('.') || domain.ends_with('.')
    {
        return Err(Failure::permanent(
            "InvalidEmail",
            format!("invalid e-mail domain '{domain}'"),
        ));
    }
    Ok(())
}

/// A cheap per-message pseudo-random draw, so no extra dependency is needed.
fn times_out(msg: &Message) -> bool {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    (nanos as u64 ^ msg.id().wrapping_mul(0x9E37_79B9)).is_multiple_of(10)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = deadletter_examples::store_dir("newsletter");
    deadletter_examples::fresh_store_dir(&dir)?;
    let store = Store::open(&dir, Config::default())?;
    let queue = store.queue("newsletter")?;
    for s in subscribers() {
        queue.enqueue_typed(&s)?;
    }

    println!("=== sending the newsletter batch (2 workers, 5 attempts, exponential backoff) ===\n");
    let pool = WorkerPool::new(&queue)
        .workers(2)
        .retry(Retry::exponential(Duration::from_millis(50)).max_attempts(5))
        .name("mailer")
        .start_typed(|s: Subscriber, msg: &Message| {
            validate(&s.email).inspect_err(|f| println!("  x {} <{}>: {}", s.name, s.email, f))?;
            if times_out(msg) {
                println!(
                    "  ~ {} <{}>: timeout on attempt {}, will retry",
                    s.name,
                    s.email,
                    msg.attempt()
                );
                return Err(Failure::transient(
                    "Timeout",
                    format!("timeout sending to {}", s.email),
                ));
            }
            println!(
                "  > sent to {} ({}, attempt {})",
                s.email,
                s.name,
                msg.attempt()
            );
            Ok(())
        })?;
    pool.run_until_idle()?;
    let c = pool.shutdown(Duration::from_secs(5))?.counters;
    println!(
        "\nsent: {} | retried: {} | to the DLQ: {}",
        c.processed, c.retried, c.dead_lettered
    );

    let dlq = queue.dlq();
    let stats = dlq.stats();
    println!("\nDLQ statistics ({}):", stats.name);
    println!("  total: {} | pending: {}", stats.total, stats.pending);
    for (kind, n) in &stats.by_error_kind {
        println!("  {kind}: {n}");
    }
    println!("\nmessages in quarantine:");
    let entries = dlq.list(&Filter::all(), Page::first(100))?;
    for e in &entries {
        let s: Subscriber =
            bincode::serde::decode_from_slice(&e.payload, bincode::config::standard())?.0;
        println!(
            "  id {} | {} <{}> | {}: {}",
            e.id(),
            s.name,
            s.email,
            e.failure.error_kind,
            e.failure.error_message
        );
    }

    println!("\n=== replay after the fix ===");
    for e in entries {
        let mut s: Subscriber =
            bincode::serde::decode_from_slice(&e.payload, bincode::config::standard())?.0;
        if s.name == "Charlie" {
            // Support found Charlie's real address: replay the message with corrected data.
            s.email = "charlie@email.com".into();
            let fixed = bincode::serde::encode_to_vec(&s, bincode::config::standard())?;
            dlq.replay_corrected(e.id(), fixed, &ReplayOptions::to_origin().reset_attempts())?;
            let msg = queue.lease_wait(1, Duration::from_secs(1))?.remove(0);
            let s: Subscriber = msg.decode()?;
            validate(&s.email).map_err(|f| f.to_string())?;
            queue.ack(&msg)?;
            println!(
                "  replay ok: {} (corrected and redelivered through the queue)",
                s.email
            );
            continue;
        }
        // The others are retried by hand with the fixed validator, as in the original post.
        match validate(&s.email) {
            Ok(()) => {
                dlq.mark_reprocessed(e.id(), true)?;
                println!("  replay ok: {}", s.email);
            }
            Err(f) => {
                dlq.mark_reprocessed(e.id(), false)?;
                println!("  replay failed: '{}' -- {}", s.email, f.message);
            }
        }
    }
    let stats = dlq.stats();
    println!("\nfinal statistics:");
    println!(
        "  in DLQ: {} | pending: {} | reprocessed ok: {} | reprocessed failed: {} | replayed: {}",
        stats.total, stats.pending, stats.reprocessed_ok, stats.reprocessed_failed, stats.replayed
    );
    store.close()?;
    Ok(())
}
