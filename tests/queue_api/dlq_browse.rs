//! Browsing a DLQ: stats come from counters (no record is read, before and after a
//! reopen) while list and get read their entries; pages and every filter, with no side
//! effect.

use deadletter::{EnqueueOptions, EntryStatus, Failure, FailureReport, Filter, ManualClock, Page};

use crate::common::{self, T0};
use crate::helpers::{fast, options};

/// Counts the store's log reads through the test hooks of the `sim` feature.
#[cfg(feature = "sim")]
#[test]
fn dlq_stats_reads_no_record_while_list_and_get_do() {
    use deadletter::sim::StoreHooks;
    use deadletter::Store;
    let clock = ManualClock::new(T0);
    let (dir, store) = common::temp_store(fast(&clock));
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
fn list_pages_and_filters_without_side_effects() {
    let clock = ManualClock::new(T0);
    let (_dir, store) = common::temp_store(fast(&clock));
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
