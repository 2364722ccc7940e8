//! The DLQ: the envelope, browsing, filters and pages, replay rules, counters, delete and
//! purge, analysis and alerts.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use deadletter::dlq::{Cursor, DeadLetter, DlqAlert, EntryStatus};
use deadletter::queue::{EnqueueOptions, FailureOutcome, FailureReport, MessageId};
use deadletter::{
    DeadLetterQueue, Delivery, Error, Failure, Filter, MessageQueue, Page, ReplayOptions,
};

use crate::delivery::fail_permanently;
use crate::support::{counts, eventually, fail, held, lease_n, lease_one};
use crate::{options, TestBackend};

/// Enqueues `payloads` and dead-letters each one at once: kind `kinds[i % len]`, worker
/// `worker-{i % 2}`. Returns the ids in order.
fn dead_entries<Q: MessageQueue>(queue: &Q, payloads: &[&str], kinds: &[&str]) -> Vec<MessageId> {
    let ids = queue.enqueue_batch(payloads).unwrap();
    for (i, msg) in lease_n(queue, payloads.len()).iter().enumerate() {
        assert_eq!(msg.id(), ids[i]);
        fail_permanently(
            queue,
            msg,
            kinds[i % kinds.len()],
            &format!("worker-{}", i % 2),
        );
    }
    ids
}

/// The envelope keeps the payload byte for byte, the metadata, the failure with its
/// context and details, every attempt, the worker and the tags.
pub fn envelope_keeps_everything<B: TestBackend>(backend: &B) {
    let queue = backend.queue("envelope", options(3, 30_000)).unwrap();
    let bytes: Vec<u8> = vec![0, 159, 146, 150, 255, b'\n', 0];
    let big: Vec<u8> = (0..65_536u32).map(|i| (i * 31 % 251) as u8).collect();
    let options = EnqueueOptions::new()
        .attribute("tenant", "acme")
        .attribute("region", "eu");
    let before = queue.now_ms();
    let id = queue.enqueue_with(&bytes, &options).unwrap();
    let big_id = queue.enqueue(&big).unwrap();

    let first = lease_n(&queue, 2);
    assert_eq!(first[0].payload(), &bytes[..]);
    assert_eq!(first[0].attributes()["tenant"], "acme");
    assert!(first[0].enqueued_at_ms() >= before);
    let timeout = Failure::transient("Timeout", "upstream did not answer").with_details("503");
    fail(&queue, &first[0], &timeout, "w-1", Duration::ZERO);
    let invalid = Failure::permanent("Invalid", "field x is missing")
        .with_details("schema v2")
        .with_context("step", "parse")
        .with_context("order", "ORD-9");
    queue
        .dead_letter(&first[1], &FailureReport::new(&invalid).worker("w-big"))
        .unwrap();

    let second = lease_one(&queue);
    assert_eq!((second.id(), second.attempt()), (id, 2));
    let report = FailureReport::new(&invalid)
        .worker("w-2")
        .duration(Duration::from_millis(42))
        .tag("team", "billing");
    assert_eq!(
        queue.retry(&second, &report, queue.now_ms()).unwrap(),
        FailureOutcome::DeadLettered,
        "a permanent failure skips the remaining attempts"
    );
    let after = queue.now_ms();
    assert_eq!(held(&queue), 0);

    let dlq = queue.dlq();
    assert_eq!(dlq.len().unwrap(), 2);
    let e = dlq.get(id).unwrap();
    assert_eq!(e.payload, bytes);
    assert_eq!(e.id(), id);
    assert_eq!(e.metadata.queue, "envelope");
    assert_eq!(e.metadata.delivery_count, 2);
    assert_eq!(
        e.metadata.attributes,
        BTreeMap::from([
            ("region".to_string(), "eu".to_string()),
            ("tenant".to_string(), "acme".to_string())
        ])
    );
    let received = e.metadata.first_received_at_ms.unwrap();
    assert!(before <= e.metadata.enqueued_at_ms && e.metadata.enqueued_at_ms <= received);
    assert!(received <= e.dlq.dead_lettered_at_ms && e.dlq.dead_lettered_at_ms <= after);
    let f = &e.failure;
    assert_eq!(
        (f.error_kind.as_str(), f.error_message.as_str()),
        ("Invalid", "field x is missing")
    );
    assert_eq!(f.details.as_deref(), Some("schema v2"));
    assert_eq!(f.context["step"], "parse");
    assert_eq!(f.context["order"], "ORD-9");
    assert_eq!(f.attempts.len(), 2);
    assert_eq!(f.attempts_dropped, 0);
    let a1 = &f.attempts[0];
    assert_eq!((a1.number, a1.error_kind.as_str()), (1, "Timeout"));
    assert_eq!(a1.details.as_deref(), Some("503"));
    assert_eq!(a1.worker.as_deref(), Some("w-1"));
    let a2 = &f.attempts[1];
    assert_eq!((a2.number, a2.error_kind.as_str()), (2, "Invalid"));
    assert_eq!((a2.duration_ms, a2.worker.as_deref()), (42, Some("w-2")));
    assert!(a1.at_ms <= a2.at_ms);
    assert_eq!(e.dlq.worker.as_deref(), Some("w-2"));
    assert_eq!(e.dlq.tags["team"], "billing");
    assert_eq!(e.generation, 0);
    assert_eq!(e.status, EntryStatus::Pending);
    assert_eq!(e.dlq_name, "envelope-dlq");
    assert_eq!(dlq.get(id).unwrap(), e, "a get changes nothing");

    let b = dlq.get(big_id).unwrap();
    assert_eq!(b.payload, big);
    assert_eq!(b.metadata.delivery_count, 1);
    assert_eq!(b.failure.attempts.len(), 1);
    assert_eq!(b.dlq.worker.as_deref(), Some("w-big"));
}

/// Listing, getting, counting and analysing twice gives the same answers and moves
/// nothing.
pub fn browse_has_no_side_effects<B: TestBackend>(backend: &B) {
    let queue = backend.queue("browse", options(3, 30_000)).unwrap();
    let ids = dead_entries(&queue, &["a", "b", "c", "d", "e"], &["K1", "K2"]);
    queue.enqueue("still waiting").unwrap();
    let dlq = queue.dlq();
    let look = || {
        (
            counts(dlq.stats().unwrap()),
            dlq.list(&Filter::all(), Page::first(100)).unwrap(),
            ids.iter()
                .map(|&id| dlq.get(id).unwrap())
                .collect::<Vec<_>>(),
            dlq.ids(&Filter::error_kind("K1"), None).unwrap(),
            dlq.analyze(&Filter::all()).unwrap(),
            dlq.len().unwrap(),
            held(&queue),
        )
    };
    let first = look();
    let second = look();
    assert_eq!(first, second);
    assert_eq!(first.5, 5);
    assert_eq!(first.6, 1);
    assert_eq!(first.3, [ids[0], ids[2], ids[4]]);
    assert_eq!(first.1.iter().map(DeadLetter::id).collect::<Vec<_>>(), ids);
    // The waiting message is still deliverable, on its first attempt.
    let msg = lease_one(&queue);
    assert_eq!((msg.text(), msg.attempt()), (Some("still waiting"), 1));
    queue.ack(&msg).unwrap();
}

/// Every filter field, and pages that cover a listing exactly once.
pub fn filters_and_pages<B: TestBackend>(backend: &B) {
    let queue = backend.queue("filters", options(3, 30_000)).unwrap();
    // Two entries dead-lettered on their second attempt, with attributes and tags.
    let with_attr = EnqueueOptions::new().attribute("plan", "gold");
    let gold = queue.enqueue_with("gold-1", &with_attr).unwrap();
    let first = lease_one(&queue);
    fail(
        &queue,
        &first,
        &Failure::transient("Slow", "took too long"),
        "w-a",
        Duration::ZERO,
    );
    let again = lease_one(&queue);
    assert_eq!(again.id(), gold);
    let tagged = Failure::permanent("Slow", "gave up on the slow one");
    queue
        .dead_letter(
            &again,
            &FailureReport::new(&tagged).worker("w-a").tag("team", "ops"),
        )
        .unwrap();
    let ids = dead_entries(&queue, &["p", "q", "r", "s"], &["K1", "K2"]);
    let dlq = queue.dlq();
    let ids_of = |f: &Filter| dlq.ids(f, None).unwrap();

    assert_eq!(ids_of(&Filter::all()).len(), 5);
    assert_eq!(ids_of(&Filter::error_kind("K1")), [ids[0], ids[2]]);
    assert_eq!(ids_of(&Filter::error_kind("K2")), [ids[1], ids[3]]);
    assert_eq!(ids_of(&Filter::error_kind("nope")), Vec::<MessageId>::new());
    assert_eq!(ids_of(&Filter::all().worker("w-a")), [gold]);
    assert_eq!(ids_of(&Filter::all().worker("worker-1")), [ids[1], ids[3]]);
    assert_eq!(ids_of(&Filter::all().message_contains("slow one")), [gold]);
    assert_eq!(ids_of(&Filter::all().attribute("plan", "gold")), [gold]);
    assert_eq!(ids_of(&Filter::all().tag("team", "ops")), [gold]);
    assert_eq!(ids_of(&Filter::all().attempts(Some(2), None)), [gold]);
    assert_eq!(ids_of(&Filter::all().attempts(None, Some(1))), ids);
    assert_eq!(
        ids_of(&Filter::error_kind("K1").worker("worker-0")),
        [ids[0], ids[2]]
    );
    let at = |id| dlq.get(id).unwrap().dlq.dead_lettered_at_ms;
    let (t0, t4) = (at(gold), at(ids[3]));
    assert_eq!(ids_of(&Filter::all().between(Some(t4 + 1), None)).len(), 0);
    assert_eq!(ids_of(&Filter::all().between(None, Some(t0))).len(), 0);
    assert_eq!(
        ids_of(&Filter::all().between(Some(t0), Some(t4 + 1))).len(),
        5
    );
    assert_eq!(dlq.ids(&Filter::all(), Some(2)).unwrap().len(), 2);

    dlq.mark_reprocessed(ids[1], true).unwrap();
    assert_eq!(ids_of(&Filter::all().pending_only()).len(), 4);
    assert!(!ids_of(&Filter::all().pending_only()).contains(&ids[1]));

    // Pages of two: each entry once, in listing order.
    let all: Vec<MessageId> = dlq
        .list(&Filter::all(), Page::first(100))
        .unwrap()
        .iter()
        .map(DeadLetter::id)
        .collect();
    let mut paged = Vec::new();
    let mut page = Page::first(2);
    loop {
        let got = dlq.list(&Filter::all(), page).unwrap();
        assert!(got.len() <= 2);
        let Some(last) = got.last() else { break };
        page = Page::after(last.id(), 2);
        paged.extend(got.iter().map(DeadLetter::id));
    }
    assert_eq!(paged, all);
    let k1: Vec<MessageId> = dlq
        .list(&Filter::error_kind("K1"), Page::after(ids[0], 10))
        .unwrap()
        .iter()
        .map(DeadLetter::id)
        .collect();
    assert_eq!(k1, [ids[2]]);

    // Cursors: pages both ways, right even once the entries they came from are gone.
    let listed = dlq.list(&Filter::all(), Page::first(100)).unwrap();
    let cursors: Vec<Cursor> = listed.iter().map(Cursor::of).collect();
    let ids_in = |page: Page| -> Vec<MessageId> {
        let got = dlq.list(&Filter::all(), page).unwrap();
        got.iter().map(DeadLetter::id).collect()
    };
    assert_eq!(ids_in(Page::after_cursor(cursors[1], 2)), all[2..4]);
    assert_eq!(ids_in(Page::before_cursor(cursors[3], 2)), all[1..3]);
    assert_eq!(ids_in(Page::before_cursor(cursors[1], 5)), all[..1]);
    assert_eq!(ids_in(Page::after_cursor(cursors[4], 5)), all[5..]);
    let k1: Vec<MessageId> = dlq
        .list(
            &Filter::error_kind("K1"),
            Page::before_cursor(cursors[4], 10),
        )
        .unwrap()
        .iter()
        .map(DeadLetter::id)
        .collect();
    assert_eq!(k1, [ids[0], ids[2]]);
    dlq.delete(all[1]).unwrap();
    dlq.delete(all[3]).unwrap();
    assert_eq!(ids_in(Page::after_cursor(cursors[1], 2)), [all[2], all[4]]);
    assert_eq!(ids_in(Page::before_cursor(cursors[3], 2)), [all[0], all[2]]);
}

/// Replay keeps the attempt count or resets it, continues or restarts the history,
/// refuses what is not (or no longer) in the DLQ and what was marked unless forced, and
/// a dry run or a limit is respected.
pub fn replay_rules<B: TestBackend>(backend: &B) {
    let queue = backend.queue("replay", options(2, 30_000)).unwrap();
    let dlq = queue.dlq();
    let id = queue.enqueue("x").unwrap();
    let timeout = Failure::transient("Timeout", "no answer");
    for attempt in 1..=2 {
        let msg = lease_one(&queue);
        assert_eq!(msg.attempt(), attempt);
        fail(&queue, &msg, &timeout, "w", Duration::ZERO);
    }
    assert_eq!(dlq.get(id).unwrap().metadata.delivery_count, 2);

    // A dry run reports and changes nothing.
    let dry = dlq
        .replay(&Filter::all(), &ReplayOptions::to_origin().dry_run())
        .unwrap();
    assert!(dry.dry_run);
    assert_eq!(dry.replayed, [id]);
    assert_eq!(dlq.len().unwrap(), 1);
    assert_eq!(held(&queue), 0);

    // Keeping the count: the next delivery is attempt 3, past the limit of 2, so its
    // failure goes straight back, and the history continues.
    dlq.replay_one(id, &ReplayOptions::to_origin()).unwrap();
    assert!(matches!(dlq.get(id), Err(Error::NotFound(_))));
    assert!(matches!(
        dlq.replay_one(id, &ReplayOptions::to_origin()),
        Err(Error::NotFound(_))
    ));
    let msg = lease_one(&queue);
    assert_eq!((msg.id(), msg.attempt()), (id, 3));
    assert_eq!(
        fail(&queue, &msg, &timeout, "w", Duration::ZERO),
        FailureOutcome::DeadLettered
    );
    let e = dlq.get(id).unwrap();
    assert_eq!(e.generation, 1);
    assert_eq!(
        e.failure
            .attempts
            .iter()
            .map(|a| a.number)
            .collect::<Vec<_>>(),
        [1, 2, 3]
    );

    // Resetting: attempt 1 again, a fresh history, retried rather than dead-lettered.
    dlq.replay_one(id, &ReplayOptions::to_origin().reset_attempts())
        .unwrap();
    let msg = lease_one(&queue);
    assert_eq!((msg.id(), msg.attempt()), (id, 1));
    assert!(matches!(
        fail(&queue, &msg, &timeout, "w", Duration::ZERO),
        FailureOutcome::Retried { .. }
    ));
    let msg = lease_one(&queue);
    assert_eq!(msg.attempt(), 2);
    assert_eq!(
        fail(&queue, &msg, &timeout, "w", Duration::ZERO),
        FailureOutcome::DeadLettered
    );
    let e = dlq.get(id).unwrap();
    assert_eq!(e.generation, 2);
    assert_eq!(
        e.failure
            .attempts
            .iter()
            .map(|a| a.number)
            .collect::<Vec<_>>(),
        [1, 2]
    );

    // Marked entries are replayed only when forced.
    dlq.mark_reprocessed(id, false).unwrap();
    let refused = dlq
        .replay(&Filter::all(), &ReplayOptions::to_origin())
        .unwrap();
    assert!(refused.replayed.is_empty());
    assert_eq!(refused.failed.len(), 1);
    assert!(matches!(
        dlq.replay_one(id, &ReplayOptions::to_origin()),
        Err(Error::AlreadyReprocessed(_))
    ));
    dlq.replay_one(id, &ReplayOptions::to_origin().reset_attempts().force())
        .unwrap();
    let msg = lease_one(&queue);
    assert_eq!(msg.id(), id);
    queue.ack(&msg).unwrap();

    // A limit replays that many, oldest first.
    let more = dead_entries(&queue, &["l1", "l2", "l3"], &["K"]);
    let report = dlq
        .replay(&Filter::all(), &ReplayOptions::to_origin().limit(2))
        .unwrap();
    assert_eq!(report.replayed, more[..2].to_vec());
    assert_eq!(dlq.ids(&Filter::all(), None).unwrap(), [more[2]]);
    let back = lease_n(&queue, 2);
    queue.ack_all(&back).unwrap();
    let stats = dlq.stats().unwrap();
    assert_eq!(stats.replayed, 5);
    assert_eq!(stats.reprocessed_ok, 3);
}

/// Replay to another queue: the message keeps its id and payload there, and fails into
/// that queue's DLQ.
pub fn replay_to_another_queue<B: TestBackend>(backend: &B) {
    let orders = backend.queue("orders", options(3, 30_000)).unwrap();
    let repair = backend.queue("orders-repair", options(3, 30_000)).unwrap();
    let ids = dead_entries(&orders, &["o1", "o2"], &["Broken"]);
    let report = orders
        .dlq()
        .replay(&Filter::all(), &ReplayOptions::to_queue("orders-repair"))
        .unwrap();
    assert_eq!(report.replayed, ids);
    assert_eq!(orders.dlq().len().unwrap(), 0);
    assert_eq!(held(&orders), 0);
    let moved = lease_n(&repair, 2);
    assert_eq!(
        moved
            .iter()
            .map(|m| (m.id(), m.payload().to_vec()))
            .collect::<Vec<_>>(),
        [(ids[0], b"o1".to_vec()), (ids[1], b"o2".to_vec())]
    );
    assert!(moved.iter().all(|m| m.queue() == "orders-repair"));
    repair.ack(&moved[0]).unwrap();
    fail_permanently(&repair, &moved[1], "StillBroken", "repair-1");
    let e = repair.dlq().get(ids[1]).unwrap();
    assert_eq!(e.metadata.queue, "orders-repair");
    assert_eq!(e.failure.error_kind, "StillBroken");
    assert_eq!(e.dlq_name, "orders-repair-dlq");
    assert_eq!(orders.dlq().len().unwrap(), 0);
}

/// A corrected replay delivers the new payload; if that fails too, the entry shows the
/// new payload and keeps the old one.
pub fn corrected_replay_keeps_the_old_payload<B: TestBackend>(backend: &B) {
    let queue = backend.queue("corrected", options(3, 30_000)).unwrap();
    let ids = dead_entries(&queue, &["{broken"], &["ParseError"]);
    let dlq = queue.dlq();
    dlq.replay_corrected(ids[0], "{still broken", &ReplayOptions::to_origin())
        .unwrap();
    let msg = lease_one(&queue);
    assert_eq!((msg.id(), msg.payload()), (ids[0], &b"{still broken"[..]));
    assert_eq!(msg.attempt(), 2, "the count was kept");
    fail_permanently(&queue, &msg, "ParseError", "w");
    let e = dlq.get(ids[0]).unwrap();
    assert_eq!(e.payload, b"{still broken");
    assert_eq!(e.replaced_payload.as_deref(), Some(&b"{broken"[..]));
    assert_eq!(e.generation, 1);
    assert!(matches!(
        dlq.replay_corrected(999_999_999, "x", &ReplayOptions::to_origin()),
        Err(Error::NotFound(_))
    ));
}

/// Queue and DLQ counters follow every move.
pub fn stats_and_counters<B: TestBackend>(backend: &B) {
    let queue = backend.queue("stats", options(3, 30_000)).unwrap();
    let qs = queue.stats().unwrap();
    assert_eq!(
        (qs.name.as_str(), qs.dlq_name.as_str()),
        ("stats", "stats-dlq")
    );
    assert_eq!(
        (qs.counts.ready, qs.counts.in_flight, qs.dlq_size),
        (0, 0, 0)
    );
    queue.enqueue_batch(&["1", "2", "3"]).unwrap();
    assert_eq!(queue.stats().unwrap().counts.ready, 3);
    let leased = lease_n(&queue, 2);
    let qs = queue.stats().unwrap();
    assert_eq!((qs.counts.ready, qs.counts.in_flight), (1, 2));
    queue.ack(&leased[0]).unwrap();
    fail_permanently(&queue, &leased[1], "Bad", "w-1");
    let qs = queue.stats().unwrap();
    assert_eq!(
        (qs.counts.ready, qs.counts.in_flight, qs.dlq_size),
        (1, 0, 1)
    );
    assert_eq!(qs.counts.enqueued, 3);
    assert_eq!(qs.counts.acked, 1);
    assert_eq!(qs.counts.dead_lettered, 1);

    let dlq = queue.dlq();
    let ds = dlq.stats().unwrap();
    assert_eq!(ds.name, "stats-dlq");
    assert_eq!(
        (ds.total, ds.pending, ds.replayed, ds.deleted),
        (1, 1, 0, 0)
    );
    assert_eq!(ds.by_error_kind["Bad"], 1);
    assert_eq!(ds.by_worker["w-1"], 1);
    assert!(ds.oldest_age_ms.is_some());

    let last = lease_one(&queue);
    fail_permanently(&queue, &last, "Worse", "w-2");
    let ds = dlq.stats().unwrap();
    assert_eq!(ds.total, 2);
    assert_eq!(ds.by_error_kind.len(), 2);
    dlq.mark_reprocessed(leased[1].id(), true).unwrap();
    let ds = dlq.stats().unwrap();
    assert_eq!(
        (ds.total, ds.pending, ds.reprocessed, ds.reprocessed_ok),
        (2, 1, 1, 1)
    );
    dlq.delete(leased[1].id()).unwrap();
    dlq.replay_one(last.id(), &ReplayOptions::to_origin())
        .unwrap();
    let ds = dlq.stats().unwrap();
    assert_eq!(
        (ds.total, ds.pending, ds.deleted, ds.replayed),
        (0, 0, 1, 1)
    );
    assert!(ds.by_error_kind.is_empty());
    assert_eq!(ds.oldest_age_ms, None);
    assert_eq!(
        queue.stats().unwrap().counts.ready + queue.stats().unwrap().counts.in_flight,
        1
    );
}

/// Delete one, delete by filter, and purge by age, pending entries kept unless asked.
pub fn delete_and_purge<B: TestBackend>(backend: &B) {
    let queue = backend.queue("purge", options(3, 30_000)).unwrap();
    let ids = dead_entries(&queue, &["a", "b", "c", "d", "e", "f"], &["K1", "K2", "K3"]);
    let dlq = queue.dlq();
    dlq.delete(ids[0]).unwrap();
    assert!(matches!(dlq.get(ids[0]), Err(Error::NotFound(_))));
    assert!(matches!(dlq.delete(ids[0]), Err(Error::NotFound(_))));
    assert_eq!(dlq.delete_matching(&Filter::error_kind("K2")).unwrap(), 2);
    assert_eq!(
        dlq.ids(&Filter::all(), None).unwrap(),
        [ids[2], ids[3], ids[5]]
    );

    // Nothing is old enough yet.
    assert_eq!(dlq.purge(Duration::from_secs(3600), true).unwrap(), 0);
    dlq.mark_reprocessed(ids[2], true).unwrap();
    std::thread::sleep(Duration::from_millis(30));
    // Old enough, but pending entries are kept unless asked.
    assert_eq!(dlq.purge(Duration::from_millis(10), false).unwrap(), 1);
    assert_eq!(dlq.ids(&Filter::all(), None).unwrap(), [ids[3], ids[5]]);
    assert_eq!(dlq.purge(Duration::from_millis(10), true).unwrap(), 2);
    assert_eq!(dlq.len().unwrap(), 0);
    assert_eq!(dlq.stats().unwrap().deleted, 6);
    assert_eq!(held(&queue), 0);
}

/// Analysis groups three or more failures of a kind, with their workers, messages and
/// context.
pub fn analyze_groups_patterns<B: TestBackend>(backend: &B) {
    let queue = backend.queue("analyze", options(3, 30_000)).unwrap();
    let payloads = ["1", "2", "3", "4", "5", "6"];
    let opts = EnqueueOptions::new().attribute("shop", "eu");
    for p in payloads {
        queue.enqueue_with(p, &opts).unwrap();
    }
    for (i, msg) in lease_n(&queue, 6).iter().enumerate() {
        let failure = if i < 4 {
            Failure::permanent("DbDown", "connection refused").with_context("db", "main")
        } else {
            Failure::permanent("Invalid", format!("bad {i}"))
        };
        let report = FailureReport::new(&failure).worker(if i % 2 == 0 { "a" } else { "b" });
        queue.dead_letter(msg, &report).unwrap();
    }
    let dlq = queue.dlq();
    let a = dlq.analyze(&Filter::all()).unwrap();
    assert_eq!(a.total, 6);
    assert_eq!(a.by_error_kind["DbDown"], 4);
    assert_eq!(a.by_error_kind["Invalid"], 2);
    assert_eq!((a.by_worker["a"], a.by_worker["b"]), (3, 3));
    assert_eq!(a.by_hour_of_day.iter().sum::<u64>(), 6);
    assert_eq!(a.average_attempts, 1.0);
    let (lo, hi) = a.time_range.unwrap();
    assert!(lo <= hi);
    assert_eq!(a.patterns.len(), 1, "only DbDown reaches three");
    let p = &a.patterns[0];
    assert_eq!((p.error_kind.as_str(), p.count), ("DbDown", 4));
    assert_eq!(p.workers.len(), 2);
    assert_eq!(p.common_messages, [("connection refused".to_string(), 4)]);
    assert_eq!(
        p.common_context,
        [("db=main".to_string(), 4), ("shop=eu".to_string(), 4)]
    );
    let only = dlq.analyze(&Filter::error_kind("Invalid")).unwrap();
    assert_eq!((only.total, only.patterns.len()), (2, 0));
}

/// An alert fires when the DLQ reaches its threshold and again when it falls back under.
pub fn alerts_fire_both_ways<B: TestBackend>(backend: &B) {
    let queue = backend.queue("alerts", options(3, 30_000)).unwrap();
    let dlq = queue.dlq();
    let seen: Arc<Mutex<Vec<DlqAlert>>> = Arc::default();
    let sink = Arc::clone(&seen);
    dlq.on_threshold(2, move |a| sink.lock().unwrap().push(a.clone()))
        .unwrap();
    let ids = dead_entries(&queue, &["a"], &["K"]);
    assert!(seen.lock().unwrap().is_empty(), "one entry is under two");
    dead_entries(&queue, &["b", "c"], &["K"]);
    eventually("the alert fires going up", || {
        !seen.lock().unwrap().is_empty()
    });
    {
        let up = seen.lock().unwrap();
        assert_eq!(up.len(), 1, "{up:?}");
        assert!(up[0].above);
        assert_eq!((up[0].dlq.as_str(), up[0].threshold), ("alerts-dlq", 2));
        assert!(up[0].size >= 2);
    }
    dlq.delete(ids[0]).unwrap();
    assert_eq!(seen.lock().unwrap().len(), 1, "still at two");
    dlq.delete_matching(&Filter::all()).unwrap();
    eventually("the alert fires going down", || {
        seen.lock().unwrap().len() == 2
    });
    let down = seen.lock().unwrap()[1].clone();
    assert!(!down.above);
    assert!(down.size < 2);
}
