//! The two seed scenarios, on any backend.
//!
//! - **orders**: four order events, at most 3 attempts with a growing backoff; the second
//!   fails twice with a timeout and succeeds on its third attempt; the third is poison
//!   (not JSON) and reaches the DLQ after 3 attempts without holding up the fourth; a
//!   person fixes its payload and replays it, and it succeeds.
//! - **newsletter**: seven subscribers, three with invalid addresses (a permanent
//!   `ValidationError`: to the DLQ at once), one whose first send times out (a transient
//!   failure, retried); the DLQ is inspected (counts, listings and filters, envelopes,
//!   analysis), then the entries are dealt with: one corrected and replayed (it
//!   succeeds), one replayed as is (it fails again), one handled by hand and marked.
//!
//! Both check what they left across a reopen ([`TestBackend::reopen`]).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use deadletter::dlq::{DeadLetter, DlqStats, EntryStatus};
use deadletter::queue::{EnqueueOptions, FailureOutcome, FailureReport, MessageId};
use deadletter::{
    DeadLetterQueue, Delivery, Error, Failure, Filter, MessageQueue, Page, ReplayOptions,
};

use crate::support::{counts, fail, held, lease_one, PATIENCE};
use crate::{options, DlqOf, TestBackend};

fn process_order(payload: &str, attempt: u32) -> Result<(), Failure> {
    if !payload.starts_with('{') {
        return Err(Failure::transient(
            "IllegalArgumentException",
            "payload is not valid JSON",
        ));
    }
    if payload.contains("TRANSIENT") && attempt < 3 {
        return Err(Failure::transient(
            "InventoryTimeout",
            "temporary timeout while checking the inventory",
        ));
    }
    Ok(())
}

/// The order-events scenario.
pub fn orders<B: TestBackend>(backend: &B) {
    let queue = backend.queue("order-events", options(3, 30_000)).unwrap();
    let payloads = [
        r#"{"orderId":"ORD-1"}"#,
        r#"{"orderId":"ORD-2","note":"TRANSIENT"}"#,
        "orderId=ORD-3;;;",
        r#"{"orderId":"ORD-4"}"#,
    ];
    let ids = queue.enqueue_batch(&payloads).unwrap();
    assert_eq!(ids.len(), 4);
    assert_eq!(ids.iter().collect::<BTreeSet<_>>().len(), 4, "ids differ");

    // (message index, attempt, succeeded), in delivery order.
    let mut log: Vec<(usize, u32, bool)> = Vec::new();
    let mut resolved = 0;
    let give_up = Instant::now() + PATIENCE;
    while resolved < 4 {
        assert!(Instant::now() < give_up, "the scenario stalled: {log:?}");
        let Some(msg) = queue.lease_wait(1, Duration::from_secs(1)).unwrap().pop() else {
            continue;
        };
        let index = ids.iter().position(|&i| i == msg.id()).expect("known id");
        match process_order(msg.text().unwrap(), msg.attempt()) {
            Ok(()) => {
                queue.ack(&msg).unwrap();
                log.push((index, msg.attempt(), true));
                resolved += 1;
            }
            Err(failure) => {
                let backoff = Duration::from_millis(150 * msg.attempt() as u64);
                let outcome = fail(&queue, &msg, &failure, "billing-1", backoff);
                log.push((index, msg.attempt(), false));
                if msg.attempt() < 3 {
                    assert!(matches!(outcome, FailureOutcome::Retried { .. }));
                } else {
                    assert_eq!(outcome, FailureOutcome::DeadLettered);
                    resolved += 1;
                }
            }
        }
    }

    // The second order succeeds on its third attempt.
    let second: Vec<_> = log.iter().filter(|e| e.0 == 1).collect();
    assert_eq!(second.len(), 3, "{log:?}");
    assert_eq!((second[2].1, second[2].2), (3, true));
    assert!(!second[0].2 && !second[1].2);
    // The fourth is delivered (and succeeds) while the poison waits out its first backoff.
    let fourth = log.iter().position(|e| e.0 == 3).unwrap();
    let poison_again = log.iter().position(|e| e.0 == 2 && e.1 == 2).unwrap();
    assert!(fourth < poison_again, "the fourth waited: {log:?}");
    assert_eq!((log[fourth].1, log[fourth].2), (1, true));

    // The poison is in the DLQ with its three attempts, across a reopen.
    drop(queue);
    backend.reopen().unwrap();
    let queue = backend.queue("order-events", options(3, 30_000)).unwrap();
    let dlq = queue.dlq();
    assert_eq!(dlq.name(), "order-events-dlq");
    assert_eq!(dlq.len().unwrap(), 1);
    let entry = dlq.get(ids[2]).unwrap();
    assert_eq!(entry.payload, payloads[2].as_bytes());
    assert_eq!(entry.metadata.delivery_count, 3);
    assert_eq!(entry.failure.error_kind, "IllegalArgumentException");
    assert_eq!(entry.failure.error_message, "payload is not valid JSON");
    let numbers: Vec<u32> = entry.failure.attempts.iter().map(|a| a.number).collect();
    assert_eq!(numbers, [1, 2, 3]);
    assert_eq!(entry.dlq.worker.as_deref(), Some("billing-1"));
    assert_eq!(entry.status, EntryStatus::Pending);
    assert_eq!(
        dlq.stats().unwrap().by_error_kind["IllegalArgumentException"],
        1
    );
    assert_eq!(held(&queue), 0);

    // A person fixes the payload and replays it; it succeeds.
    let fixed = r#"{"orderId":"ORD-3"}"#;
    dlq.replay_corrected(ids[2], fixed, &ReplayOptions::to_origin().reset_attempts())
        .unwrap();
    assert_eq!(dlq.len().unwrap(), 0);
    let msg = lease_one(&queue);
    assert_eq!(msg.id(), ids[2], "the id is stable across the replay");
    assert_eq!(msg.payload(), fixed.as_bytes());
    assert_eq!(msg.attempt(), 1);
    process_order(msg.text().unwrap(), msg.attempt()).unwrap();
    queue.ack(&msg).unwrap();
    let stats = dlq.stats().unwrap();
    assert_eq!(
        (stats.total, stats.replayed, stats.reprocessed_ok),
        (0, 1, 1)
    );
    assert_eq!(held(&queue), 0);
}

/// (name, e-mail, plan).
const SUBSCRIBERS: [(&str, &str, &str); 7] = [
    ("Alice", "alice@email.com", "premium"),
    ("Bob", "bob@email.com", "free"),
    ("Charlie", "INVALID_EMAIL", "free"),
    ("Diana", "diana@email.com", "premium"),
    ("Eve", "", "free"),
    ("Frank", "frank@email.com", "business"),
    ("Grace", "bad@.com", "free"),
];
const WORKER: &str = "newsletter-1";
/// How long one send takes, as the failure reports say.
const SEND_MS: u64 = 200;
/// How long a DLQ entry is kept by default (30 days), on every backend.
const RETENTION_MS: u64 = 30 * 24 * 3600 * 1000;

fn subscriber(name: &str, email: &str, plan: &str) -> String {
    format!(r#"{{"email":"{email}","name":"{name}","plan":"{plan}"}}"#)
}

fn field<'a>(json: &'a str, key: &str) -> &'a str {
    let tag = format!(r#""{key}":""#);
    let start = json.find(&tag).expect("field") + tag.len();
    let len = json[start..].find('"').expect("closed string");
    &json[start..start + len]
}

fn send(json: &str, times_out: bool) -> Result<(), Failure> {
    let email = field(json, "email");
    let reason = match email.split_once('@') {
        _ if email.is_empty() => Some("the address is empty".to_string()),
        None => Some("there is no '@'".to_string()),
        Some((_, d)) if !d.contains('.') || d.starts_with('.') || d.ends_with('.') => {
            Some(format!("the domain '{d}' is not valid"))
        }
        Some(_) => None,
    };
    if let Some(reason) = reason {
        return Err(Failure::permanent(
            "ValidationError",
            format!("invalid e-mail address '{email}': {reason}"),
        )
        .with_context("step", "validate_address"));
    }
    if times_out {
        return Err(
            Failure::transient("TimeoutError", format!("timed out sending to {email}"))
                .with_context("step", "smtp_send"),
        );
    }
    Ok(())
}

#[derive(Debug, Default)]
struct Run {
    sent: Vec<String>,
    dead: Vec<String>,
    retried: Vec<String>,
}

/// Drains the queue until `expected` messages have an outcome that removes them. A retry
/// is asked for 200 ms times the attempt number, and becomes visible then (or just after
/// the report, had that time passed already).
fn run_pipeline<Q: MessageQueue>(
    queue: &Q,
    expected: usize,
    times_out: impl Fn(&str, u32) -> bool,
) -> Run {
    let mut run = Run::default();
    let give_up = Instant::now() + PATIENCE;
    while run.sent.len() + run.dead.len() < expected {
        assert!(Instant::now() < give_up, "the pipeline stalled: {run:?}");
        for msg in queue.lease_wait(10, Duration::from_secs(1)).unwrap() {
            let json = msg.text().unwrap().to_string();
            let name = field(&json, "name").to_string();
            match send(&json, times_out(&name, msg.attempt())) {
                Ok(()) => {
                    queue.ack(&msg).unwrap();
                    run.sent.push(name);
                }
                Err(failure) => {
                    let report = FailureReport::new(&failure)
                        .worker(WORKER)
                        .duration(Duration::from_millis(SEND_MS));
                    let retry_at = queue.now_ms() + 200 * msg.attempt() as u64;
                    match queue.retry(&msg, &report, retry_at).unwrap() {
                        FailureOutcome::DeadLettered => run.dead.push(name),
                        FailureOutcome::Retried { visible_at_ms } => {
                            let reported = queue.now_ms();
                            assert!(
                                (retry_at..=retry_at.max(reported + 1)).contains(&visible_at_ms),
                                "asked for {retry_at}, visible at {visible_at_ms}"
                            );
                            run.retried.push(name);
                        }
                    }
                }
            }
        }
    }
    run
}

/// The names of the subscribers in `entries`.
fn names(entries: &[DeadLetter]) -> Vec<String> {
    let name = |e: &DeadLetter| field(std::str::from_utf8(&e.payload).unwrap(), "name").to_string();
    entries.iter().map(name).collect()
}

/// Listing: filters on the error kind, a message substring and an attribute, and pages.
fn check_listing<D: DeadLetterQueue>(dlq: &D, [charlie, eve, grace]: [MessageId; 3]) {
    let list = |filter: &Filter, page| dlq.list(filter, page).unwrap();
    let validation = Filter::error_kind("ValidationError");
    let page1 = list(&validation, Page::first(2));
    assert_eq!(names(&page1), ["Charlie", "Eve"], "oldest first");
    assert_eq!(page1[1].id(), eve);
    assert_eq!(names(&list(&validation, Page::after(eve, 2))), ["Grace"]);
    assert!(list(&validation, Page::after(grace, 2)).is_empty());
    assert!(list(&Filter::error_kind("TimeoutError"), Page::first(10)).is_empty());

    let by_address = Filter::all().message_contains("bad@.com");
    assert_eq!(names(&list(&by_address, Page::first(10))), ["Grace"]);
    let no_at = Filter::error_kind("ValidationError").message_contains("no '@'");
    let found = list(&no_at, Page::first(10));
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].id(), charlie);
    let all_invalid = Filter::all().message_contains("invalid e-mail address");
    assert_eq!(list(&all_invalid, Page::first(10)).len(), 3);

    let free = Filter::all().attribute("plan", "free");
    assert_eq!(list(&free, Page::first(10)).len(), 3);
    let premium = Filter::all().attribute("plan", "premium");
    assert!(list(&premium, Page::first(10)).is_empty());
    assert_eq!(list(&Filter::all(), Page::first(1))[0].id(), charlie);
}

/// The DLQ's stats, whose ages must be those of its oldest entry (dead-lettered at
/// `oldest`) and its newest (at `newest`) by the clock readings around the call.
fn stats_aged<Q: MessageQueue>(queue: &Q, dlq: &Q::Dlq, oldest: u64, newest: u64) -> DlqStats {
    let before = queue.now_ms();
    let stats = dlq.stats().unwrap();
    let after = queue.now_ms();
    let age = |at: u64| before.saturating_sub(at)..=after.saturating_sub(at);
    let (o, n) = (stats.oldest_age_ms, stats.newest_age_ms);
    assert!(o.is_some_and(|o| age(oldest).contains(&o)), "{stats:?}");
    assert!(n.is_some_and(|n| age(newest).contains(&n)), "{stats:?}");
    stats
}

/// The newsletter scenario.
pub fn newsletter<B: TestBackend>(backend: &B) {
    let open = || backend.queue("newsletter", options(2, 30_000)).unwrap();
    let queue = open();
    let started = queue.now_ms();
    let mut ids = Vec::new();
    for (name, email, plan) in SUBSCRIBERS {
        let options = EnqueueOptions::new().attribute("plan", plan);
        let id = queue
            .enqueue_with(subscriber(name, email, plan), &options)
            .unwrap();
        ids.push(id);
    }
    let id_of = |name: &str| ids[SUBSCRIBERS.iter().position(|s| s.0 == name).unwrap()];
    let (charlie, eve, grace) = (id_of("Charlie"), id_of("Eve"), id_of("Grace"));

    // The first run: Diana's first send times out and is retried after its backoff.
    let run = run_pipeline(&queue, 7, |name, attempt| name == "Diana" && attempt == 1);
    assert_eq!(run.sent, ["Alice", "Bob", "Frank", "Diana"]);
    assert_eq!(run.dead, ["Charlie", "Eve", "Grace"]);
    assert_eq!(run.retried, ["Diana"]);
    let finished = queue.now_ms();
    let qs = queue.stats().unwrap();
    assert_eq!(
        (
            qs.counts.enqueued,
            qs.counts.acked,
            qs.counts.retried,
            qs.counts.dead_lettered
        ),
        (7, 4, 1, 3)
    );
    assert_eq!((qs.counts.ready + qs.counts.in_flight, qs.dlq_size), (0, 3));

    let dlq = queue.dlq();
    assert_eq!(dlq.name(), "newsletter-dlq");
    let entry = dlq.get(charlie).unwrap();
    let dead_at = [charlie, eve, grace].map(|id| dlq.get(id).unwrap().dlq.dead_lettered_at_ms);
    assert!(dead_at.windows(2).all(|w| w[0] <= w[1]), "{dead_at:?}");
    let stats = stats_aged(&queue, &dlq, dead_at[0], dead_at[2]);
    assert_eq!((stats.total, stats.pending, stats.reprocessed), (3, 3, 0));
    assert_eq!((stats.reprocessed_ok, stats.reprocessed_failed), (0, 0));
    assert_eq!(stats.by_error_kind.len(), 1);
    assert_eq!(stats.by_error_kind["ValidationError"], 3);
    assert_eq!(stats.by_worker[WORKER], 3);

    // Oldest first.
    let listed = dlq.list(&Filter::all(), Page::first(10)).unwrap();
    let listed_ids: Vec<_> = listed.iter().map(|e| e.id()).collect();
    assert_eq!(listed_ids, [charlie, eve, grace]);
    assert_eq!(dlq.ids(&Filter::all(), None).unwrap(), listed_ids);
    check_listing(&dlq, [charlie, eve, grace]);

    // The whole envelope.
    assert_eq!(
        entry.payload,
        subscriber("Charlie", "INVALID_EMAIL", "free").as_bytes()
    );
    assert_eq!(entry.replaced_payload, None);
    assert_eq!(entry.metadata.id, charlie);
    assert_eq!(entry.metadata.queue, "newsletter");
    assert!((started..=finished).contains(&entry.metadata.enqueued_at_ms));
    let received = entry
        .metadata
        .first_received_at_ms
        .expect("first delivery time");
    assert!((entry.metadata.enqueued_at_ms..=dead_at[0]).contains(&received));
    assert_eq!(entry.metadata.delivery_count, 1, "permanent: no retry");
    assert_eq!(entry.metadata.attributes["plan"], "free");
    assert_eq!(entry.failure.error_kind, "ValidationError");
    assert_eq!(
        entry.failure.error_message,
        "invalid e-mail address 'INVALID_EMAIL': there is no '@'"
    );
    assert_eq!(entry.failure.context["step"], "validate_address");
    assert_eq!(entry.failure.attempts.len(), 1);
    let attempt = &entry.failure.attempts[0];
    assert_eq!((attempt.number, attempt.duration_ms), (1, SEND_MS));
    assert_eq!(attempt.at_ms, dead_at[0]);
    assert_eq!(attempt.worker.as_deref(), Some(WORKER));
    assert_eq!(attempt.error_kind, "ValidationError");
    assert!((started..=finished).contains(&dead_at[0]));
    assert_eq!(entry.failure.failed_at_ms, dead_at[0]);
    assert_eq!(entry.dlq.worker.as_deref(), Some(WORKER));
    assert_eq!(entry.dlq.expires_at_ms, Some(dead_at[0] + RETENTION_MS));
    assert_eq!(entry.generation, 0);
    assert_eq!(entry.status, EntryStatus::Pending);
    assert_eq!(entry.dlq_name, "newsletter-dlq");
    assert_eq!(
        dlq.get(grace).unwrap().failure.error_message,
        "invalid e-mail address 'bad@.com': the domain '.com' is not valid"
    );
    assert_eq!(
        dlq.get(eve).unwrap().failure.error_message,
        "invalid e-mail address '': the address is empty"
    );
    // Delivered messages are not in the DLQ.
    assert!(matches!(dlq.get(id_of("Alice")), Err(Error::NotFound(_))));
    assert!(matches!(dlq.get(id_of("Diana")), Err(Error::NotFound(_))));

    // One pattern: three validation errors with different addresses, all on the free plan.
    let a = dlq.analyze(&Filter::all()).unwrap();
    assert_eq!((a.total, a.average_attempts), (3, 1.0));
    assert_eq!(a.by_error_kind["ValidationError"], 3);
    assert_eq!(a.by_worker[WORKER], 3);
    assert_eq!(a.time_range, Some((dead_at[0], dead_at[2])));
    let mut by_hour = [0u64; 24];
    for at in dead_at {
        by_hour[((at / 3_600_000) % 24) as usize] += 1;
    }
    assert_eq!(a.by_hour_of_day, by_hour);
    assert_eq!(a.patterns.len(), 1);
    let p = &a.patterns[0];
    assert_eq!((p.error_kind.as_str(), p.count), ("ValidationError", 3));
    assert_eq!((p.first_ms, p.last_ms), (dead_at[0], dead_at[2]));
    assert_eq!(p.workers, BTreeSet::from([WORKER.to_string()]));
    assert_eq!(p.common_messages.len(), 3, "three different addresses");
    assert!(p.common_messages.iter().all(|(_, n)| *n == 1));
    assert_eq!(
        p.common_context[..2],
        [
            ("plan=free".to_string(), 3),
            ("step=validate_address".to_string(), 3)
        ]
    );
    // Browsing changed nothing.
    assert_eq!(counts(dlq.stats().unwrap()), counts(stats.clone()));

    // Reopened, and the DLQ opened by its name: the same envelopes, the same counts.
    drop((dlq, queue));
    backend.reopen().unwrap();
    let queue = open();
    let dlq = backend.dlq("newsletter-dlq").unwrap();
    let reopened = stats_aged(&queue, &dlq, dead_at[0], dead_at[2]);
    assert_eq!(counts(reopened), counts(stats));
    assert_eq!(dlq.list(&Filter::all(), Page::first(10)).unwrap(), listed);
    assert_eq!(dlq.get(charlie).unwrap(), entry);
    check_listing(&dlq, [charlie, eve, grace]);
    assert_eq!(held(&queue), 0);

    // The fix: Charlie corrected and replayed, Grace replayed as is (her domain is still
    // wrong), Eve handled by hand outside the queue, which fails, and marked.
    let corrected = subscriber("Charlie", "charlie@email.com", "free");
    let reset = ReplayOptions::to_origin().reset_attempts();
    let fixing = queue.now_ms();
    dlq.replay_corrected(charlie, &corrected, &reset).unwrap();
    dlq.replay_one(grace, &reset).unwrap();
    let eve_entry = dlq.get(eve).unwrap();
    assert!(
        send(std::str::from_utf8(&eve_entry.payload).unwrap(), false)
            .unwrap_err()
            .is_permanent()
    );
    let marking = queue.now_ms();
    dlq.mark_reprocessed(eve, false).unwrap();
    let marked = queue.now_ms();
    // An entry already reprocessed is not replayed again unless forced.
    assert!(matches!(
        dlq.replay_one(eve, &ReplayOptions::to_origin()),
        Err(Error::AlreadyReprocessed(id)) if id == eve
    ));
    assert!(matches!(
        dlq.replay_one(charlie, &reset),
        Err(Error::NotFound(_))
    ));
    let mid = dlq.stats().unwrap();
    assert_eq!(
        (mid.total, mid.pending, mid.reprocessed, mid.replayed),
        (1, 0, 1, 2)
    );
    assert_eq!((mid.reprocessed_ok, mid.reprocessed_failed), (0, 1));

    // The replay run, with the same handler and no timeouts.
    let run = run_pipeline(&queue, 2, |_, _| false);
    assert_eq!(run.sent, ["Charlie"]);
    assert_eq!(run.dead, ["Grace"]);
    assert!(run.retried.is_empty());
    let done = queue.now_ms();

    let replays = if backend.counts_replays_as_enqueued() {
        2
    } else {
        0
    };
    let check_final = |dlq: &DlqOf<B>, queue: &B::Queue| {
        let s = dlq.stats().unwrap();
        assert_eq!(s.reprocessed_ok, 1, "Charlie, corrected and delivered");
        assert_eq!(
            s.reprocessed_failed, 2,
            "Grace failed again; Eve failed by hand"
        );
        assert_eq!((s.total, s.pending, s.reprocessed), (2, 1, 1));
        assert_eq!(s.replayed, 2);
        assert_eq!(s.by_error_kind["ValidationError"], 2);
        // Charlie left the DLQ for good, keeping his id through the replay.
        assert!(matches!(dlq.get(charlie), Err(Error::NotFound(_))));
        // Grace is back, a second-generation entry with her original bytes.
        let g = dlq.get(grace).unwrap();
        assert_eq!((g.generation, g.status), (1, EntryStatus::Pending));
        assert_eq!(
            g.payload,
            subscriber("Grace", "bad@.com", "free").as_bytes()
        );
        assert!((fixing..=done).contains(&g.dlq.dead_lettered_at_ms));
        assert_eq!(g.metadata.delivery_count, 1, "her attempts were reset");
        // Eve stays, marked as reprocessed without success.
        match dlq.get(eve).unwrap().status {
            EntryStatus::Reprocessed { success, at_ms } => {
                assert!(!success);
                assert!((marking..=marked).contains(&at_ms));
            }
            other => panic!("Eve is {other:?}"),
        }
        let pending = dlq
            .list(&Filter::all().pending_only(), Page::first(10))
            .unwrap();
        assert_eq!(names(&pending), ["Grace"]);
        let qs = queue.stats().unwrap();
        assert_eq!(
            (qs.counts.enqueued, qs.counts.acked, qs.counts.dead_lettered),
            (7 + replays, 5, 4)
        );
        assert_eq!(held(queue), 0);
        counts(s)
    };
    let final_stats = check_final(&dlq, &queue);

    // Across another reopen.
    drop((dlq, queue));
    backend.reopen().unwrap();
    let queue = open();
    assert_eq!(check_final(&queue.dlq(), &queue), final_stats);
}
