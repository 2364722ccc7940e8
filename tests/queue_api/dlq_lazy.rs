//! Lazy listings (`Dlq::list_lazy`): each entry's accessors and its decoded envelope equal
//! the whole entry `Dlq::list` returns, for entries of every origin, under filters the
//! index answers and filters that read envelopes, after a compaction; and a lazy entry
//! decodes from its own bytes after its entry left the DLQ and the store was closed.

use deadletter::clock::{Clock, ManualClock};
use deadletter::dlq::{DeadLetter, LazyDeadLetter};
use deadletter::queue::{EnqueueOptions, FailureOutcome, FailureReport};
use deadletter::{Failure, Filter, Page, ReplayOptions};

use crate::common::{self, T0};
use crate::helpers::{fast, options};

/// Each lazy entry's fields and decoded envelope against the whole entry at its place.
fn check(lazy: &[LazyDeadLetter], whole: &[DeadLetter], place: &str) {
    assert_eq!(lazy.len(), whole.len(), "{place}: as many entries");
    for (l, w) in lazy.iter().zip(whole) {
        let at = format!("{place}: entry {}", w.id());
        assert_eq!(l.id(), w.id(), "{at}");
        assert_eq!(l.queue(), w.metadata.queue, "{at}");
        assert_eq!(l.dlq_name(), w.dlq_name, "{at}");
        assert_eq!(l.payload(), w.payload.as_slice(), "{at}");
        assert_eq!(l.error_kind(), w.failure.error_kind, "{at}");
        assert_eq!(l.error_message(), w.failure.error_message, "{at}");
        assert_eq!(l.delivery_count(), w.metadata.delivery_count, "{at}");
        assert_eq!(l.dead_lettered_at_ms(), w.dlq.dead_lettered_at_ms, "{at}");
        assert_eq!(l.status(), w.status, "{at}");
        assert_eq!(l.generation(), w.generation, "{at}");
        assert_eq!(l.fingerprint(), w.fingerprint, "{at}");
        assert_eq!(&l.decode().unwrap(), w, "{at}: decoded");
        assert_eq!(&l.clone().into_whole().unwrap(), w, "{at}: into_whole");
    }
}

/// Entries dead-lettered with history, attributes, details, context, tags and a worker,
/// dead again after a corrected replay, marked reprocessed, and imported (envelope in the
/// payload record), listed lazily with every kind of filter and page, live and after a
/// compaction relocated their records.
#[test]
fn lazy_entries_equal_whole_ones_for_every_origin_and_filter() {
    let clock = ManualClock::new(T0);
    let (_dir, store) = common::temp_store(fast(&clock));
    let q = store.queue_with("orders", options(2)).unwrap();
    for i in 0..8 {
        let opts = EnqueueOptions::new().attribute("batch", (i % 2).to_string());
        q.enqueue_with(format!("order-{i}"), &opts).unwrap();
        // A first, transient attempt in the history, then the permanent failure.
        let m = q.lease(1).unwrap().remove(0);
        let first = Failure::transient("Timeout", format!("order {i} timed out"));
        let outcome = q.retry(&m, &FailureReport::new(&first).worker("w1"), clock.now_ms());
        assert!(
            matches!(outcome, Ok(FailureOutcome::Retried { .. })),
            "{i}: {outcome:?}"
        );
        clock.advance(1);
        let m = q.lease(1).unwrap().remove(0);
        let kind = if i % 2 == 0 { "Timeout" } else { "Validation" };
        let last = Failure::permanent(kind, format!("order {i} failed"))
            .with_details("line 3")
            .with_context("shard", "7");
        q.dead_letter(
            &m,
            &FailureReport::new(&last)
                .worker("w2")
                .tag("team", "billing"),
        )
        .unwrap();
        clock.advance(10);
    }
    let dlq = q.dlq();
    let ids = dlq.ids(&Filter::all(), None).unwrap();
    dlq.replay_corrected(ids[1], b"order-1 fixed", &ReplayOptions::to_origin())
        .unwrap();
    let m = q.lease(1).unwrap().remove(0);
    let again = Failure::permanent("Validation", "still wrong");
    q.dead_letter(&m, &FailureReport::new(&again)).unwrap();
    dlq.mark_reprocessed(ids[2], false).unwrap();
    let imported = dlq.import(&dlq.get(ids[3]).unwrap()).unwrap();

    let filters = [
        Filter::all(),
        Filter::error_kind("Validation"),
        Filter::all().pending_only(),
        Filter::all().message_contains("order 5"),
        Filter::all().attribute("batch", "1"),
    ];
    for place in ["live", "compacted"] {
        if place == "compacted" {
            store.compact_now().unwrap();
        }
        for filter in &filters {
            let whole = dlq.list(filter, Page::first(100)).unwrap();
            let lazy = dlq.list_lazy(filter, Page::first(100)).unwrap();
            check(&lazy, &whole, &format!("{place}, {filter:?}"));
            let whole = dlq.list(filter, Page::after(ids[0], 3)).unwrap();
            let lazy = dlq.list_lazy(filter, Page::after(ids[0], 3)).unwrap();
            check(&lazy, &whole, &format!("{place}, {filter:?}, a page"));
        }
    }
    let all = dlq.list_lazy(&Filter::all(), Page::first(100)).unwrap();
    let corrected = all
        .iter()
        .find(|e| e.id() == ids[1])
        .unwrap()
        .decode()
        .unwrap();
    assert_eq!(corrected.payload, b"order-1 fixed");
    assert_eq!(corrected.replaced_payload.as_deref(), Some(&b"order-1"[..]));
    assert_eq!(corrected.failure.error_message, "still wrong");
    let dead = all.iter().find(|e| e.id() == ids[0]).unwrap();
    assert!(
        dead.decoded().is_none(),
        "an entry of a plain listing waits to be decoded"
    );
    let whole = dead.decode().unwrap();
    assert_eq!(whole.failure.attempts.len(), 2);
    assert_eq!(
        whole.metadata.attributes.get("batch").map(String::as_str),
        Some("0")
    );
    assert_eq!(
        whole.dlq.tags.get("team").map(String::as_str),
        Some("billing")
    );
    let copy = all.iter().find(|e| e.id() == imported).unwrap();
    assert!(
        copy.decoded().is_some(),
        "an imported entry is decoded when read"
    );
}

/// A lazy entry holds the bytes it was read from: it decodes after its entry was deleted
/// and the store closed.
#[test]
fn a_lazy_entry_decodes_after_its_entry_left_and_the_store_closed() {
    let clock = ManualClock::new(T0);
    let (_dir, store) = common::temp_store(fast(&clock));
    let q = store.queue_with("orders", options(1)).unwrap();
    q.enqueue("order-1").unwrap();
    let m = q.lease(1).unwrap().remove(0);
    let f = Failure::permanent("Validation", "bad order").with_details("field id");
    q.dead_letter(&m, &FailureReport::new(&f)).unwrap();
    let dlq = q.dlq();
    let whole = dlq.list(&Filter::all(), Page::first(1)).unwrap().remove(0);
    let lazy = dlq
        .list_lazy(&Filter::all(), Page::first(1))
        .unwrap()
        .remove(0);
    dlq.delete(m.id()).unwrap();
    drop((dlq, q));
    store.close().unwrap();
    assert_eq!(lazy.decode().unwrap(), whole);
    assert_eq!(
        lazy.into_whole().unwrap().failure.details.as_deref(),
        Some("field id")
    );
}
