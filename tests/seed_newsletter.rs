//! The newsletter scenario of the "DLQ in pure Python" post, on the raw queue API.
//!
//! Seven subscribers get a newsletter; three of them have addresses that cannot be valid
//! (Charlie: `INVALID_EMAIL`, Eve: empty, Grace: `bad@.com`). The send handler validates the
//! address: an invalid one is a permanent `ValidationError` (retrying cannot fix it, so it
//! goes to the DLQ at once), while a send that times out is a transient `TimeoutError`,
//! retried after a backoff (the post allows 2 attempts, 0.5 s times the attempt number).
//! Here Diana's first send times out (the post's random 10 % timeout, made deterministic).
//!
//! The post's first check lets `bad@.com` through although its own comment says it must
//! fail; its replay script has the stricter domain rule (no leading or trailing dot), which
//! this test uses from the start, so all three land in the DLQ as the post intends.
//!
//! Then the DLQ is inspected (stats, filtered and paged listing, get, failure analysis),
//! the store is closed and reopened, and the entries are dealt with as after a fix:
//! Charlie's address is corrected and replayed (it is delivered: reprocessed ok), Grace is
//! replayed unchanged and fails again (reprocessed failed), and Eve, who has no address at
//! all, is handled by hand outside the queue as the post's manual replay does, which fails
//! and is recorded with `mark_reprocessed`. The final counts survive another reopen.

mod common;

use std::collections::BTreeSet;

use common::T0;
use deadletter::{
    Clock, Config, DlqStats, EnqueueOptions, EntryStatus, Error, Failure, FailureOutcome,
    FailureReport, Filter, ManualClock, Page, Queue, QueueOptions, ReplayOptions, Store,
};

/// 2023-11-14 22:13:20 UTC.
/// How long one send takes on the manual clock.
const SEND_MS: u64 = 200;
/// The post's retry delay: 0.5 s times the attempt number.
const BACKOFF_MS: u64 = 500;
const WORKER: &str = "newsletter-1";

/// (name, e-mail, plan), as in the post.
const SUBSCRIBERS: [(&str, &str, &str); 7] = [
    ("Alice", "alice@email.com", "premium"),
    ("Bob", "bob@email.com", "free"),
    ("Charlie", "INVALID_EMAIL", "free"),
    ("Diana", "diana@email.com", "premium"),
    ("Eve", "", "free"),
    ("Frank", "frank@email.com", "business"),
    ("Grace", "bad@.com", "free"),
];

fn payload(name: &str, email: &str, plan: &str) -> String {
    format!(r#"{{"email":"{email}","name":"{name}","plan":"{plan}"}}"#)
}

/// The string value of `key` in the flat JSON objects built by [`payload`].
fn field<'a>(json: &'a str, key: &str) -> &'a str {
    let tag = format!(r#""{key}":""#);
    let start = json.find(&tag).expect("field present") + tag.len();
    let len = json[start..].find('"').expect("closed string");
    &json[start..start + len]
}

/// Why an address cannot receive mail, if it cannot.
fn invalid_reason(email: &str) -> Option<String> {
    if email.is_empty() {
        return Some("the address is empty".into());
    }
    let Some((_, domain)) = email.split_once('@') else {
        return Some("there is no '@'".into());
    };
    if !domain.contains('.') || domain.starts_with('.') || domain.ends_with('.') {
        return Some(format!("the domain '{domain}' is not valid"));
    }
    None
}

/// The send handler. Invalid addresses are permanent failures; `times_out` simulates a
/// transient timeout of the mail server for this send.
fn send(json: &str, times_out: bool) -> Result<(), Failure> {
    let email = field(json, "email");
    if let Some(reason) = invalid_reason(email) {
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

/// What one pipeline run did.
#[derive(Debug, Default)]
struct Run {
    /// Names sent to, in order.
    sent: Vec<String>,
    /// Names dead-lettered, in order.
    dead: Vec<String>,
    /// Names retried, in order.
    retried: Vec<String>,
}

/// Drains the queue: lease, send, ack or report the failure (the queue classifies it).
fn run_pipeline(queue: &Queue, clock: &ManualClock, times_out: impl Fn(&str, u32) -> bool) -> Run {
    let mut run = Run::default();
    loop {
        let batch = queue.lease(10).unwrap();
        if batch.is_empty() {
            if queue.is_empty() {
                return run;
            }
            clock.advance(100);
            continue;
        }
        for msg in batch {
            let json = msg.text().unwrap().to_string();
            let name = field(&json, "name").to_string();
            clock.advance(SEND_MS);
            match send(&json, times_out(&name, msg.attempt())) {
                Ok(()) => {
                    queue.ack(&msg).unwrap();
                    run.sent.push(name);
                }
                Err(failure) => {
                    let report = FailureReport::new(&failure)
                        .worker(WORKER)
                        .duration(std::time::Duration::from_millis(SEND_MS));
                    let retry_at = clock.now_ms() + BACKOFF_MS * msg.attempt() as u64;
                    match queue.retry(&msg, &report, retry_at).unwrap() {
                        FailureOutcome::DeadLettered => run.dead.push(name),
                        FailureOutcome::Retried { visible_at_ms } => {
                            assert_eq!(visible_at_ms, retry_at);
                            run.retried.push(name);
                        }
                    }
                }
            }
        }
    }
}

fn open(dir: &std::path::Path, config: &Config) -> (Store, Queue) {
    let store = Store::open(dir, config.clone()).unwrap();
    let options = QueueOptions::default().max_attempts(2);
    let queue = store.queue_with("newsletter", options).unwrap();
    (store, queue)
}

fn names(entries: &[deadletter::DeadLetter]) -> Vec<String> {
    entries
        .iter()
        .map(|e| field(std::str::from_utf8(&e.payload).unwrap(), "name").to_string())
        .collect()
}

#[test]
fn newsletter_scenario() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let config = Config::default().clock(clock.clone());
    let (store, queue) = open(dir.path(), &config);

    // Enqueue the seven subscribers, with their plan as an attribute.
    let mut ids = Vec::new();
    for (name, email, plan) in SUBSCRIBERS {
        let options = EnqueueOptions::new().attribute("plan", plan);
        ids.push(
            queue
                .enqueue_with(payload(name, email, plan), &options)
                .unwrap(),
        );
    }
    let id_of = |name: &str| ids[SUBSCRIBERS.iter().position(|s| s.0 == name).unwrap()];
    let (charlie, eve, grace) = (id_of("Charlie"), id_of("Eve"), id_of("Grace"));

    // The first run: Diana's first send times out and is retried after its backoff.
    let run = run_pipeline(&queue, &clock, |name, attempt| {
        name == "Diana" && attempt == 1
    });
    assert_eq!(run.sent, ["Alice", "Bob", "Frank", "Diana"]);
    assert_eq!(run.dead, ["Charlie", "Eve", "Grace"]);
    assert_eq!(run.retried, ["Diana"]);
    let qs = queue.stats();
    assert_eq!(
        (
            qs.enqueued,
            qs.acked,
            qs.retried,
            qs.dead_lettered,
            qs.ready,
            qs.in_flight,
            qs.dlq_size
        ),
        (7, 4, 1, 3, 0, 0, 3)
    );
    // One lease at T0 served all seven; the sends took 200 ms each, so Charlie, Eve and
    // Grace (3rd, 5th, 7th) failed at these times.
    let dead_at = [T0 + 3 * SEND_MS, T0 + 5 * SEND_MS, T0 + 7 * SEND_MS];

    // Inspect a minute after the run.
    clock.set(T0 + 60_000);
    let dlq = queue.dlq();
    assert_eq!(dlq.name(), "newsletter-dlq");
    let stats = dlq.stats();
    assert_eq!(stats.total, 3);
    assert_eq!(stats.pending, 3);
    assert_eq!(
        (
            stats.reprocessed,
            stats.reprocessed_ok,
            stats.reprocessed_failed
        ),
        (0, 0, 0)
    );
    assert_eq!(stats.by_error_kind.len(), 1);
    assert_eq!(stats.by_error_kind["ValidationError"], 3);
    assert_eq!(stats.by_worker[WORKER], 3);
    assert_eq!(stats.oldest_age_ms, Some(T0 + 60_000 - dead_at[0]));
    assert_eq!(stats.newest_age_ms, Some(T0 + 60_000 - dead_at[2]));

    check_listing(&dlq, [charlie, eve, grace]);

    // Get by id: the whole envelope.
    let entry = dlq.get(charlie).unwrap();
    assert_eq!(
        entry.payload,
        payload("Charlie", "INVALID_EMAIL", "free").as_bytes()
    );
    assert_eq!(entry.replaced_payload, None);
    assert_eq!(entry.metadata.id, charlie);
    assert_eq!(entry.metadata.queue, "newsletter");
    assert_eq!(entry.metadata.enqueued_at_ms, T0);
    assert_eq!(entry.metadata.first_received_at_ms, Some(T0));
    assert_eq!(entry.metadata.delivery_count, 1, "permanent: no retry");
    assert_eq!(entry.metadata.attributes["plan"], "free");
    assert_eq!(entry.failure.error_kind, "ValidationError");
    assert_eq!(
        entry.failure.error_message,
        "invalid e-mail address 'INVALID_EMAIL': there is no '@'"
    );
    assert_eq!(entry.failure.context["step"], "validate_address");
    assert_eq!(entry.failure.failed_at_ms, dead_at[0]);
    assert_eq!(entry.failure.attempts.len(), 1);
    let attempt = &entry.failure.attempts[0];
    assert_eq!(
        (attempt.number, attempt.at_ms, attempt.duration_ms),
        (1, dead_at[0], SEND_MS)
    );
    assert_eq!(attempt.worker.as_deref(), Some(WORKER));
    assert_eq!(entry.dlq.dead_lettered_at_ms, dead_at[0]);
    assert_eq!(entry.dlq.worker.as_deref(), Some(WORKER));
    assert_eq!(
        entry.dlq.expires_at_ms,
        Some(dead_at[0] + 30 * 24 * 3600 * 1000)
    );
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

    // Analysis: one pattern of three validation errors, all on the free plan.
    let a = dlq.analyze(&Filter::all()).unwrap();
    assert_eq!(a.total, 3);
    assert_eq!(a.by_error_kind["ValidationError"], 3);
    assert_eq!(a.by_worker[WORKER], 3);
    assert_eq!(a.average_attempts, 1.0);
    assert_eq!(a.time_range, Some((dead_at[0], dead_at[2])));
    assert_eq!(a.by_hour_of_day[((T0 / 3_600_000) % 24) as usize], 3);
    assert_eq!(a.by_hour_of_day.iter().sum::<u64>(), 3);
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
    assert_eq!(dlq.stats(), stats);

    // Close and reopen: the same DLQ, the same envelopes, the same counts.
    let before_entries = dlq.list(&Filter::all(), Page::first(10)).unwrap();
    drop((dlq, queue));
    store.close().unwrap();
    let (store, queue) = open(dir.path(), &config);
    let dlq = store.dlq("newsletter-dlq").unwrap();
    assert_eq!(dlq.stats(), stats);
    assert_eq!(
        dlq.list(&Filter::all(), Page::first(10)).unwrap(),
        before_entries
    );
    assert_eq!(dlq.get(charlie).unwrap(), entry);
    check_listing(&dlq, [charlie, eve, grace]);
    assert!(queue.is_empty());

    // The fix. Charlie's address is corrected by hand and replayed; Grace is replayed as is
    // (her domain is still wrong); Eve has no address, so her newsletter is handled outside
    // the queue, as the post's manual replay does: the check fails, and that is recorded.
    clock.set(T0 + 3_600_000);
    let corrected = payload("Charlie", "charlie@email.com", "free");
    dlq.replay_corrected(
        charlie,
        &corrected,
        &ReplayOptions::to_origin().reset_attempts(),
    )
    .unwrap();
    dlq.replay_one(grace, &ReplayOptions::to_origin().reset_attempts())
        .unwrap();
    let eve_entry = dlq.get(eve).unwrap();
    let manual = send(std::str::from_utf8(&eve_entry.payload).unwrap(), false);
    assert!(manual.unwrap_err().is_permanent());
    dlq.mark_reprocessed(eve, false).unwrap();
    // An entry already reprocessed is not replayed again unless forced.
    assert!(matches!(
        dlq.replay_one(eve, &ReplayOptions::to_origin()),
        Err(Error::AlreadyReprocessed(id)) if id == eve
    ));
    let mid = dlq.stats();
    assert_eq!(
        (mid.total, mid.pending, mid.reprocessed, mid.replayed),
        (1, 0, 1, 2)
    );
    assert_eq!(mid.reprocessed_failed, 1);

    // The replay run, with the same handler and no timeouts.
    let run = run_pipeline(&queue, &clock, |_, _| false);
    assert_eq!(run.sent, ["Charlie"]);
    assert_eq!(run.dead, ["Grace"]);
    assert!(run.retried.is_empty());

    let check_final = |dlq: &deadletter::Dlq, queue: &Queue| {
        let s = dlq.stats();
        assert_eq!(s.reprocessed_ok, 1, "Charlie, corrected and delivered");
        assert_eq!(
            s.reprocessed_failed, 2,
            "Grace failed again; Eve failed by hand"
        );
        assert_eq!((s.total, s.pending, s.reprocessed), (2, 1, 1));
        assert_eq!(s.replayed, 2);
        assert_eq!(s.by_error_kind["ValidationError"], 2);
        let final_stats: DlqStats = s;
        // Charlie left the DLQ for good, keeping his id through the replay.
        assert!(matches!(dlq.get(charlie), Err(Error::NotFound(_))));
        // Grace is back, a second-generation entry with her original bytes.
        let g = dlq.get(grace).unwrap();
        assert_eq!(g.generation, 1);
        assert_eq!(g.status, EntryStatus::Pending);
        assert_eq!(g.payload, payload("Grace", "bad@.com", "free").as_bytes());
        assert_eq!(g.dlq.dead_lettered_at_ms, T0 + 3_600_000 + SEND_MS * 2);
        assert_eq!(g.metadata.delivery_count, 1);
        // Eve stays, marked as reprocessed without success.
        let e = dlq.get(eve).unwrap();
        assert_eq!(
            e.status,
            EntryStatus::Reprocessed {
                success: false,
                at_ms: T0 + 3_600_000
            }
        );
        let pending = dlq
            .list(&Filter::all().pending_only(), Page::first(10))
            .unwrap();
        assert_eq!(names(&pending), ["Grace"]);
        let qs = queue.stats();
        assert_eq!((qs.enqueued, qs.acked, qs.dead_lettered), (7, 5, 4));
        assert!(queue.is_empty());
        final_stats
    };
    let final_stats = check_final(&dlq, &queue);

    // Across another close and reopen.
    drop((dlq, queue));
    store.close().unwrap();
    let (store, queue) = open(dir.path(), &config);
    let dlq = queue.dlq();
    assert_eq!(check_final(&dlq, &queue), final_stats);
    drop((dlq, queue));
    store.close().unwrap();
}

/// Listing: filters on the error kind and on a message substring, and paging.
fn check_listing(dlq: &deadletter::Dlq, [charlie, eve, grace]: [u64; 3]) {
    let validation = Filter::error_kind("ValidationError");
    let page1 = dlq.list(&validation, Page::first(2)).unwrap();
    assert_eq!(names(&page1), ["Charlie", "Eve"], "oldest first");
    assert_eq!(page1[1].id(), eve);
    let page2 = dlq.list(&validation, Page::after(eve, 2)).unwrap();
    assert_eq!(names(&page2), ["Grace"]);
    assert!(dlq
        .list(&validation, Page::after(grace, 2))
        .unwrap()
        .is_empty());
    assert!(dlq
        .list(&Filter::error_kind("TimeoutError"), Page::first(10))
        .unwrap()
        .is_empty());

    let by_address = Filter::all().message_contains("bad@.com");
    assert_eq!(
        names(&dlq.list(&by_address, Page::first(10)).unwrap()),
        ["Grace"]
    );
    let no_at = Filter::error_kind("ValidationError").message_contains("no '@'");
    let found = dlq.list(&no_at, Page::first(10)).unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].id(), charlie);
    let all_invalid = Filter::all().message_contains("invalid e-mail address");
    assert_eq!(dlq.list(&all_invalid, Page::first(10)).unwrap().len(), 3);

    let free = Filter::all().attribute("plan", "free");
    assert_eq!(dlq.list(&free, Page::first(10)).unwrap().len(), 3);
    let premium = Filter::all().attribute("plan", "premium");
    assert!(dlq.list(&premium, Page::first(10)).unwrap().is_empty());
    assert_eq!(dlq.peek(1).unwrap()[0].id(), charlie);
}

/// Regression: after a reopen, one lease handed the same message out twice when it was
/// ready again (its lease released by the reopen, or a replay from the DLQ), because
/// replaying the log left its enqueue-time entry in the queue's ready list next to the
/// entry that made it ready again.
#[test]
fn regression_reopen_does_not_deliver_a_message_twice() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let config = Config::fast().clock(clock.clone());
    let open = |dir: &std::path::Path| {
        let store = Store::open(dir, config.clone()).unwrap();
        let queue = store
            .queue_with("newsletter", QueueOptions::default())
            .unwrap();
        (store, queue)
    };
    let (store, queue) = open(dir.path());
    let a = queue
        .enqueue(payload("Alice", "alice@email.com", "premium"))
        .unwrap();
    let b = queue.enqueue(payload("Grace", "bad@.com", "free")).unwrap();
    let c = queue
        .enqueue(payload("Bob", "bob@email.com", "free"))
        .unwrap();
    let leased = queue.lease(3).unwrap();
    assert_eq!(leased.len(), 3);
    // a: left leased (the process "dies"); b: dead-lettered; c: retried twice at once.
    let failure = send(leased[1].text().unwrap(), false).unwrap_err();
    queue
        .dead_letter(&leased[1], &FailureReport::new(&failure))
        .unwrap();
    let timeout = Failure::transient("TimeoutError", "timed out sending to bob@email.com");
    queue
        .retry(&leased[2], &FailureReport::new(&timeout), 0)
        .unwrap();
    // A retry "at once" is visible one millisecond later, behind what already waits.
    clock.advance(1);
    let again = queue.lease(3).unwrap();
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].id(), c);
    let outcome = queue
        .retry(&again[0], &FailureReport::new(&timeout), 0)
        .unwrap();
    assert_eq!(
        outcome,
        FailureOutcome::Retried {
            visible_at_ms: T0 + 2
        }
    );
    drop((leased, again, queue));
    store.close().unwrap();

    let (store, queue) = open(dir.path());
    queue
        .dlq()
        .replay_one(b, &ReplayOptions::to_origin())
        .unwrap();
    clock.advance(1);
    let got: Vec<u64> = queue.lease(10).unwrap().iter().map(|m| m.id()).collect();
    assert_eq!(
        got,
        [a, b, c],
        "each message exactly once, in (visible-at, id) order"
    );
    assert!(queue.lease(10).unwrap().is_empty());
    let qs = queue.stats();
    assert_eq!((qs.ready, qs.in_flight), (0, 3));
    drop(queue);
    store.close().unwrap();
}
