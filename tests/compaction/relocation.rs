//! Relocated records keep what they carry: an imported DLQ entry its envelope, a message its
//! time to live, through a checkpoint reopen and a full replay alike.

use std::time::Duration;

use deadletter::clock::ManualClock;
use deadletter::queue::{EnqueueOptions, FailureReport};
use deadletter::{Failure, Store};

use crate::common::{self, T0};
use crate::helpers::{churn, config, store_first_segment};

/// An imported DLQ entry's envelope is its payload record: relocation copies that record
/// once and the entry keeps its payload, failure and metadata, through a checkpoint reopen
/// and a full replay alike.
#[test]
fn a_relocated_imported_entry_keeps_its_envelope() {
    let clock = ManualClock::new(T0);
    let (dir, store) = common::temp_store(config(&clock));
    let source = store.queue("source").unwrap();
    let target = store.queue("target").unwrap();
    source
        .enqueue("imported payload \u{0}\u{ff} bytes")
        .unwrap();
    let m = source.lease(1).unwrap().remove(0);
    let failure = Failure::permanent("ImportKind", "import me").with_context("k", "v");
    source
        .dead_letter(&m, &FailureReport::new(&failure).worker("w-1"))
        .unwrap();
    let original = source.dlq().get(m.id()).unwrap();
    let id = target.dlq().import(&original).unwrap();
    source.dlq().delete(m.id()).unwrap();
    let expected = target.dlq().get(id).unwrap();
    churn(&store, 400);
    let r = store.compact_now().unwrap();
    assert_eq!(r.records_relocated, 1, "one record, copied once: {r:?}");
    assert_eq!(target.dlq().get(id).unwrap(), expected);
    churn(&store, 400);
    store.compact_now().unwrap();
    assert!(
        store.storage_stats().first_position > 0,
        "the original is gone"
    );
    assert_eq!(target.dlq().get(id).unwrap(), expected);
    drop((source, target));
    store.close().unwrap();
    let store = Store::open(dir.path(), config(&clock)).unwrap();
    let dlq = store.queue("target").unwrap().dlq();
    let got = dlq.get(id).unwrap();
    assert_eq!(got, expected);
    assert_eq!(got.payload, original.payload);
    assert_eq!(got.failure, original.failure);
}

/// A message relocated with a TTL keeps its expiry: through a checkpoint reopen (the
/// original segment deleted) and through a full replay (originals and copies both in the
/// log).
#[test]
fn relocated_messages_keep_their_ttl() {
    for full_replay in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new(T0);
        let store = Store::open(dir.path(), config(&clock)).unwrap();
        let q = store.queue("q").unwrap();
        let filler = store.queue("filler").unwrap();
        let ttl = EnqueueOptions::new().ttl(Duration::from_secs(600));
        let id = q.enqueue_with("short-lived", &ttl).unwrap();
        churn(&store, 400);
        let r = store.compact_now().unwrap();
        assert!(r.records_relocated >= 1, "{r:?}");
        if !full_replay {
            churn(&store, 400);
            store.compact_now().unwrap();
            assert!(store.storage_stats().first_position > 0);
        }
        drop((q, filler));
        store.close().unwrap();
        if full_replay {
            assert_eq!(store_first_segment(dir.path()), 0, "nothing reclaimed yet");
            for slot in ["checkpoint-0", "checkpoint-1"] {
                let _ = std::fs::remove_file(dir.path().join(slot));
            }
        }
        clock.advance(599_000);
        let store = Store::open(dir.path(), config(&clock)).unwrap();
        let q = store.queue("q").unwrap();
        assert_eq!(store.compact_now().unwrap().expired_to_dlq, 0);
        clock.advance(2_000);
        let r = store.compact_now().unwrap();
        assert_eq!(r.expired_to_dlq, 1, "full replay: {full_replay}");
        let entry = q.dlq().get(id).unwrap();
        assert_eq!(entry.failure.error_kind, "expired");
        assert_eq!(entry.payload, b"short-lived");
    }
}

/// A message larger than the opener's `max_message_size` (a process with a larger limit
/// wrote it) is relocated by compaction like any other: the limit applies to new
/// enqueues, never to carrying a stored record forward.
#[test]
fn a_message_over_the_openers_limit_is_relocated() {
    let clock = ManualClock::new(T0);
    let dir = tempfile::tempdir().unwrap();
    let big: Vec<u8> = (0..100_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
    let id = {
        let store = Store::open(dir.path(), config(&clock).max_message_size(128 << 10)).unwrap();
        let id = store.queue("big").unwrap().enqueue(&big).unwrap();
        churn(&store, 400);
        store.close().unwrap();
        id
    };
    // The opener's limit (4 KiB, the helpers' configuration) is far below the message.
    let store = Store::open(dir.path(), config(&clock)).unwrap();
    let q = store.queue("big").unwrap();
    assert!(matches!(
        q.enqueue(&big),
        Err(deadletter::Error::TooLarge { .. })
    ));
    let first = store_first_segment(dir.path());
    let r = store.compact_now().unwrap();
    assert!(r.records_relocated >= 1, "{r:?}");
    churn(&store, 400);
    store.compact_now().unwrap();
    assert!(
        store_first_segment(dir.path()) > first,
        "the original is gone"
    );
    drop(q);
    store.close().unwrap();
    let store = Store::open(dir.path(), config(&clock)).unwrap();
    let msgs = store.queue("big").unwrap().lease(10).unwrap();
    assert_eq!(msgs.len(), 1);
    assert_eq!(msgs[0].id(), id);
    assert!(msgs[0].payload() == big.as_slice());
}
