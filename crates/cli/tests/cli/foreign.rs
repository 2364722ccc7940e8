//! A segment of another store with the same layout (same segment size, the same writes,
//! so the same file names and positions) is refused by name: `verify` exits 1 naming it
//! `FOREIGN`, a strict open refuses it (`CorruptionKind::Foreign`, naming the file),
//! quarantine opens without ever reading its records, and hands no id out again. The
//! same for one added after the store's last segment.

use std::path::{Path, PathBuf};

use deadletter::recovery::{CorruptionKind, CorruptionLocation, RecoveryMode};
use deadletter::store::Durability;
use deadletter::{Config, Error, Store};
use serde_json::Value;

use crate::run::{run, serial, stderr, stdout};

/// 256 KiB segments, every write durable.
fn config() -> Config {
    Config::default()
        .segment_size(256 << 10)
        .max_message_size(4 << 10)
        .durability(Durability::Always)
}

/// `queues` queues of 300 messages whose payloads are made of `marker`, then a
/// checkpoint. Returns the segment files in log order.
fn fill(dir: &Path, queues: usize, marker: &str) -> Vec<PathBuf> {
    let store = Store::open(dir, config()).unwrap();
    for q in 0..queues {
        let queue = store.queue(&format!("q{q}")).unwrap();
        let payloads: Vec<String> = (0..300)
            .map(|i| format!("q{q}-m{i}-{}", marker.repeat(300)))
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

/// `verify --json` exits 1 and names `file` as foreign, and its text says so.
fn verify_names_foreign(dir: &Path, file: &Path) {
    let d = dir.to_str().unwrap();
    let name = file.file_name().unwrap().to_str().unwrap();
    let o = run(&["verify", d, "--json"]);
    assert_eq!(o.status.code(), Some(1), "{}\n{}", stdout(&o), stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let foreign: Vec<&str> = v["segments"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["foreign"] == true)
        .map(|s| s["file"].as_str().unwrap())
        .collect();
    assert_eq!(foreign, [name], "{v}");
    assert!(v["problems"].as_u64().unwrap() >= 1, "{v}");
    let other = v["segments"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["file"] == name)
        .unwrap()["store_id"]
        .clone();
    assert_ne!(other, v["store_id"], "{v}");
    let o = run(&["verify", d]);
    assert_eq!(o.status.code(), Some(1));
    let text = stdout(&o);
    let line = text.lines().find(|l| l.contains(name)).unwrap_or_default();
    assert!(line.contains("FOREIGN"), "{text}");
}

/// A strict open refuses the store with `Foreign`, naming `file`.
fn strict_refuses(dir: &Path, file: &Path) {
    match Store::open(dir, config()) {
        Err(Error::Corruption {
            kind: CorruptionKind::Foreign { expected, found },
            location: CorruptionLocation::File { path, offset: 0 },
        }) => {
            assert_eq!(path, file);
            assert_ne!(expected, found);
        }
        other => panic!("strict open: {other:?}"),
    }
}

/// Quarantine opens, lists `file` as foreign, never returns one of its payloads (made of
/// `x`), and hands out no id again.
fn quarantine_skips(dir: &Path, file: &Path) {
    let store = Store::open(dir, config().recovery(RecoveryMode::Quarantine)).unwrap();
    let listed: Vec<&PathBuf> = store
        .recovery_report()
        .quarantined
        .iter()
        .filter(|q| matches!(q.kind, CorruptionKind::Foreign { .. }))
        .map(|q| &q.path)
        .collect();
    assert_eq!(listed, [file]);
    let mut read = 0;
    for q in 0..5 {
        let queue = store.queue(&format!("q{q}")).unwrap();
        // Messages whose records were in the foreign segment's place are lost (reading
        // one is an error); every other one is this store's.
        while let Ok(batch) = queue.lease(100) {
            if batch.is_empty() {
                break;
            }
            for m in &batch {
                let text = String::from_utf8_lossy(m.payload()).into_owned();
                assert!(text.starts_with(&format!("q{q}-m")), "{text}");
                assert!(!text.contains('x'), "another store's payload: {text}");
                read += 1;
            }
            queue.ack_all(&batch).unwrap();
        }
    }
    assert!(read >= 100, "{read}");
    let id = store.queue("after").unwrap().enqueue(b"new").unwrap();
    assert!(id >= 1500, "ids are never handed out again: {id}");
    store.close().unwrap();
}

#[test]
fn a_segment_copied_from_another_store_is_refused_by_name() {
    let _serial = serial();
    let mine = tempfile::tempdir().unwrap();
    let segments = fill(mine.path(), 5, "p");
    let other = tempfile::tempdir().unwrap();
    let theirs = fill(other.path(), 5, "x");
    assert!(segments.len() >= 3, "{segments:?}");
    // The same layout: the same names. The middle one is swapped for theirs.
    assert_eq!(
        segments.iter().map(|p| p.file_name()).collect::<Vec<_>>(),
        theirs.iter().map(|p| p.file_name()).collect::<Vec<_>>()
    );
    std::fs::copy(&theirs[1], &segments[1]).unwrap();
    verify_names_foreign(mine.path(), &segments[1]);
    strict_refuses(mine.path(), &segments[1]);
    quarantine_skips(mine.path(), &segments[1]);
}

#[test]
fn a_segment_of_another_store_added_at_the_end_is_refused_by_name() {
    let _serial = serial();
    let mine = tempfile::tempdir().unwrap();
    let segments = fill(mine.path(), 5, "p");
    let other = tempfile::tempdir().unwrap();
    let theirs = fill(other.path(), 7, "x");
    // Their segment after the one that is my last: it continues my log's names.
    let added = mine
        .path()
        .join(theirs[segments.len()].file_name().unwrap());
    assert!(!added.exists());
    std::fs::copy(&theirs[segments.len()], &added).unwrap();
    verify_names_foreign(mine.path(), &added);
    strict_refuses(mine.path(), &added);
    quarantine_skips(mine.path(), &added);
}
