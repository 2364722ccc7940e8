//! Checkpoints: a reopen replays only the log after the newest checkpoint; the two slots
//! alternate, a damaged one falls back to the other and is rewritten first, and a crash
//! between a checkpoint and reclaim reads both back; a compacted log without a good
//! checkpoint, or a checkpoint past the log's end, is `BadCheckpoint`, never a wrong state.

use deadletter::clock::ManualClock;
use deadletter::recovery::{CorruptionKind, CorruptionLocation, RecoveryMode};
use deadletter::sim::StoreHooks;
use deadletter::{Error, Store};

use crate::common::{self, T0};
use crate::helpers::{churn, config, damage, slot_positions};

#[test]
fn reopen_from_a_checkpoint_replays_only_the_tail() {
    let clock = ManualClock::new(T0);
    let (dir, store) = common::temp_store(config(&clock));
    let q = store.queue("q").unwrap();
    for i in 0..500 {
        q.enqueue(format!("m{i}")).unwrap();
    }
    let r = store.compact_now().unwrap();
    let cp = r.checkpoint_position.unwrap();
    for i in 500..510 {
        q.enqueue(format!("m{i}")).unwrap();
    }
    drop(q);
    store.close().unwrap();
    let store = Store::open(dir.path(), config(&clock)).unwrap();
    assert!(cp > 0);
    let q = store.queue("q").unwrap();
    assert_eq!(q.stats().counts.ready, 510);
    assert_eq!(q.stats().counts.enqueued, 510);
    let all = q.lease(1000).unwrap();
    assert_eq!(all.len(), 510);
    assert_eq!(all[509].payload(), b"m509");
    // A damaged newest checkpoint falls back to the older one or a full replay.
    drop(all);
    drop(q);
    store.close().unwrap();
    for slot in ["checkpoint-0", "checkpoint-1"] {
        let p = dir.path().join(slot);
        if p.exists() {
            let mut bytes = std::fs::read(&p).unwrap();
            let n = bytes.len();
            bytes[n / 2] ^= 0xff;
            std::fs::write(&p, bytes).unwrap();
        }
    }
    let store = Store::open(dir.path(), config(&clock)).unwrap();
    assert_eq!(
        store.queue("q").unwrap().stats().counts.in_flight
            + store.queue("q").unwrap().stats().counts.ready,
        510
    );
}

#[test]
fn a_crash_between_checkpoint_and_reclaim_reads_the_slots_back() {
    let clock = ManualClock::new(T0);
    let (dir, store) = common::temp_store(config(&clock));
    let q = store.queue("q").unwrap();
    let keep = q.enqueue("kept across everything").unwrap();
    churn(&store, 500);
    let p1 = store.compact_now().unwrap().checkpoint_position.unwrap();
    churn(&store, 500);
    let p2 = store.compact_now().unwrap().checkpoint_position.unwrap();
    assert_eq!(slot_positions(dir.path()), [Some(p1), Some(p2)]);
    churn(&store, 50);
    store.sync().unwrap();
    drop(q);
    // Dies after the second checkpoint, before anything else.
    store.abandon();

    let store = Store::open(dir.path(), config(&clock)).unwrap();
    let q = store.queue("q").unwrap();
    assert_eq!(q.stats().counts.ready, 1);
    let first_before = store.storage_stats().first_position;
    // The next checkpoint replaces the older slot (slot 0), never the newer one.
    let r = store.compact_now().unwrap();
    let p3 = r.checkpoint_position.unwrap();
    assert!(p3 > p2);
    assert_eq!(slot_positions(dir.path()), [Some(p3), Some(p2)]);
    // Reclaim stays below the older checkpoint and the kept message's payload.
    assert!(store.storage_stats().first_position <= p2);
    assert!(store.storage_stats().first_position >= first_before);
    let m = q.lease(10).unwrap();
    assert_eq!(m.len(), 1);
    assert_eq!(m[0].id(), keep);
    assert_eq!(m[0].payload(), b"kept across everything");
}

#[test]
fn a_damaged_slot_falls_back_to_the_other_and_is_rewritten_first() {
    let clock = ManualClock::new(T0);
    let (dir, store) = common::temp_store(config(&clock));
    let q = store.queue("q").unwrap();
    q.enqueue("a").unwrap();
    churn(&store, 300);
    let p1 = store.compact_now().unwrap().checkpoint_position.unwrap();
    q.enqueue("b").unwrap();
    churn(&store, 300);
    let p2 = store.compact_now().unwrap().checkpoint_position.unwrap();
    q.enqueue("c").unwrap();
    drop(q);
    store.close().unwrap();
    // The newer slot (1) is damaged: the older one plus the log after it rebuild the state.
    damage(&dir.path().join("checkpoint-1"));
    assert_eq!(slot_positions(dir.path()), [Some(p1), None]);
    let store = Store::open(dir.path(), config(&clock)).unwrap();
    let q = store.queue("q").unwrap();
    assert_eq!(q.stats().counts.ready, 3);
    assert_eq!(store.queue("churn").unwrap().stats().counts.acked, 600);
    // The damaged slot is written next; the good one is kept until then.
    let p3 = store.compact_now().unwrap().checkpoint_position.unwrap();
    assert!(p3 > p2);
    assert_eq!(slot_positions(dir.path()), [Some(p1), Some(p3)]);
    let got: Vec<String> = q
        .lease(10)
        .unwrap()
        .iter()
        .map(|m| String::from_utf8_lossy(&m.payload()[..m.payload().len().min(12)]).into_owned())
        .collect();
    assert_eq!(got, ["a", "b", "c"]);
}

#[test]
fn a_compacted_log_without_a_good_checkpoint_is_a_typed_error() {
    let clock = ManualClock::new(T0);
    let (dir, store) = common::temp_store(config(&clock));
    let q = store.queue("q").unwrap();
    for _ in 0..3 {
        churn(&store, 400);
        store.compact_now().unwrap();
    }
    q.enqueue("live").unwrap();
    assert!(
        store.storage_stats().first_position > 0,
        "the log was compacted"
    );
    drop(q);
    store.close().unwrap();
    let expect_bad_checkpoint = |what: &str| match Store::open(dir.path(), config(&clock)) {
        Err(Error::Corruption {
            kind: CorruptionKind::BadCheckpoint,
            ..
        }) => {}
        Err(e) => panic!("{what}: wrong error {e:?}"),
        Ok(_) => panic!("{what}: opened a compacted log without its checkpoint"),
    };
    // Both damaged.
    damage(&dir.path().join("checkpoint-0"));
    damage(&dir.path().join("checkpoint-1"));
    expect_bad_checkpoint("both slots damaged");
    // Both missing: the log's head is missing, named against a file that is there (there
    // is no checkpoint file to name).
    std::fs::remove_file(dir.path().join("checkpoint-0")).unwrap();
    std::fs::remove_file(dir.path().join("checkpoint-1")).unwrap();
    match Store::open(dir.path(), config(&clock)) {
        Err(Error::Corruption {
            kind: CorruptionKind::MissingRange { start: 0, end },
            location: CorruptionLocation::File { path, .. },
        }) => {
            assert!(end > 0 && path.exists(), "{end} {path:?}");
        }
        other => panic!("both slots missing: {other:?}"),
    }
}

/// A checkpoint covering more log than there is (the log lost durable records) is a typed
/// error in strict mode, naming the high-water mark and where the records end; in
/// quarantine mode it is removed, so that it can never describe the records written after
/// the reopen, and appends resume past its position (positions never go backwards).
#[test]
fn a_checkpoint_past_the_log_end_is_never_used() {
    let clock = ManualClock::new(T0);
    // One store: `short` is a copy of it after three messages, `long` goes on to 200 and a
    // checkpoint, which is then put into the copy (the same store, so the same id: a log
    // that lost the records its checkpoint covers).
    let long = tempfile::tempdir().unwrap();
    let short = tempfile::tempdir().unwrap();
    {
        let store = Store::open(long.path(), config(&clock)).unwrap();
        let q = store.queue("q").unwrap();
        for i in 0..3 {
            q.enqueue(format!("short-{i}")).unwrap();
        }
        drop(q);
        store.close().unwrap();
    }
    common::copy_dir(long.path(), short.path());
    {
        let store = Store::open(long.path(), config(&clock)).unwrap();
        let q = store.queue("q").unwrap();
        for i in 3..200 {
            q.enqueue(format!("long-{i}")).unwrap();
        }
        store.compact_now().unwrap();
        drop(q);
        store.close().unwrap();
    }
    std::fs::copy(
        long.path().join("checkpoint-0"),
        short.path().join("checkpoint-0"),
    )
    .unwrap();
    let (high_water, short_end) = match Store::open(short.path(), config(&clock)) {
        Err(Error::Corruption {
            kind: CorruptionKind::LostTail { expected, actual },
            ..
        }) => (expected, actual),
        other => panic!("strict open: {other:?}"),
    };
    assert!(short_end < high_water, "{short_end} {high_water}");
    let mut cfg = config(&clock);
    cfg.recovery = RecoveryMode::Quarantine;
    let store = Store::open(short.path(), cfg.clone()).unwrap();
    assert!(!short.path().join("checkpoint-0").exists());
    assert!(store.storage_stats().end_position >= high_water);
    let q = store.queue("q").unwrap();
    assert_eq!(q.stats().counts.ready, 3);
    // Ids 3..200 were handed out by the log the checkpoint described: none is given again.
    let first = q.enqueue("short-3").unwrap();
    assert!(
        first >= 200,
        "an id of a lost message handed out again: {first}"
    );
    for i in 4..300 {
        q.enqueue(format!("short-{i}")).unwrap();
    }
    drop(q);
    store.close().unwrap();
    // The gap stays on disk: later opens report it again (quarantine) or refuse it.
    let store = Store::open(short.path(), cfg).unwrap();
    let q = store.queue("q").unwrap();
    assert_eq!(q.stats().counts.ready, 300);
    assert_eq!(q.lease(1).unwrap()[0].payload(), b"short-0");
}

/// A checkpoint copied from another store (its header names another store id) is never
/// restored, nor taken for a durable mark of this log: a strict open refuses it by name
/// (`Foreign`), quarantine opens with this store's own records and lists the loss, and the
/// next checkpoint writes over it.
#[test]
fn another_stores_checkpoint_is_refused_by_name_and_never_restored() {
    let clock = ManualClock::new(T0);
    let other = tempfile::tempdir().unwrap();
    {
        let store = Store::open(other.path(), config(&clock)).unwrap();
        let q = store.queue("q").unwrap();
        for i in 0..200 {
            q.enqueue(format!("other-{i}")).unwrap();
        }
        store.compact_now().unwrap();
        drop(q);
        store.close().unwrap();
    }
    let (dir, store) = common::temp_store(config(&clock));
    let q = store.queue("q").unwrap();
    for i in 0..3 {
        q.enqueue(format!("mine-{i}")).unwrap();
    }
    drop(q);
    store.close().unwrap();
    let slot = dir.path().join("checkpoint-0");
    std::fs::copy(other.path().join("checkpoint-0"), &slot).unwrap();
    let before = common::dir_contents(dir.path());
    match Store::open(dir.path(), config(&clock)) {
        Err(Error::Corruption {
            kind: CorruptionKind::Foreign { expected, found },
            location: CorruptionLocation::File { path, .. },
        }) => {
            assert_eq!(path, slot);
            assert_ne!(expected, found);
        }
        other => panic!("strict open: {other:?}"),
    }
    let mut after = common::dir_contents(dir.path());
    after.remove("LOCK");
    let mut was = before.clone();
    was.remove("LOCK");
    assert_eq!(after, was, "a refused open changes nothing");
    let report = deadletter::verify::verify(dir.path()).unwrap();
    let foreign: Vec<&str> = report
        .checkpoints
        .iter()
        .filter(|c| c.foreign)
        .map(|c| c.file.as_str())
        .collect();
    assert_eq!(foreign, ["checkpoint-0"], "{report:?}");
    assert!(report.problems() >= 1);
    let mut cfg = config(&clock);
    cfg.recovery = RecoveryMode::Quarantine;
    let store = Store::open(dir.path(), cfg).unwrap();
    let q = store.queue("q").unwrap();
    assert_eq!(q.stats().counts.ready, 3);
    assert_eq!(q.lease(1).unwrap()[0].payload(), b"mine-0");
    assert!(
        store.storage_stats().end_position < 4096,
        "no mark of the other store's"
    );
    store.compact_now().unwrap();
    drop(q);
    store.close().unwrap();
    // The next checkpoints wrote over it: the store opens strictly again.
    let store = Store::open(dir.path(), config(&clock)).unwrap();
    assert_eq!(store.queue("q").unwrap().stats().counts.ready, 3);
    assert!(deadletter::verify::verify(dir.path()).unwrap().is_clean());
}
