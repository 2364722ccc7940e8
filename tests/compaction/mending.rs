//! Quarantine mends what it can: a store whose active segment was cut below what a
//! checkpoint covers opens under `RecoveryMode::Quarantine` with the loss reported, keeps
//! what the checkpoint and the remaining records hold, and never hands an id out again; a
//! strict open refuses it, and an open that fails leaves the directory as it found it.

use std::collections::BTreeMap;
use std::path::Path;

use deadletter::clock::ManualClock;
use deadletter::queue::FailureReport;
use deadletter::recovery::{CorruptionKind, RecoveryMode};
use deadletter::{Error, Failure, Store};

use crate::common::T0;
use crate::helpers::config;

/// Every file in `dir` with its length and a hash of its bytes.
fn snapshot(dir: &Path) -> BTreeMap<String, (u64, u64)> {
    use std::hash::{Hash, Hasher};
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let name = e.file_name().into_string().unwrap();
            let bytes = std::fs::read(e.path()).unwrap_or_default();
            let mut h = std::collections::hash_map::DefaultHasher::new();
            bytes.hash(&mut h);
            (name, (bytes.len() as u64, h.finish()))
        })
        .collect()
}

/// The entries whose length or bytes differ between two snapshots, or that only one has.
fn changed(a: &BTreeMap<String, (u64, u64)>, b: &BTreeMap<String, (u64, u64)>) -> Vec<String> {
    a.keys()
        .chain(b.keys())
        .filter(|k| a.get(*k) != b.get(*k))
        .map(|k| format!("{k}: {:?} -> {:?}", a.get(k), b.get(k)))
        .collect()
}

/// The store of the report: 256 KiB segments, compaction on, 5 queues of 300 messages,
/// then a checkpoint. Returns the path of the active segment.
fn fill(dir: &Path, clock: &ManualClock) -> std::path::PathBuf {
    let store = Store::open(dir, config(clock)).unwrap();
    for q in 0..5 {
        let queue = store.queue(&format!("q{q}")).unwrap();
        for i in 0..300 {
            queue
                .enqueue(format!("q{q}-m{i}-{}", "x".repeat(600)))
                .unwrap();
            if i % 100 == 99 {
                // Of each hundred, half is done with (compaction has segments to reclaim)
                // and a tenth fails for good (DLQ entries: their envelopes are read at open).
                let done = queue.lease(50).unwrap();
                queue.ack_all(&done).unwrap();
                let failure = Failure::permanent("Bad", "bad input");
                for m in queue.lease(10).unwrap() {
                    queue
                        .dead_letter(&m, &FailureReport::new(&failure))
                        .unwrap();
                }
                store.compact_now().unwrap();
            }
        }
    }
    store.compact_now().unwrap();
    let active = store.storage_stats().segments.last().unwrap().path.clone();
    store.close().unwrap();
    dir.join(active.file_name().unwrap())
}

/// Cuts the active segment to the 50,176 bytes of the reported case (`truncate -s 50176`).
fn cut_as_reported(active: &Path) {
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(active)
        .unwrap();
    file.set_len(50176).unwrap();
}

#[test]
fn a_cut_active_segment_under_a_checkpoint_opens_in_quarantine() {
    let clock = ManualClock::new(T0);
    let dir = tempfile::tempdir().unwrap();
    let active = fill(dir.path(), &clock);
    let before = deadletter::verify::verify(dir.path()).unwrap();
    assert_eq!(before.problems(), 0);
    cut_as_reported(&active);
    let cut = snapshot(dir.path());

    // Strict refuses, and changes nothing.
    match Store::open(dir.path(), config(&clock)) {
        Err(Error::Corruption { .. }) => {}
        other => panic!("strict open: {other:?}"),
    }
    let after = snapshot(dir.path());
    assert!(
        changed(&cut, &after).is_empty(),
        "{:?}",
        changed(&cut, &after)
    );

    let quarantine = config(&clock).recovery(RecoveryMode::Quarantine);
    let store = Store::open(dir.path(), quarantine.clone()).unwrap();
    let report = store.recovery_report().clone();
    assert!(
        report
            .quarantined
            .iter()
            .any(|q| q.path == active || q.path.file_name() == active.file_name()),
        "the loss is reported against the cut segment: {report:?}"
    );
    let mut total = 0;
    for q in 0..5 {
        total += store.existing_queue(&format!("q{q}")).unwrap().len();
    }
    assert!(total > 0 && total <= 1500, "{total}");
    // What the remaining records and the checkpoint hold is delivered; a message whose
    // payload was in the lost range is `Corruption` when read, never another's bytes.
    let mut delivered = 0;
    for q in 0..5 {
        let queue = store.existing_queue(&format!("q{q}")).unwrap();
        match queue.lease(1500) {
            Ok(msgs) => {
                for m in &msgs {
                    let text = std::str::from_utf8(m.payload()).unwrap();
                    assert!(text.starts_with(&format!("q{q}-m")), "{text}");
                }
                delivered += msgs.len();
            }
            Err(Error::Corruption { location, .. }) => {
                assert!(format!("{location:?}").contains(active.to_str().unwrap()));
            }
            Err(e) => panic!("q{q}: {e:?}"),
        }
    }
    assert!(delivered > 0);
    let next = store.queue("after").unwrap().enqueue(b"new").unwrap();
    assert!(next >= 1500, "ids are never handed out again: {next}");
    store.close().unwrap();
    // It opens again (the loss reported again), and takes more.
    let store = Store::open(dir.path(), quarantine).unwrap();
    assert!(!store.recovery_report().quarantined.is_empty());
    assert_eq!(store.existing_queue("after").unwrap().len(), 1);
    store.close().unwrap();
}

#[test]
fn an_open_that_fails_after_recovery_leaves_no_new_segment() {
    let clock = ManualClock::new(T0);
    let dir = tempfile::tempdir().unwrap();
    let active = fill(dir.path(), &clock);
    assert!(
        !dir.path().join("00000000000000000000.seg").exists(),
        "compaction reclaimed the first segments"
    );
    cut_as_reported(&active);
    // Without a usable checkpoint a log that no longer starts at 0 cannot be rebuilt:
    // quarantine's recovery starts a new segment after the cut one, then the open fails.
    for slot in ["checkpoint-0", "checkpoint-1"] {
        crate::helpers::damage(&dir.path().join(slot));
    }
    let before = snapshot(dir.path());
    let quarantine = config(&clock).recovery(RecoveryMode::Quarantine);
    for _ in 0..2 {
        match Store::open(dir.path(), quarantine.clone()) {
            Err(Error::Corruption {
                kind: CorruptionKind::BadCheckpoint,
                ..
            }) => {}
            other => panic!("quarantine open: {other:?}"),
        }
        // Nothing is added, and no segment or checkpoint changes (recovery still removes
        // the cut segment's tail hint: a leftover once that segment is no longer active).
        let after = snapshot(dir.path());
        let changed: Vec<String> = changed(&before, &after)
            .into_iter()
            .filter(|c| !c.ends_with("-> None") || c.contains(".seg") || c.contains("checkpoint-"))
            .collect();
        assert!(changed.is_empty(), "the failed open left {changed:?}");
    }
}
