//! Time travel (issue 13): a DLQ as of a past time lists and counts what its list showed
//! then, still after compactions reclaimed the records and a reopen, and in a read-only
//! snapshot. A time before what the store keeps, or a filter on what it does not keep of
//! past entries, is a typed error.

use deadletter::audit::AuditLimits;
use deadletter::clock::{Clock, ManualClock};
use deadletter::dlq::{Cursor, DeadLetter, EntryStatus, PastDlqEntry};
use deadletter::queue::FailureReport;
use deadletter::{Error, Failure, Filter, Page, ReplayOptions, Store};

use crate::common::T0;
use crate::helpers::{config, options};

/// What a list shows of an entry that time travel keeps.
type Row = (u64, u64, String, EntryStatus, u32);

fn live_rows(entries: &[DeadLetter]) -> Vec<Row> {
    entries
        .iter()
        .map(|e| {
            (
                e.id(),
                e.dlq.dead_lettered_at_ms,
                e.failure.error_kind.clone(),
                e.status,
                e.generation,
            )
        })
        .collect()
}

fn past_rows(entries: &[PastDlqEntry]) -> Vec<Row> {
    entries
        .iter()
        .map(|e| {
            (
                e.id,
                e.dead_lettered_at_ms,
                e.error_kind.clone(),
                e.status,
                e.generation,
            )
        })
        .collect()
}

/// Leases the next message of "orders" and dead-letters it.
fn fail(store: &Store, kind: &str) -> u64 {
    let q = store.existing_queue("orders").unwrap();
    let m = q.lease(1).unwrap().remove(0);
    let f = Failure::permanent(kind, format!("order ORD-{} failed", m.id()));
    q.dead_letter(&m, &FailureReport::new(&f)).unwrap();
    m.id()
}

/// Fills segments with traffic that leaves nothing behind, so compaction reclaims them.
fn churn(store: &Store) {
    let q = store.queue("churn").unwrap();
    for _ in 0..40 {
        q.enqueue(vec![7u8; 4000]).unwrap();
        let m = q.lease(1).unwrap().remove(0);
        q.ack(&m).unwrap();
    }
}

fn all(store: &Store) -> Vec<DeadLetter> {
    let dlq = store.dlq("orders-dlq").unwrap();
    dlq.list(&Filter::all(), Page::first(100)).unwrap()
}

/// The acceptance test of issue 13: a recorded run. The list is recorded at four times
/// while entries come, are replayed, marked, deleted and come back; after two compactions
/// and a reopen the DLQ as of each time lists and counts what was recorded.
#[test]
fn the_list_as_of_an_earlier_time_is_what_it_showed_then() {
    let clock = ManualClock::new(T0);
    let dir = tempfile::tempdir().unwrap();
    let cfg = || {
        config(&clock)
            .segment_size(72 << 10)
            .max_message_size(4 << 10)
    };
    let store = Store::open(dir.path(), cfg()).unwrap();
    let q = store.queue_with("orders", options(1)).unwrap();
    let ids: Vec<u64> = (0..5).map(|i| q.enqueue(format!("{i}")).unwrap()).collect();
    let dlq = q.dlq();
    let mut recorded = Vec::new();
    let mut record = |store: &Store| {
        let stats = store.dlq("orders-dlq").unwrap().stats();
        recorded.push((Clock::now_ms(&clock), live_rows(&all(store)), stats));
    };
    record(&store);

    clock.advance(1_000);
    for kind in ["Timeout", "NotFound", "Timeout"] {
        fail(&store, kind);
    }
    record(&store);

    clock.advance(1_000);
    assert_eq!(fail(&store, "NotFound"), ids[3]);
    dlq.replay_one(ids[0], &ReplayOptions::to_origin()).unwrap();
    dlq.mark_reprocessed(ids[1], true).unwrap();
    dlq.delete(ids[2]).unwrap();
    record(&store);

    // 4 and the replayed 0 fail; the purge takes the reprocessed 1.
    clock.advance(1_000);
    fail(&store, "Timeout");
    fail(&store, "Timeout");
    assert_eq!(dlq.purge(std::time::Duration::ZERO, false).unwrap(), 1);
    record(&store);
    assert_eq!(
        recorded.iter().map(|r| r.1.len()).collect::<Vec<_>>(),
        [0, 3, 2, 3],
        "the run shows the DLQ growing and shrinking"
    );

    let check = |store: &Store, when: &str| {
        assert_eq!(store.audit_horizon(), 0, "{when}");
        let dlq = store.dlq("orders-dlq").unwrap();
        for (t, rows, stats) in &recorded {
            let past = dlq.as_of(*t).unwrap();
            assert_eq!(past.as_of_ms(), *t);
            let listed = past.list(&Filter::all(), Page::first(100)).unwrap();
            assert_eq!(past_rows(&listed), *rows, "{when}: as of {}", t - T0);
            let s = past.stats();
            assert_eq!(
                (s.total, s.pending, s.reprocessed, s.oldest_age_ms),
                (
                    stats.total,
                    stats.pending,
                    stats.reprocessed,
                    stats.oldest_age_ms
                ),
                "{when}: as of {}",
                t - T0
            );
            assert_eq!(s.by_error_kind, stats.by_error_kind, "{when}");
            assert_eq!(s.by_fingerprint, stats.by_fingerprint, "{when}");
        }
        // The past keeps each entry's failure: filters and pages work on it.
        let past = dlq.as_of(T0 + 2_000).unwrap();
        let mut kind = Filter::all();
        kind.error_kind = Some("NotFound".into());
        let listed = past.list(&kind, Page::first(10)).unwrap();
        assert_eq!(
            listed.iter().map(|e| e.id).collect::<Vec<_>>(),
            [ids[1], ids[3]]
        );
        assert_eq!(
            listed[0].status,
            EntryStatus::Reprocessed {
                success: true,
                at_ms: T0 + 2_000
            }
        );
        assert_eq!(listed[1].error_message, "order ORD-3 failed");
        let second = past.list(&Filter::all(), Page::after(ids[1], 1)).unwrap();
        assert_eq!(second[0].id, ids[3]);
        let last = Cursor {
            dead_lettered_at_ms: T0 + 2_000,
            id: ids[3],
        };
        let before = past
            .list(&Filter::all(), Page::before_cursor(last, 5))
            .unwrap();
        assert_eq!(before.iter().map(|e| e.id).collect::<Vec<_>>(), [ids[1]]);
        assert!(matches!(
            past.list(&Filter::all(), Page::after(ids[2], 1)),
            Err(Error::NotFound(_))
        ));
        // What the past does not keep cannot be asked.
        let mut payload = Filter::all();
        payload.payload_contains = Some("3".into());
        assert!(matches!(
            past.list(&payload, Page::first(10)),
            Err(Error::NotKept(what)) if what == "payloads"
        ));
    };
    check(&store, "live");

    let mut deleted = 0;
    for _ in 0..2 {
        churn(&store);
        deleted += store.compact_now().unwrap().segments_deleted;
    }
    assert!(deleted > 0);
    check(&store, "after compaction");
    let snapshot = Store::open_read_only(dir.path(), cfg()).unwrap();
    check(&snapshot, "read-only snapshot");
    drop(snapshot);
    drop((q, dlq));
    store.close().unwrap();
    let store = Store::open(dir.path(), cfg()).unwrap();
    check(&store, "after a reopen");
}

/// What the store no longer keeps moves its horizon: earlier times are refused with the
/// earliest time answered, later ones still answered.
#[test]
fn a_time_before_what_the_store_keeps_is_a_typed_error() {
    let clock = ManualClock::new(T0);
    let dir = tempfile::tempdir().unwrap();
    let limits = AuditLimits {
        tombstones: 1,
        ..AuditLimits::default()
    };
    let store = Store::open(dir.path(), config(&clock).audit_limits(limits)).unwrap();
    let q = store.queue_with("orders", options(1)).unwrap();
    q.enqueue(b"a").unwrap();
    q.enqueue(b"b").unwrap();
    let a = fail(&store, "Timeout");
    let b = fail(&store, "Timeout");
    clock.advance(1_000);
    q.dlq().delete(a).unwrap();
    clock.advance(1_000);
    // The second tombstone drops the first: what was in the DLQ before a's removal is
    // no longer fully known.
    q.dlq().delete(b).unwrap();
    assert_eq!(store.audit_horizon(), T0 + 1_000);
    match q.dlq().as_of(T0 + 999) {
        Err(Error::BeforeHorizon {
            asked_ms,
            earliest_ms,
        }) => assert_eq!((asked_ms, earliest_ms), (T0 + 999, T0 + 1_000)),
        other => panic!("{other:?}"),
    }
    let past = q.dlq().as_of(T0 + 1_000).unwrap();
    let listed = past.list(&Filter::all(), Page::first(10)).unwrap();
    assert_eq!(listed.iter().map(|e| e.id).collect::<Vec<_>>(), [b]);
    assert!(q.dlq().as_of(T0 + 2_000).unwrap().is_empty());
    let text = Error::BeforeHorizon {
        asked_ms: 1,
        earliest_ms: 2,
    }
    .to_string();
    assert!(text.contains("earliest time"), "{text}");
}
