//! Browsing a DLQ: stats come from counters (no record is read, before and after a
//! reopen) while list and get read their entries; pages and every filter, with no side
//! effect.

use deadletter::clock::ManualClock;
use deadletter::dlq::{DeadLetter, EntryStatus};
use deadletter::queue::{EnqueueOptions, FailureReport};
use deadletter::{Failure, Filter, Page};

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
    assert_eq!(qstats.counts.dead_lettered, N as u64);

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
    let ids_of = |v: Vec<DeadLetter>| v.iter().map(|e| e.id()).collect::<Vec<_>>();

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
    use deadletter::dlq::Cursor;
    use deadletter::sim::StoreHooks;
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
/// index makes), whole and as summaries: on the live store, on a read-only snapshot, and
/// after a checkpoint and a reopen (where the index is rebuilt from the checkpoint and the
/// fingerprints from the envelopes).
#[test]
fn filtered_pages_agree_with_the_envelopes_everywhere() {
    use deadletter::clock::Clock;
    use deadletter::dlq::{Cursor, DeadLetter};
    use deadletter::{Dlq, Store};
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
            check_summaries(dlq, filter, &expected, place);
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

/// Checks that `dlq`'s summaries of the entries matching `filter` are `expected`'s (the
/// whole entries, oldest first), each as `DeadLetterSummary::from` makes it: the whole
/// listing, pages of three forwards (after ids and after cursors) and backwards, and each
/// entry by id.
fn check_summaries(
    dlq: &deadletter::Dlq,
    filter: &Filter,
    expected: &[deadletter::dlq::DeadLetter],
    place: &str,
) {
    use deadletter::dlq::{Cursor, DeadLetterSummary};
    let expected: Vec<DeadLetterSummary> = expected
        .iter()
        .cloned()
        .map(DeadLetterSummary::from)
        .collect();
    let all = dlq.list_summaries(filter, Page::first(usize::MAX)).unwrap();
    assert_eq!(all, expected, "{place}: summaries of {filter:?}");
    let cursor = |s: &DeadLetterSummary| Cursor {
        dead_lettered_at_ms: s.dead_lettered_at_ms,
        id: s.id,
    };
    for by_cursor in [false, true] {
        let mut forward = Vec::new();
        let mut page = Page::first(3);
        loop {
            let got = dlq.list_summaries(filter, page).unwrap();
            let Some(last) = got.last() else { break };
            page = if by_cursor {
                Page::after_cursor(cursor(last), 3)
            } else {
                Page::after(last.id, 3)
            };
            forward.extend(got);
        }
        assert_eq!(forward, expected, "{place}: summaries forward {filter:?}");
    }
    let mut backward = Vec::new();
    let mut page = Page::before_cursor(
        Cursor {
            dead_lettered_at_ms: u64::MAX,
            id: u64::MAX,
        },
        3,
    );
    loop {
        let got = dlq.list_summaries(filter, page).unwrap();
        let Some(first) = got.first() else { break };
        page = Page::before_cursor(cursor(first), 3);
        backward.splice(0..0, got);
    }
    assert_eq!(backward, expected, "{place}: summaries backward {filter:?}");
    for s in &expected {
        assert_eq!(&dlq.summary(s.id).unwrap(), s, "{place}: summary {}", s.id);
    }
}

/// Summaries of entries of every origin (dead-lettered, imported, dead again after a
/// corrected replay, marked reprocessed) equal their whole entries' on the live store and
/// after a compaction relocated their records; pages taken while entries are replayed and
/// deleted in between hold what is left, in order; an entry that left the DLQ, or that is
/// in another queue's DLQ, has no summary.
#[test]
fn summaries_follow_imports_corrections_replays_and_deletes() {
    use deadletter::dlq::DeadLetterSummary;
    use deadletter::{Error, ReplayOptions};
    let clock = ManualClock::new(T0);
    let (_dir, store) = common::temp_store(fast(&clock));
    let q = store.queue_with("orders", options(1)).unwrap();
    let other = store.queue_with("emails", options(1)).unwrap();
    for i in 0..12 {
        q.enqueue(format!("order-{i}")).unwrap();
        let kind = if i % 2 == 0 { "Timeout" } else { "Validation" };
        fail_with(&q, kind, &format!("order {i} failed"));
        clock.advance(10);
    }
    other.enqueue("email").unwrap();
    let email = fail_with(&other, "Timeout", "smtp down");
    let dlq = q.dlq();
    let ids = dlq.ids(&Filter::all(), None).unwrap();
    // Dead again after a corrected replay: a new payload, and a dead-letter record after it.
    dlq.replay_corrected(ids[1], b"order-1 fixed", &ReplayOptions::to_origin())
        .unwrap();
    clock.advance(10);
    fail_with(&q, "Validation", "still wrong");
    dlq.mark_reprocessed(ids[2], true).unwrap();
    // Imported from an export: the envelope is in the payload record.
    let (_dir2, store2) = common::temp_store(fast(&clock));
    let imported = store2
        .queue("orders")
        .unwrap()
        .dlq()
        .import(&dlq.get(ids[3]).unwrap())
        .unwrap();
    let dlq2 = store2.dlq("orders-dlq").unwrap();
    let check = |dlq: &deadletter::Dlq, place: &str| {
        let whole = dlq.list(&Filter::all(), Page::first(100)).unwrap();
        let expected: Vec<DeadLetterSummary> =
            whole.into_iter().map(DeadLetterSummary::from).collect();
        let got = dlq
            .list_summaries(&Filter::all(), Page::first(100))
            .unwrap();
        assert_eq!(got, expected, "{place}");
        for s in &got {
            assert_eq!(&dlq.summary(s.id).unwrap(), s, "{place}: {}", s.id);
        }
        got
    };
    let got = check(&dlq, "live");
    let corrected = got.iter().find(|s| s.id == ids[1]).unwrap();
    assert_eq!(
        (
            corrected.payload.as_slice(),
            corrected.error_message.as_str()
        ),
        (&b"order-1 fixed"[..], "still wrong")
    );
    let reprocessed = got.iter().find(|s| s.id == ids[2]).unwrap().status;
    assert!(matches!(
        reprocessed,
        EntryStatus::Reprocessed { success: true, .. }
    ));
    let imported = check(&dlq2, "imported")
        .into_iter()
        .find(|s| s.id == imported)
        .unwrap();
    assert_eq!(
        (imported.payload.as_slice(), imported.error_message.as_str()),
        (&b"order-3"[..], "order 3 failed")
    );
    store.compact_now().unwrap();
    store2.compact_now().unwrap();
    check(&dlq, "compacted");
    check(&dlq2, "imported, compacted");

    // Pages while entries leave between them: what is left, in order, none twice.
    let validation = Filter::error_kind("Validation");
    let first = dlq.list_summaries(&validation, Page::first(2)).unwrap();
    let first_ids: Vec<u64> = first.iter().map(|s| s.id).collect();
    assert_eq!(first_ids, [ids[3], ids[5]]);
    dlq.replay_one(ids[5], &ReplayOptions::to_origin()).unwrap();
    dlq.delete(ids[7]).unwrap();
    let next = dlq
        .list_summaries(&validation, Page::after_cursor(cursor_of(&first[1]), 10))
        .unwrap();
    let next_ids: Vec<u64> = next.iter().map(|s| s.id).collect();
    assert_eq!(next_ids, [ids[9], ids[11], ids[1]]);
    // The entry a page was taken after has left: an id no longer works, its cursor does.
    assert!(matches!(
        dlq.list_summaries(&validation, Page::after(ids[5], 10)),
        Err(Error::NotFound(_))
    ));
    for gone in [ids[5], ids[7], email] {
        assert!(
            matches!(dlq.summary(gone), Err(Error::NotFound(id)) if id == gone),
            "{gone}"
        );
    }
    assert_eq!(
        other.dlq().summary(email).unwrap().error_message,
        "smtp down"
    );
}

fn fail_with(q: &deadletter::Queue, kind: &str, message: &str) -> u64 {
    let m = q.lease(1).unwrap().remove(0);
    let f = Failure::permanent(kind, message);
    q.dead_letter(&m, &FailureReport::new(&f)).unwrap();
    m.id()
}

fn cursor_of(s: &deadletter::dlq::DeadLetterSummary) -> deadletter::dlq::Cursor {
    deadletter::dlq::Cursor {
        dead_lettered_at_ms: s.dead_lettered_at_ms,
        id: s.id,
    }
}
