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

/// A listing picks its page from the index and reads the log only for the entries it
/// returns: two records each (the payload and the envelope), whatever the DLQ's size and
/// however many entries the filter skips; `get` reads one entry's two.
#[cfg(feature = "sim")]
#[test]
fn a_listing_reads_only_the_entries_it_returns() {
    use deadletter::sim::StoreHooks;
    use deadletter::Cursor;
    let clock = ManualClock::new(T0);
    let (_dir, store) = common::temp_store(fast(&clock));
    let q = store.queue_with("orders", options(3)).unwrap();
    const N: usize = 3_000;
    let payloads: Vec<String> = (0..N).map(|i| format!("order-{i}")).collect();
    q.enqueue_batch(&payloads).unwrap();
    let kinds = ["Timeout", "Validation", "Io"];
    for (i, m) in q.lease(N).unwrap().iter().enumerate() {
        let f = Failure::permanent(kinds[i % 3], format!("failure {i}"));
        q.dead_letter(m, &FailureReport::new(&f)).unwrap();
        if i % 100 == 99 {
            clock.advance(1_000);
        }
    }
    let dlq = q.dlq();
    let reads = |f: &dyn Fn() -> usize| {
        let before = store.records_read();
        let returned = f();
        (returned, store.records_read() - before)
    };
    let list = |filter: &Filter, page: Page| dlq.list(filter, page).unwrap();

    let io = Filter::error_kind("Io");
    let (n, read) = reads(&|| list(&io, Page::first(10)).len());
    assert_eq!((n, read), (10, 20), "a page of 10 reads 10 entries");
    let first = list(&io, Page::first(10));
    let next = Page::after_cursor(Cursor::of(&first[9]), 7);
    assert_eq!(reads(&|| list(&io, next).len()), (7, 14));
    let previous = Page::before_cursor(Cursor::of(&first[9]), 5);
    assert_eq!(reads(&|| list(&io, previous).len()), (5, 10));
    let late = io.clone().between(Some(T0 + 20_000), Some(T0 + 25_000));
    assert_eq!(reads(&|| list(&late, Page::first(1_000)).len()), (167, 334));
    // Nothing matches: nothing is read.
    let unknown = Filter::error_kind("NoSuchKind");
    assert_eq!(reads(&|| list(&unknown, Page::first(10)).len()), (0, 0));
    let old = Filter::all().attempts(Some(2), None);
    assert_eq!(reads(&|| list(&old, Page::first(10)).len()), (0, 0));
    assert_eq!(reads(&|| dlq.ids(&io, Some(50)).unwrap().len()), (50, 0));
    let id = first[3].id();
    assert_eq!(reads(&|| usize::from(dlq.get(id).is_ok())), (1, 2));
}

/// Every filter the index answers gives, on every page, in both directions, exactly the
/// entries whose envelopes match it ([`Filter::matches`], the check a backend without an
/// index makes): on the live store, on a read-only snapshot, and after a checkpoint and a
/// reopen (where the index is rebuilt from the checkpoint and the fingerprints from the
/// envelopes).
#[test]
fn filtered_pages_agree_with_the_envelopes_everywhere() {
    use deadletter::{Clock, Cursor, DeadLetter, Dlq, Store};
    let clock = ManualClock::new(T0);
    let (dir, store) = common::temp_store(fast(&clock));
    let q = store.queue_with("orders", options(3)).unwrap();
    let kinds = ["Timeout", "Validation", "Io"];
    for i in 0..60u64 {
        q.enqueue(format!("order-{i}")).unwrap();
        // Up to two failed deliveries before the last one.
        for _ in 0..i % 3 {
            let m = q.lease(1).unwrap().remove(0);
            let f = Failure::transient("Flaky", "try again");
            q.retry(&m, &FailureReport::new(&f), clock.now_ms())
                .unwrap();
            clock.advance(1);
        }
        let m = q.lease(1).unwrap().remove(0);
        let message = if i % 4 == 0 {
            format!("order {i} not found")
        } else {
            format!("timed out after {i} ms")
        };
        let f = Failure::permanent(kinds[(i % 5) as usize % 3], message);
        let report = match i % 3 {
            0 => FailureReport::new(&f).worker("w1"),
            1 => FailureReport::new(&f).worker("w2"),
            _ => FailureReport::new(&f),
        };
        q.dead_letter(&m, &report).unwrap();
        let id = m.id();
        if i % 7 == 0 {
            q.dlq().mark_reprocessed(id, i % 2 == 0).unwrap();
        }
        if i % 10 == 9 {
            clock.advance(1_000);
        }
    }
    let everything = q
        .dlq()
        .list(&Filter::all(), Page::first(usize::MAX))
        .unwrap();
    assert_eq!(everything.len(), 60);
    let fingerprint = everything[4]
        .fingerprint
        .expect("kept by the embedded store");
    let filters = [
        Filter::all(),
        Filter::error_kind("Io"),
        Filter::error_kind("NoSuchKind"),
        Filter::all().worker("w1"),
        Filter::all().worker("nobody"),
        Filter::all().pending_only(),
        {
            let mut reprocessed = Filter::all();
            reprocessed.pending = Some(false);
            reprocessed
        },
        Filter::all().attempts(Some(2), None),
        Filter::all().attempts(None, Some(1)),
        Filter::all().between(Some(T0 + 2_000), Some(T0 + 4_000)),
        Filter::all().between(Some(T0 + 3_000), None),
        Filter::all().fingerprint(fingerprint),
        Filter::error_kind("Timeout")
            .worker("w2")
            .attempts(Some(2), Some(2)),
        Filter::error_kind("Validation").message_contains("not found"),
    ];
    let check = |dlq: &Dlq, place: &str| {
        let all = dlq.list(&Filter::all(), Page::first(usize::MAX)).unwrap();
        assert_eq!(all, everything, "{place}: the whole DLQ");
        let ids = |v: &[DeadLetter]| v.iter().map(|e| e.id()).collect::<Vec<_>>();
        for filter in &filters {
            let expected: Vec<_> = all.iter().filter(|e| filter.matches(e)).cloned().collect();
            let whole = dlq.list(filter, Page::first(usize::MAX)).unwrap();
            assert_eq!(ids(&whole), ids(&expected), "{place}: {filter:?}");
            assert_eq!(whole, expected, "{place}: {filter:?}");
            let listed_ids = dlq.ids(filter, None).unwrap();
            assert_eq!(listed_ids, ids(&expected), "{place}: ids of {filter:?}");
            // Forwards and backwards, four at a time.
            let mut forward = Vec::new();
            let mut page = Page::first(4);
            loop {
                let got = dlq.list(filter, page).unwrap();
                let Some(last) = got.last() else { break };
                page = Page::after_cursor(Cursor::of(last), 4);
                forward.extend(ids(&got));
            }
            assert_eq!(forward, ids(&expected), "{place}: forward {filter:?}");
            let mut backward = Vec::new();
            let mut page = Page::before_cursor(
                Cursor {
                    dead_lettered_at_ms: u64::MAX,
                    id: u64::MAX,
                },
                4,
            );
            loop {
                let got = dlq.list(filter, page).unwrap();
                let Some(first) = got.first() else { break };
                page = Page::before_cursor(Cursor::of(first), 4);
                backward.splice(0..0, ids(&got));
            }
            assert_eq!(backward, ids(&expected), "{place}: backward {filter:?}");
        }
    };
    check(&q.dlq(), "live");
    let snapshot = Store::open_read_only(dir.path(), fast(&clock)).unwrap();
    check(&snapshot.dlq("orders-dlq").unwrap(), "snapshot");
    drop(snapshot);
    store.compact_now().unwrap();
    let snapshot = Store::open_read_only(dir.path(), fast(&clock)).unwrap();
    check(
        &snapshot.dlq("orders-dlq").unwrap(),
        "snapshot of a checkpoint",
    );
    drop((snapshot, q));
    store.close().unwrap();
    let store = Store::open(dir.path(), fast(&clock)).unwrap();
    check(
        &store.dlq("orders-dlq").unwrap(),
        "reopened from a checkpoint",
    );
}
