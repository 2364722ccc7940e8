//! A store knows which segments it needs: a deleted first, middle or last segment makes
//! `verify` exit 1 and a strict open refuse, naming the missing range and only files that
//! exist; quarantine opens with the loss listed and hands no id out again.

use std::path::{Path, PathBuf};

use deadletter::recovery::{CorruptionKind, CorruptionLocation, RecoveryMode};
use deadletter::store::Durability;
use deadletter::{Config, Error, Store};
use serde_json::Value;

use crate::run::{run, serial, stderr, stdout};

/// 256 KiB segments from the first one (so the first holds payloads the checkpoint
/// needs, not only a queue's declaration), every write durable.
fn config() -> Config {
    Config::default()
        .segment_size(256 << 10)
        .first_segment_size(256 << 10)
        .max_message_size(4 << 10)
        .durability(Durability::Always)
}

/// 5 queues of 300 messages, none taken, then a checkpoint. Returns the segment files in
/// log order.
fn fill(dir: &Path) -> Vec<PathBuf> {
    let store = Store::open(dir, config()).unwrap();
    for q in 0..5 {
        let queue = store.queue(&format!("q{q}")).unwrap();
        let payloads: Vec<String> = (0..300)
            .map(|i| format!("q{q}-m{i}-{}", "p".repeat(300)))
            .collect();
        queue.enqueue_batch(&payloads).unwrap();
    }
    store.compact_now().unwrap();
    let segments = store.storage_stats().segments;
    store.close().unwrap();
    segments
        .iter()
        .map(|s| dir.join(s.path.file_name().unwrap()))
        .collect()
}

/// `verify --json`, expected to exit 1.
fn verify_fails(dir: &Path) -> Value {
    let o = run(&["verify", dir.to_str().unwrap(), "--json"]);
    assert_eq!(o.status.code(), Some(1), "{}\n{}", stdout(&o), stderr(&o));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// The strict open's corruption: its kind, and the file it names (which must exist).
fn strict_refusal(dir: &Path) -> (CorruptionKind, PathBuf) {
    match Store::open(dir, config()) {
        Err(Error::Corruption {
            kind,
            location: CorruptionLocation::File { path, .. },
        }) => {
            assert!(
                path.exists(),
                "the error names {path:?}, which does not exist"
            );
            (kind, path)
        }
        other => panic!("strict open: {other:?}"),
    }
}

/// Quarantine opens, lists a loss, and the next id is past every one handed out.
fn quarantine_opens(dir: &Path) {
    let store = Store::open(dir, config().recovery(RecoveryMode::Quarantine)).unwrap();
    assert!(!store.recovery_report().quarantined.is_empty());
    let id = store.queue("after").unwrap().enqueue(b"new").unwrap();
    assert!(id >= 1500, "ids are never handed out again: {id}");
    store.close().unwrap();
}

#[test]
fn a_deleted_first_segment_is_reported_refused_and_quarantined() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let segments = fill(dir.path());
    assert!(segments.len() >= 3, "{segments:?}");
    std::fs::remove_file(&segments[0]).unwrap();
    let second: u64 = segments[1]
        .file_stem()
        .unwrap()
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    let d = dir.path().to_str().unwrap();

    // The checkpoint refers to records from the first message's payload on.
    let v = verify_fails(dir.path());
    let start = v["missing_range"]["start"].as_u64().unwrap();
    assert!(start < 100, "{v}");
    assert_eq!(v["missing_range"]["end"], second, "{v}");
    assert_eq!(v["problems"], 1, "{v}");
    let o = run(&["verify", d]);
    assert!(stdout(&o).contains("MISSING SEGMENTS"), "{}", stdout(&o));
    // The commands that read the store refuse it too.
    let o = run(&["list", d, "--json"]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));

    let (kind, path) = strict_refusal(dir.path());
    assert_eq!(kind, CorruptionKind::MissingRange { start, end: second });
    assert_eq!(path, segments[1]);
    quarantine_opens(dir.path());

    // Without a checkpoint: the same range, never a checkpoint file that is not there.
    let dir = tempfile::tempdir().unwrap();
    let segments = fill(dir.path());
    std::fs::remove_file(&segments[0]).unwrap();
    for slot in ["checkpoint-0", "checkpoint-1"] {
        let _ = std::fs::remove_file(dir.path().join(slot));
    }
    let v = verify_fails(dir.path());
    assert_eq!(v["missing_range"]["start"], 0, "{v}");
    assert_eq!(v["missing_range"]["end"], second, "{v}");
    let (kind, path) = strict_refusal(dir.path());
    assert_eq!(
        kind,
        CorruptionKind::MissingRange {
            start: 0,
            end: second
        }
    );
    assert_eq!(path, segments[1]);
    quarantine_opens(dir.path());
}

#[test]
fn a_deleted_middle_or_last_segment_is_reported_refused_and_quarantined() {
    let _serial = serial();
    for which in ["middle", "last"] {
        let dir = tempfile::tempdir().unwrap();
        let segments = fill(dir.path());
        let gone = if which == "middle" {
            &segments[1]
        } else {
            segments.last().unwrap()
        };
        std::fs::remove_file(gone).unwrap();
        let v = verify_fails(dir.path());
        assert!(v["problems"].as_u64().unwrap() >= 1, "{which}: {v}");
        if which == "middle" {
            // The segments' sequence numbers say how many are gone.
            let boundary = &v["boundaries"][0];
            assert_eq!(boundary["kind"], "missing", "{v}");
            assert_eq!(boundary["missing_segments"], 1, "{v}");
        }
        let (kind, _) = strict_refusal(dir.path());
        match (which, kind) {
            // The range the missing segment held: from where the one before it ends to
            // where the one after it begins.
            ("middle", CorruptionKind::MissingRange { start, end }) => {
                let base =
                    |p: &Path| -> u64 { p.file_stem().unwrap().to_str().unwrap().parse().unwrap() };
                assert_eq!((start, end), (base(&segments[1]), base(&segments[2])));
            }
            ("last", CorruptionKind::LostTail { .. }) => {}
            other => panic!("{other:?}"),
        }
        quarantine_opens(dir.path());
    }
}
