//! Focused tests of queue and DLQ behaviours the model-based and crash tests do not cover:
//! constant-time stats, typed errors, the store lock, idempotency windows, delays, TTL
//! expiry, alert hooks, replay rules, bounded failure history, typed payloads, lease
//! ownership, and concurrent consumers.

use std::collections::{BTreeSet, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use deadletter::{
    Clock, CompactionOptions, Config, DlqAlert, Durability, EnqueueOptions, EntryStatus, Error,
    Failure, FailureOutcome, FailureReport, Filter, ManualClock, Page, Queue, QueueOptions,
    ReplayOptions, Store,
};
use serde::{Deserialize, Serialize};

const T0: u64 = 1_700_000_000_000;

fn config(clock: &ManualClock) -> Config {
    Config::default()
        .compaction(CompactionOptions::default().interval(None))
        .preallocate(false)
        .clock(clock.clone())
}

fn fast(clock: &ManualClock) -> Config {
    config(clock).durability(Durability::Never)
}

fn options(max_attempts: u32) -> QueueOptions {
    QueueOptions::default()
        .max_attempts(max_attempts)
        .visibility_timeout(Duration::from_secs(1))
}

/// Leases one message and dead-letters it with `kind`.
fn fail_one(q: &Queue, kind: &str) -> u64 {
    let m = q.lease(1).unwrap().remove(0);
    let f = Failure::permanent(kind, "broken");
    q.dead_letter(&m, &FailureReport::new(&f)).unwrap();
    m.id()
}

/// Counts the store's log reads through the test hooks of the `sim` feature.
#[cfg(feature = "sim")]
#[test]
fn dlq_stats_reads_no_record_while_list_and_get_do() {
    use deadletter::sim::StoreHooks;
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let store = Store::open(dir.path(), fast(&clock)).unwrap();
    let q = store.queue_with("orders", options(3)).unwrap();
    const N: usize = 10_000;
    let payloads: Vec<String> = (0..N).map(|i| format!("order-{i}")).collect();
    q.enqueue_batch(&payloads).unwrap();
    let leased = q.lease(N).unwrap();
    assert_eq!(leased.len(), N);
    let kinds = ["Timeout", "Validation", "Io"];
    for (i, m) in leased.iter().enumerate() {
        let f = Failure::permanent(kinds[i % 3], format!("failure {i}"));
        q.dead_letter(m, &FailureReport::new(&f).worker("w1"))
            .unwrap();
    }
    let dlq = q.dlq();

    let before = store.records_read();
    let stats = dlq.stats();
    let qstats = q.stats();
    assert_eq!(dlq.len(), N as u64);
    assert_eq!(
        store.records_read(),
        before,
        "stats must come from counters, not from the log"
    );
    assert_eq!(stats.total, N as u64);
    assert_eq!(stats.pending, N as u64);
    assert_eq!(stats.by_error_kind["Validation"], (N / 3) as u64);
    assert_eq!(stats.by_worker["w1"], N as u64);
    assert_eq!(qstats.dlq_size, N as u64);
    assert_eq!(qstats.dead_lettered, N as u64);

    // Browsing reads envelopes from the log.
    let page = dlq.list(&Filter::all(), Page::first(10)).unwrap();
    assert_eq!(page.len(), 10);
    let after_list = store.records_read();
    assert!(after_list >= before + 10, "list reads its entries");
    let entry = dlq.get(page[3].id()).unwrap();
    assert_eq!(entry.payload, format!("order-{}", page[3].id()).as_bytes());
    assert!(store.records_read() > after_list, "get reads its entry");

    // The same after a reopen: the counters are rebuilt, not recomputed per call.
    drop((q, dlq, leased));
    store.close().unwrap();
    let store = Store::open(dir.path(), fast(&clock)).unwrap();
    let dlq = store.dlq("orders-dlq").unwrap();
    assert_eq!(store.records_read(), 0);
    assert_eq!(dlq.stats(), stats);
    assert_eq!(store.records_read(), 0);
}

#[test]
fn oversized_messages_are_refused_with_a_typed_error() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let cfg = fast(&clock).max_message_size(1000);
    let store = Store::open(dir.path(), cfg).unwrap();
    let q = store.queue_with("q", options(3)).unwrap();
    q.enqueue(vec![7u8; 1000]).unwrap();
    match q.enqueue(vec![7u8; 1001]) {
        Err(Error::TooLarge { size, max }) => assert_eq!((size, max), (1001, 1000)),
        other => panic!("expected TooLarge, got {other:?}"),
    }
    // A batch with one oversized message enqueues nothing.
    let batch = vec![vec![1u8; 10], vec![2u8; 5000], vec![3u8; 10]];
    assert!(matches!(
        q.enqueue_batch(&batch),
        Err(Error::TooLarge { size: 5000, .. })
    ));
    assert_eq!(q.len(), 1);
    // A corrected payload too large for a replay is refused the same way.
    let id = fail_one(&q, "Bad");
    assert!(matches!(
        q.dlq()
            .replay_corrected(id, vec![0u8; 1001], &ReplayOptions::to_origin()),
        Err(Error::TooLarge { .. })
    ));
    assert_eq!(q.dlq().len(), 1);
}

#[test]
fn unknown_queues_are_a_typed_error() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let store = Store::open(dir.path(), fast(&clock)).unwrap();
    store.queue("orders").unwrap();
    assert!(matches!(
        store.existing_queue("payments"),
        Err(Error::UnknownQueue(n)) if n == "payments"
    ));
    assert!(matches!(
        store.dlq("payments-dlq"),
        Err(Error::UnknownQueue(n)) if n == "payments-dlq"
    ));
    assert_eq!(store.existing_queue("orders").unwrap().name(), "orders");
    assert_eq!(store.dlq("orders-dlq").unwrap().name(), "orders-dlq");
    assert_eq!(store.dlq("orders").unwrap().name(), "orders-dlq");
    assert!(matches!(store.queue(""), Err(Error::InvalidQueueName(_))));
}

#[test]
fn a_second_open_of_the_same_directory_is_locked() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let store = Store::open(dir.path(), config(&clock)).unwrap();
    let q = store.queue("q").unwrap();
    q.enqueue(b"one").unwrap();
    match Store::open(dir.path(), config(&clock)) {
        Err(Error::Locked { path }) => assert_eq!(path, dir.path()),
        other => panic!("expected Locked, got {other:?}"),
    }
    // The directory is free again once every handle is gone.
    drop(q);
    store.close().unwrap();
    let store = Store::open(dir.path(), config(&clock)).unwrap();
    assert_eq!(store.existing_queue("q").unwrap().len(), 1);
}

#[test]
fn idempotency_key_makes_a_repeat_within_the_window_a_no_op() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let cfg = config(&clock).idempotency_window(Duration::from_secs(60));
    let store = Store::open(dir.path(), cfg.clone()).unwrap();
    let q = store.queue("payments").unwrap();
    let other = store.queue("refunds").unwrap();
    let key = EnqueueOptions::new().idempotency_key("pay-42");
    let first = q.enqueue_with(b"charge 42", &key).unwrap();
    clock.advance(30_000);
    assert_eq!(q.enqueue_with(b"charge 42 again", &key).unwrap(), first);
    assert_eq!(q.len(), 1);
    // Keys belong to their queue.
    assert_ne!(other.enqueue_with(b"refund 42", &key).unwrap(), first);
    // The window survives a reopen.
    drop((q, other));
    store.close().unwrap();
    let store = Store::open(dir.path(), cfg).unwrap();
    let q = store.queue("payments").unwrap();
    clock.advance(29_000);
    assert_eq!(
        q.enqueue_with(b"charge 42, third try", &key).unwrap(),
        first
    );
    assert_eq!(q.len(), 1);
    // Past the window, the same key enqueues a new message.
    clock.advance(2_000);
    let second = q.enqueue_with(b"charge 42, next day", &key).unwrap();
    assert_ne!(second, first);
    assert_eq!(q.len(), 2);
    let payloads: Vec<Vec<u8>> = q
        .lease(10)
        .unwrap()
        .iter()
        .map(|m| m.payload().to_vec())
        .collect();
    assert_eq!(
        payloads,
        vec![b"charge 42".to_vec(), b"charge 42, next day".to_vec()]
    );
}

#[test]
fn a_delayed_message_is_invisible_until_its_delay_passed() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let store = Store::open(dir.path(), fast(&clock)).unwrap();
    let q = store.queue("q").unwrap();
    let delayed = q
        .enqueue_with(
            b"later",
            &EnqueueOptions::new().delay(Duration::from_secs(5)),
        )
        .unwrap();
    let now = q.enqueue(b"now").unwrap();
    let got = q.lease(10).unwrap();
    assert_eq!(got.iter().map(|m| m.id()).collect::<Vec<_>>(), vec![now]);
    clock.advance(4_999);
    assert!(q.lease(10).unwrap().is_empty());
    assert_eq!(q.len(), 1, "the delayed message waits in the queue");
    clock.advance(1);
    let got = q.lease(10).unwrap();
    assert_eq!(
        got.iter().map(|m| m.id()).collect::<Vec<_>>(),
        vec![delayed]
    );
    assert_eq!(got[0].payload(), b"later");
}

#[test]
fn ttl_expiry_on_lease_goes_to_the_dlq_or_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let store = Store::open(dir.path(), fast(&clock)).unwrap();
    let to_dlq = store.queue_with("keep", options(3)).unwrap();
    let drop_q = store
        .queue_with("drop", options(3).expired_to_dlq(false))
        .unwrap();
    let ttl = EnqueueOptions::new().ttl(Duration::from_secs(1));
    let a = to_dlq.enqueue_with(b"stale order", &ttl).unwrap();
    let fresh = to_dlq.enqueue(b"fresh order").unwrap();
    let b = drop_q.enqueue_with(b"stale ping", &ttl).unwrap();
    clock.advance(1_000);

    let got = to_dlq.lease(10).unwrap();
    assert_eq!(got.iter().map(|m| m.id()).collect::<Vec<_>>(), vec![fresh]);
    let entry = to_dlq.dlq().get(a).unwrap();
    assert_eq!(entry.failure.error_kind, deadletter::EXPIRED_KIND);
    assert_eq!(entry.failure.error_kind, "expired");
    assert_eq!(entry.payload, b"stale order");
    assert_eq!(entry.metadata.delivery_count, 0);
    let s = to_dlq.stats();
    assert_eq!((s.expired, s.dead_lettered, s.dlq_size), (1, 1, 1));

    assert!(drop_q.lease(10).unwrap().is_empty());
    assert!(drop_q.dlq().is_empty());
    assert!(matches!(drop_q.dlq().get(b), Err(Error::NotFound(_))));
    let s = drop_q.stats();
    assert_eq!(
        (s.expired, s.dead_lettered, s.ready, s.dlq_size),
        (1, 0, 0, 0)
    );
}

#[test]
fn alert_hook_fires_when_the_dlq_crosses_its_threshold_up_and_down() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let store = Store::open(dir.path(), fast(&clock)).unwrap();
    let q = store.queue_with("orders", options(3)).unwrap();
    q.enqueue_batch(&[b"1", b"2", b"3", b"4"]).unwrap();
    let alerts: Arc<Mutex<Vec<DlqAlert>>> = Arc::default();
    let sink = Arc::clone(&alerts);
    q.dlq()
        .on_threshold(2, move |a| sink.lock().unwrap().push(a.clone()))
        .unwrap();
    let taken = |alerts: &Arc<Mutex<Vec<DlqAlert>>>| std::mem::take(&mut *alerts.lock().unwrap());

    let first = fail_one(&q, "Bad");
    assert!(taken(&alerts).is_empty(), "1 entry is under the threshold");
    let second = fail_one(&q, "Bad");
    let fired = taken(&alerts);
    assert_eq!(fired.len(), 1);
    let alert = &fired[0];
    assert_eq!(
        (alert.dlq.as_str(), alert.size, alert.threshold, alert.above),
        ("orders-dlq", 2, 2, true)
    );
    fail_one(&q, "Bad");
    assert!(
        taken(&alerts).is_empty(),
        "no new alert while it stays above"
    );
    q.dlq().delete(first).unwrap();
    assert!(
        taken(&alerts).is_empty(),
        "2 entries is still at the threshold"
    );
    q.dlq()
        .replay_one(second, &ReplayOptions::to_origin())
        .unwrap();
    let down = taken(&alerts);
    assert_eq!(down.len(), 1);
    assert!(!down[0].above);
    assert_eq!(down[0].size, 1);
    // Crossing up again fires again.
    fail_one(&q, "Bad");
    assert_eq!(taken(&alerts).len(), 1);
}

#[test]
fn replaying_a_reprocessed_entry_needs_force() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let store = Store::open(dir.path(), fast(&clock)).unwrap();
    let q = store.queue_with("q", options(3)).unwrap();
    q.enqueue_batch(&[b"a", b"b"]).unwrap();
    let a = fail_one(&q, "Bad");
    let b = fail_one(&q, "Bad");
    let dlq = q.dlq();
    dlq.mark_reprocessed(a, true).unwrap();
    assert!(matches!(
        dlq.get(a).unwrap().status,
        EntryStatus::Reprocessed { success: true, .. }
    ));
    assert!(matches!(
        dlq.replay_one(a, &ReplayOptions::to_origin()),
        Err(Error::AlreadyReprocessed(id)) if id == a
    ));
    assert!(matches!(
        dlq.replay_corrected(a, b"fixed", &ReplayOptions::to_origin()),
        Err(Error::AlreadyReprocessed(_))
    ));
    // A bulk replay reports it among the failures and replays the rest.
    let report = dlq
        .replay(&Filter::all(), &ReplayOptions::to_origin())
        .unwrap();
    assert_eq!(report.replayed, vec![b]);
    assert_eq!(report.failed.len(), 1);
    assert_eq!(report.failed[0].0, a);
    assert_eq!(dlq.len(), 1);
    // Forced, it goes.
    dlq.replay_one(a, &ReplayOptions::to_origin().force())
        .unwrap();
    assert!(dlq.is_empty());
    let s = dlq.stats();
    assert_eq!((s.replayed, s.reprocessed_ok, s.reprocessed), (2, 1, 0));
    // Replaying an entry that is no longer in the DLQ is NotFound.
    assert!(matches!(
        dlq.replay_one(a, &ReplayOptions::to_origin().force()),
        Err(Error::NotFound(_))
    ));
}

#[test]
fn replay_to_another_queue_keeps_the_id() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let store = Store::open(dir.path(), fast(&clock)).unwrap();
    let orders = store.queue_with("orders", options(3)).unwrap();
    let id = orders
        .enqueue_with(b"ORD-7", &EnqueueOptions::new().attribute("tenant", "acme"))
        .unwrap();
    assert_eq!(fail_one(&orders, "Bad"), id);
    orders
        .dlq()
        .replay_one(
            id,
            &ReplayOptions::to_queue("orders-manual").reset_attempts(),
        )
        .unwrap();
    assert!(orders.dlq().is_empty());
    assert!(orders.lease(1).unwrap().is_empty());
    let manual = store.existing_queue("orders-manual").unwrap();
    let m = manual.lease(1).unwrap().remove(0);
    assert_eq!(m.id(), id);
    assert_eq!(m.payload(), b"ORD-7");
    assert_eq!(m.attempt(), 1);
    assert_eq!(m.attributes()["tenant"], "acme");
    // Failing there, it lands in that queue's DLQ, still with its id, one generation on.
    let f = Failure::permanent("StillBad", "no");
    manual.dead_letter(&m, &FailureReport::new(&f)).unwrap();
    let entry = manual.dlq().get(id).unwrap();
    assert_eq!(entry.generation, 1);
    assert_eq!(entry.metadata.queue, "orders-manual");
    assert_eq!(entry.dlq_name, "orders-manual-dlq");
    assert_eq!(orders.dlq().stats().reprocessed_failed, 1);
}

#[test]
fn history_keeps_the_last_attempts_and_counts_the_dropped_ones() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let cfg = fast(&clock).max_history(3);
    let store = Store::open(dir.path(), cfg).unwrap();
    let q = store.queue_with("q", options(10)).unwrap();
    let id = q.enqueue(b"flaky").unwrap();
    for attempt in 1..=7u32 {
        let m = q.lease(1).unwrap().remove(0);
        assert_eq!(m.attempt(), attempt);
        let f = Failure::transient("Timeout", format!("timeout #{attempt}"));
        let report = FailureReport::new(&f).duration(Duration::from_millis(attempt as u64));
        let now = clock.now_ms();
        assert!(matches!(
            q.retry(&m, &report, now).unwrap(),
            FailureOutcome::Retried { .. }
        ));
        clock.advance(10);
    }
    let m = q.lease(1).unwrap().remove(0);
    let f = Failure::permanent("Invalid", "gave up");
    q.dead_letter(&m, &FailureReport::new(&f)).unwrap();
    let entry = q.dlq().get(id).unwrap();
    assert_eq!(entry.metadata.delivery_count, 8);
    let numbers: Vec<u32> = entry.failure.attempts.iter().map(|a| a.number).collect();
    assert_eq!(numbers, vec![6, 7, 8]);
    assert_eq!(entry.failure.attempts_dropped, 5);
    assert_eq!(entry.failure.attempts[0].error_message, "timeout #6");
    assert_eq!(entry.failure.attempts[0].duration_ms, 6);
    assert_eq!(entry.failure.error_kind, "Invalid");
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Order {
    id: u32,
    customer: String,
    items: Vec<(String, u16)>,
    express: bool,
}

#[test]
fn typed_payloads_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let store = Store::open(dir.path(), fast(&clock)).unwrap();
    let q = store.queue("orders").unwrap();
    let order = Order {
        id: 42,
        customer: "Ada".into(),
        items: vec![("tea".into(), 2), ("scones".into(), 6)],
        express: true,
    };
    q.enqueue_typed(&order).unwrap();
    q.enqueue(b"\xff\xff\xff").unwrap();
    let got = q.lease(2).unwrap();
    assert_eq!(got[0].decode::<Order>().unwrap(), order);
    assert!(matches!(got[1].decode::<Order>(), Err(Error::Codec(_))));
}

#[test]
fn a_stale_delivery_cannot_report_after_a_redelivery() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let store = Store::open(dir.path(), fast(&clock)).unwrap();
    let q = store.queue_with("q", options(5)).unwrap();
    let id = q.enqueue(b"job").unwrap();
    let first = q.lease(1).unwrap().remove(0);
    clock.advance(1_000); // the visibility timeout passes
    let second = q.lease(1).unwrap().remove(0);
    assert_eq!((second.id(), second.attempt()), (id, 2));
    let f = Failure::transient("Timeout", "late");
    assert!(matches!(q.ack(&first), Err(Error::InvalidState { .. })));
    assert!(matches!(
        q.retry(&first, &FailureReport::new(&f), T0),
        Err(Error::InvalidState { .. })
    ));
    assert!(matches!(
        q.dead_letter(&first, &FailureReport::new(&f)),
        Err(Error::InvalidState { .. })
    ));
    assert!(matches!(
        q.extend(&first, Duration::from_secs(1)),
        Err(Error::InvalidState { .. })
    ));
    q.ack(&second).unwrap();
    assert!(matches!(q.ack(&second), Err(Error::NotFound(i)) if i == id));
    // A message acked late, before anyone else took it, is still acked.
    q.enqueue(b"slow").unwrap();
    let slow = q.lease(1).unwrap().remove(0);
    clock.advance(5_000);
    q.ack(&slow).unwrap();
    assert!(q.lease(1).unwrap().is_empty());
}

#[test]
fn concurrent_consumers_each_get_distinct_messages_and_ack_all_once() {
    let dir = tempfile::tempdir().unwrap();
    // The real clock and the durable default: leases and acks of several threads share
    // fsyncs (group commit).
    let store = Store::open(dir.path(), Config::default().preallocate(false)).unwrap();
    let q = store
        .queue_with(
            "jobs",
            QueueOptions::default().visibility_timeout(Duration::from_secs(600)),
        )
        .unwrap();
    const N: usize = 600;
    const THREADS: usize = 4;
    let ids: BTreeSet<u64> = q
        .enqueue_batch(&(0..N).map(|i| format!("job-{i}")).collect::<Vec<_>>())
        .unwrap()
        .into_iter()
        .collect();
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let q = q.clone();
            std::thread::spawn(move || {
                let mut mine = Vec::new();
                loop {
                    let got = q.lease(1 + t * 3).unwrap();
                    if got.is_empty() {
                        if q.stats().ready == 0 {
                            return mine;
                        }
                        continue;
                    }
                    for m in &got {
                        assert_eq!(m.attempt(), 1, "message {} delivered twice", m.id());
                        assert_eq!(m.payload(), format!("job-{}", m.id()).as_bytes());
                        mine.push(m.id());
                    }
                    if t % 2 == 0 {
                        q.ack_all(&got).unwrap();
                    } else {
                        for m in &got {
                            q.ack(m).unwrap();
                        }
                    }
                }
            })
        })
        .collect();
    let mut seen = HashSet::new();
    let mut per_thread = Vec::new();
    for h in handles {
        let mine = h.join().unwrap();
        per_thread.push(mine.len());
        for id in mine {
            assert!(
                seen.insert(id),
                "message {id} was delivered to two consumers"
            );
        }
    }
    assert_eq!(seen.into_iter().collect::<BTreeSet<_>>(), ids);
    let s = q.stats();
    assert_eq!((s.acked, s.ready, s.in_flight), (N as u64, 0, 0));
    println!("messages per consumer: {per_thread:?}");
}

#[test]
fn list_pages_and_filters_without_side_effects() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let store = Store::open(dir.path(), fast(&clock)).unwrap();
    let q = store.queue_with("q", options(2)).unwrap();
    let mut ids = Vec::new();
    for i in 0..9u64 {
        let region = if i % 3 == 0 { "eu" } else { "us" };
        let id = q
            .enqueue_with(
                format!("m{i}"),
                &EnqueueOptions::new().attribute("region", region),
            )
            .unwrap();
        let m = q.lease(1).unwrap().remove(0);
        let kind = if i % 2 == 0 { "Timeout" } else { "Validation" };
        let f = Failure::permanent(kind, format!("failure number {i}"));
        let mut report = FailureReport::new(&f).worker(if i < 5 { "w1" } else { "w2" });
        if i == 4 {
            report.tags.insert("team".into(), "billing".into());
        }
        q.dead_letter(&m, &report).unwrap();
        ids.push(id);
        clock.advance(1_000);
    }
    let dlq = q.dlq();
    let stats = dlq.stats();
    let ids_of = |v: Vec<deadletter::DeadLetter>| v.iter().map(|e| e.id()).collect::<Vec<_>>();

    // Pages, oldest first, each after the last id of the previous one.
    let p1 = ids_of(dlq.list(&Filter::all(), Page::first(4)).unwrap());
    let p2 = ids_of(dlq.list(&Filter::all(), Page::after(p1[3], 4)).unwrap());
    let p3 = ids_of(dlq.list(&Filter::all(), Page::after(p2[3], 4)).unwrap());
    assert_eq!([p1, p2, p3].concat(), ids);
    assert_eq!(ids_of(dlq.peek(2).unwrap()), ids[..2]);

    let all = |f: Filter| ids_of(dlq.list(&f, Page::first(100)).unwrap());
    let pick = |is: &[usize]| is.iter().map(|&i| ids[i]).collect::<Vec<_>>();
    assert_eq!(all(Filter::error_kind("Validation")), pick(&[1, 3, 5, 7]));
    assert_eq!(all(Filter::all().message_contains("number 8")), pick(&[8]));
    assert_eq!(
        all(Filter::all().attribute("region", "eu")),
        pick(&[0, 3, 6])
    );
    assert_eq!(all(Filter::all().tag("team", "billing")), pick(&[4]));
    assert_eq!(
        all(Filter::all().between(Some(T0 + 2_000), Some(T0 + 4_000))),
        pick(&[2, 3])
    );
    let w2 = Filter::all().worker("w2");
    assert_eq!(all(w2), pick(&[5, 6, 7, 8]));
    assert_eq!(
        all(Filter::all().attempts(Some(2), None)),
        Vec::<u64>::new()
    );
    assert_eq!(
        all(Filter::error_kind("Timeout").attribute("region", "eu")),
        pick(&[0, 6])
    );
    // Browsing changed nothing.
    assert_eq!(dlq.stats(), stats);
    assert_eq!(dlq.get(ids[0]).unwrap().status, EntryStatus::Pending);
}
