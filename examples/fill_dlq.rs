//! Writes a small store with dead-lettered messages of several error kinds, spread over the
//! last few hours: the fixture of the CLI documentation and the dashboard's browser test.
//!
//! Queue `orders` (at most 3 attempts): 12 orders; 4 payloads that are not JSON (one of them
//! not even UTF-8) fail with `InvalidPayload`, 2 with `PaymentDeclined` (permanent), one
//! times out three times (`InventoryTimeout`), the other 5 are acked.
//! Queue `emails`: 5 messages; one times out three times (`SmtpTimeout`), 2 are acked and 2
//! are left waiting. So: `orders-dlq` holds 7 entries, `emails-dlq` 1.
//!
//! Run: `cargo run --example fill_dlq -- DIR` (DIR must not exist or be empty).

use std::time::Duration;

use deadletter::clock::{Clock, ManualClock, SystemClock};
use deadletter::queue::{EnqueueOptions, FailureReport, QueueOptions};
use deadletter::{Config, Failure, Message, Store};

const HOUR: u64 = 3_600_000;

fn orders_handler(msg: &Message) -> Result<(), Failure> {
    let Some(text) = msg.text() else {
        return Err(
            Failure::permanent("InvalidPayload", "payload is not UTF-8 text")
                .with_context("step", "decode"),
        );
    };
    if !text.starts_with('{') {
        return Err(
            Failure::permanent("InvalidPayload", "payload is not valid JSON")
                .with_context("step", "parse"),
        );
    }
    if text.contains("\"card\":\"declined\"") {
        return Err(Failure::permanent(
            "PaymentDeclined",
            "the card issuer declined the charge (code 05)",
        )
        .with_context("gateway", "acme-pay"));
    }
    if text.contains("\"sku\":\"BACKORDER\"") {
        return Err(Failure::transient(
            "InventoryTimeout",
            "inventory service timed out after 2 s",
        )
        .with_context("service", "inventory"));
    }
    Ok(())
}

fn emails_handler(msg: &Message) -> Result<(), Failure> {
    if msg.text().is_some_and(|t| t.contains("slow.example")) {
        return Err(Failure::transient(
            "SmtpTimeout",
            "SMTP server slow.example did not answer within 30 s",
        ));
    }
    Ok(())
}

/// Leases and handles every visible message of `queue` once, reporting outcomes; returns
/// how many were handled.
fn drain_once(
    queue: &deadletter::Queue,
    clock: &ManualClock,
    worker: &str,
    handler: fn(&Message) -> Result<(), Failure>,
) -> Result<usize, deadletter::Error> {
    let batch = queue.lease(100)?;
    for msg in &batch {
        match handler(msg) {
            Ok(()) => queue.ack(msg)?,
            Err(failure) => {
                let report = FailureReport::new(&failure)
                    .worker(worker)
                    .duration(Duration::from_millis(40 + msg.id() * 7 % 200));
                queue.retry(msg, &report, clock.now_ms() + 60_000)?;
            }
        }
        clock.advance(3 * 60_000);
    }
    Ok(batch.len())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir =
        deadletter_examples::new_dir_arg("usage: fill_dlq DIR (DIR must not exist or be empty)")?;
    // Start six hours ago (on an hour boundary) and let time run forward as work is done.
    let now = SystemClock.now_ms();
    let clock = ManualClock::new((now / HOUR - 6) * HOUR + 5 * 60_000);
    let store = Store::open(&dir, Config::default().clock(clock.clone()))?;
    let options = QueueOptions::default().max_attempts(3);
    let orders = store.queue_with("orders", options.clone())?;
    let emails = store.queue_with("emails", options)?;

    let mut order_payloads: Vec<Vec<u8>> = Vec::new();
    for n in 1..=12u32 {
        let p = match n {
            3 => b"orderId=ORD-3;;;".to_vec(),
            7 => b"<order id=\"ORD-7\"/>".to_vec(),
            11 => b"ORD-11,29.90,EUR".to_vec(),
            12 => vec![
                0xff, 0xfe, 0x00, 0x4f, 0x52, 0x44, 0x2d, 0x31, 0x32, 0x80, 0x0a,
            ],
            5 | 9 => format!(r#"{{"orderId":"ORD-{n}","card":"declined"}}"#).into_bytes(),
            4 => br#"{"orderId":"ORD-4","sku":"BACKORDER"}"#.to_vec(),
            _ => format!(r#"{{"orderId":"ORD-{n}","total":{}.50}}"#, 10 * n).into_bytes(),
        };
        order_payloads.push(p);
    }
    for (i, p) in order_payloads.iter().enumerate() {
        let opts = EnqueueOptions::new()
            .attribute("orderId", format!("ORD-{}", i + 1))
            .attribute("source", "web");
        orders.enqueue_with(p, &opts)?;
        clock.advance(60_000);
    }
    // Work through orders in rounds (retries come back after their backoff).
    for _ in 0..4 {
        clock.advance(HOUR / 2);
        drain_once(&orders, &clock, "billing-1", orders_handler)?;
    }
    // Emails: three are handled (one of them times out until it is dead-lettered), then two
    // more arrive and are left waiting.
    for r in ["ana@mail.example", "bo@slow.example", "cy@mail.example"] {
        emails.enqueue_with(
            format!(r#"{{"to":"{r}","template":"receipt"}}"#),
            &EnqueueOptions::new().attribute("template", "receipt"),
        )?;
    }
    for _ in 0..3 {
        clock.advance(HOUR / 4);
        drain_once(&emails, &clock, "mailer-1", emails_handler)?;
    }
    for r in ["di@mail.example", "ed@mail.example"] {
        emails.enqueue_with(
            format!(r#"{{"to":"{r}","template":"receipt"}}"#),
            &EnqueueOptions::new().attribute("template", "receipt"),
        )?;
    }
    store.sync()?;
    let o = orders.dlq().stats();
    let e = emails.dlq().stats();
    println!(
        "{}: orders-dlq {} entries {:?}, emails-dlq {} entries {:?}, orders waiting {}, emails waiting {}",
        dir.display(),
        o.total,
        o.by_error_kind,
        e.total,
        e.by_error_kind,
        orders.len(),
        emails.len()
    );
    Ok(())
}
