//! `verify`: a read-only check that reports damage, a torn tail (recoverable), the
//! checkpoints and the format version of every file, and changes no byte of the store; a
//! store in a newer format version is reported by verify and refused by the commands that
//! open it.

use deadletter::recovery::RecoveryMode;
use serde_json::Value;

use crate::fixture::{dir_snapshot, fixture, SEGMENT_HEADER_LEN};
use crate::run::{fails, json, ok, run, serial, stderr, stdout};

#[test]
fn verify_reports_without_changing_anything() {
    let _serial = serial();
    let f = fixture();
    let v = json(&["verify", f.path(), "--json"]);
    assert_eq!(v["clean"], true);
    assert_eq!(v["problems"], 0);
    let lib = deadletter::verify::verify(f.dir.path()).unwrap();
    assert_eq!(v["records"].as_u64(), Some(lib.records));
    assert!(lib.records > 10);
    let text = ok(&["verify", f.path()]);
    assert!(text.contains("no damage found"), "{text}");
    // The store keeps room for its next checkpoint (a full disk): said so, not damage.
    assert!(
        text.contains("temporary file checkpoint.tmp: the checkpoint reserve"),
        "{text}"
    );

    // Flip one byte inside an early record: damage, reported with its place, exit 1.
    let seg = f.dir.path().join(&lib.segments[0].file);
    let mut bytes = std::fs::read(&seg).unwrap();
    let at = SEGMENT_HEADER_LEN + 40;
    bytes[at] ^= 0x5a;
    std::fs::write(&seg, &bytes).unwrap();
    let snapshot = dir_snapshot(f.dir.path());
    let o = run(&["verify", f.path(), "--json"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["clean"], false);
    let damaged = &v["segments"][0]["damaged"];
    assert_eq!(damaged.as_array().unwrap().len(), 1, "{v}");
    assert!(damaged[0]["file_offset"].as_u64().unwrap() <= at as u64);
    assert!(stderr(&o).contains("verify found 1 problem"));
    let text = run(&["verify", f.path()]);
    assert!(stdout(&text).contains("DAMAGED at byte"));
    assert_eq!(
        dir_snapshot(f.dir.path()),
        snapshot,
        "verify changed nothing"
    );
}

#[test]
fn verify_reports_a_torn_tail_as_recoverable() {
    let _serial = serial();
    let f = fixture();
    let lib = deadletter::verify::verify(f.dir.path()).unwrap();
    let seg = f.dir.path().join(&lib.segments[0].file);
    let end = lib.segments[0].end as usize + SEGMENT_HEADER_LEN;
    let mut bytes = std::fs::read(&seg).unwrap();
    bytes[end..end + 7].copy_from_slice(b"garbage");
    std::fs::write(&seg, &bytes).unwrap();
    let v = json(&["verify", f.path(), "--json"]);
    assert_eq!(v["clean"], true);
    assert_eq!(v["segments"][0]["torn_tail"]["bytes"], 7);
    assert!(ok(&["verify", f.path()]).contains("torn tail: 7 bytes"));
}

#[test]
fn verify_checks_checkpoints() {
    let _serial = serial();
    let f = fixture();
    {
        let store = f.open();
        let report = store.compact_now().unwrap();
        assert!(report.checkpoint_position.is_some());
        store.close().unwrap();
    }
    let v = json(&["verify", f.path(), "--json"]);
    let checkpoints = v["checkpoints"].as_array().unwrap();
    assert!(!checkpoints.is_empty(), "{v}");
    assert!(checkpoints[0]["position"].is_u64());
    let file = f.dir.path().join(checkpoints[0]["file"].as_str().unwrap());
    let mut bytes = std::fs::read(&file).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&file, &bytes).unwrap();
    let o = run(&["verify", f.path()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).contains("DAMAGED"), "{}", stdout(&o));
}

/// Rewrites the segment header at the start of `path` with `magic` and `version`, and its
/// checksum: the CRC-32 of the header's bytes before it, at its end. A newer version's
/// header keeps this one's length (56 bytes); a development build's had 32 (its checksum
/// at 28).
fn rewrite_header(path: &std::path::Path, magic: &[u8; 8], version: u16) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[0..8].copy_from_slice(magic);
    bytes[8..10].copy_from_slice(&version.to_le_bytes());
    if magic == b"DLTRSEG\0" {
        bytes[10..12].copy_from_slice(&32u16.to_le_bytes());
    }
    let len = u16::from_le_bytes([bytes[10], bytes[11]]) as usize;
    let crc = crc32fast::hash(&bytes[..len - 4]);
    bytes[len - 4..len].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(path, &bytes).unwrap();
}

#[test]
fn a_store_in_a_newer_format_version_is_reported_and_refused() {
    let _serial = serial();
    let f = fixture();
    let lib = deadletter::verify::verify(f.dir.path()).unwrap();
    assert_eq!(
        lib.segments[0].version,
        Some(deadletter::store::FORMAT_VERSION)
    );
    // Rewrite the first segment's version (and the header's checksum) as a newer build
    // would have written it.
    let newer = deadletter::store::FORMAT_VERSION + 1;
    let seg = f.dir.path().join(&lib.segments[0].file);
    rewrite_header(&seg, b"DLTRSEGM", newer);
    let snapshot = dir_snapshot(f.dir.path());

    let o = run(&["verify", f.path(), "--json"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (v["clean"].clone(), v["problems"].clone()),
        (false.into(), 0.into())
    );
    assert_eq!(v["segments"][0]["version"], newer);
    assert_eq!(v["segments"][0]["header"], "unsupported_version");
    assert_eq!(v["newer_versions"][0]["version"], newer);
    assert_eq!(v["supported_version"], deadletter::store::FORMAT_VERSION);
    let o = run(&["verify", f.path()]);
    assert_eq!(o.status.code(), Some(1));
    let wanted = format!(
        "format version {newer}, newer than this deadletter reads (up to {})",
        deadletter::store::FORMAT_VERSION
    );
    assert!(stdout(&o).contains(&wanted), "{}", stdout(&o));
    assert!(
        stderr(&o).contains("verify it with a newer deadletter"),
        "{}",
        stderr(&o)
    );

    // Commands that open the store refuse it, naming both versions.
    let err = fails(&["stats", f.path()], 1, &format!("format version {newer}"));
    assert!(
        err.contains(&format!("up to {}", deadletter::store::FORMAT_VERSION)),
        "{err}"
    );
    assert_eq!(dir_snapshot(f.dir.path()), snapshot, "nothing changed");
}

#[test]
fn a_store_of_a_development_build_is_reported_and_refused() {
    let _serial = serial();
    let f = fixture();
    let lib = deadletter::verify::verify(f.dir.path()).unwrap();
    // Rewrite the first segment's header as a development build before release 0.1.0
    // wrote it: its magic, its format 6, the header's checksum.
    let seg = f.dir.path().join(&lib.segments[0].file);
    rewrite_header(&seg, b"DLTRSEG\0", 6);
    let snapshot = dir_snapshot(f.dir.path());

    let o = run(&["verify", f.path(), "--json"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (v["clean"].clone(), v["problems"].clone()),
        (false.into(), 0.into())
    );
    assert_eq!(v["segments"][0]["header"], "pre_release");
    assert_eq!(v["pre_release_files"][0]["version"], 6);
    assert_eq!(v["newer_versions"], Value::Array(Vec::new()));
    let o = run(&["verify", f.path()]);
    assert_eq!(o.status.code(), Some(1));
    let text = stdout(&o);
    assert!(
        text.contains("written by a development build before release 0.1.0 (its format 6)"),
        "{text}"
    );
    assert!(
        stderr(&o).contains("no release of deadletter reads"),
        "{}",
        stderr(&o)
    );

    // Commands that open the store refuse it, saying why.
    fails(&["stats", f.path()], 1, "development build");
    assert_eq!(dir_snapshot(f.dir.path()), snapshot, "nothing changed");
}

#[test]
fn entries_named_like_segments_are_reported_against_themselves() {
    let _serial = serial();
    let f = fixture();
    let lib = deadletter::verify::verify(f.dir.path()).unwrap();
    let last = lib.segments.last().unwrap();
    let past = last.base + (4 << 20);
    // A directory, then an empty file, after the last segment: verify does not abort, and
    // names the entry, not the segment before it.
    for (i, make_dir) in [true, false].into_iter().enumerate() {
        let name = format!("{:020}.seg", past + i as u64);
        let stray = f.dir.path().join(&name);
        if make_dir {
            std::fs::create_dir(&stray).unwrap();
        } else {
            std::fs::write(&stray, b"").unwrap();
        }
        let o = run(&["verify", f.path(), "--json"]);
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["problems"], 1, "{v}");
        let reported = v["segments"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["file"] == name.as_str())
            .expect("the stray entry is listed")
            .clone();
        let want = if make_dir { "not_a_file" } else { "short" };
        assert_eq!(reported["header"], want, "{v}");
        assert!(v["boundaries"].as_array().unwrap().is_empty(), "{v}");
        let text = stdout(&run(&["verify", f.path()]));
        assert!(text.contains(&name), "{text}");
        if make_dir {
            std::fs::remove_dir(&stray).unwrap();
        } else {
            std::fs::remove_file(&stray).unwrap();
        }
    }
}

/// A store of 200 acknowledged messages (ids returned), closed, with its active segment.
fn acknowledged_store() -> (tempfile::TempDir, Vec<u64>, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    // A whole 1 MiB active segment from the start: the test writes past its tail hint.
    let config = crate::fixture::small_config().first_segment_size(1 << 20);
    let store = deadletter::Store::open(dir.path(), config).unwrap();
    let q = store.queue("orders").unwrap();
    let ids = (0..200)
        .map(|i| q.enqueue(format!("order {i} {}", "x".repeat(40))).unwrap())
        .collect();
    drop(q);
    store.close().unwrap();
    let active = deadletter::verify::verify(dir.path())
        .unwrap()
        .segments
        .last()
        .map(|s| dir.path().join(&s.file))
        .unwrap();
    (dir, ids, active)
}

/// The tail hint is reported as what it claims, not as a leftover; bytes past it, where the
/// log never writes, are damage (exit 1) that an open does not read.
#[test]
fn bytes_past_the_tail_hint_are_damage() {
    let _serial = serial();
    let (dir, _, active) = acknowledged_store();
    let path = dir.path().to_str().unwrap();
    let v = json(&["verify", path, "--json"]);
    let bound = v["tail_hint"].as_u64().expect("a tail hint");
    // The only temporary file left is compaction's reserve: the hint is not listed as one.
    assert_eq!(
        v["temp_files"],
        serde_json::json!(["checkpoint.tmp"]),
        "{v}"
    );
    let text = ok(&["verify", path]);
    assert!(
        text.contains(&format!(
            "tail hint: the last segment was never written past data offset {bound}"
        )),
        "{text}"
    );
    // A stray byte well past what an open reads (the bound, a frame header, its 4 KiB page).
    let at = SEGMENT_HEADER_LEN as u64 + bound + 3 * 4096;
    assert!(at < std::fs::metadata(&active).unwrap().len());
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&active)
            .unwrap();
        f.write_all_at(b"x", at).unwrap();
    }
    let o = run(&["verify", path]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("WRITTEN PAST THE TAIL HINT"),
        "{}",
        stdout(&o)
    );
    // The store still opens and holds every message.
    let store = deadletter::Store::open(dir.path(), crate::fixture::small_config()).unwrap();
    assert_eq!(store.queue("orders").unwrap().stats().counts.ready, 200);
    store.close().unwrap();
}

/// The three cuts of the active segment (to 10,000 bytes, to 0, in the middle of
/// its records): `verify` reports each as damage and exits 1, never as a torn tail; a
/// strict open refuses it with the sizes; a quarantine open hands out no id again.
#[test]
fn a_cut_active_segment_is_damage_not_a_torn_tail() {
    let _serial = serial();
    for case in ["10000", "0", "middle"] {
        let (dir, ids, active) = acknowledged_store();
        let path = dir.path().to_str().unwrap();
        let before = deadletter::verify::verify(dir.path()).unwrap();
        // The cut must be found with the tail hint in place (an open reads the active
        // segment only up to it): the hint never hides a cut.
        assert!(
            before.tail_hint.is_some(),
            "{case}: the store has a tail hint"
        );
        let records_end = before.segments[0].end;
        let cut = match case {
            "10000" => 10_000,
            "0" => 0,
            _ => SEGMENT_HEADER_LEN as u64 + records_end / 2,
        };
        let declared = std::fs::metadata(&active).unwrap().len();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&active)
            .unwrap()
            .set_len(cut)
            .unwrap();
        let snapshot = dir_snapshot(dir.path());

        let o = run(&["verify", path, "--json"]);
        assert_eq!(o.status.code(), Some(1), "{case}: {}", stderr(&o));
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["problems"], 1, "{case}: {v}");
        assert!(v["segments"][0]["torn_tail"].is_null(), "{case}: {v}");
        let text = stdout(&run(&["verify", path]));
        if cut == 0 {
            assert_eq!(v["segments"][0]["header"], "short", "{case}: {v}");
        } else {
            assert_eq!(v["segments"][0]["declared_len"], declared, "{case}: {v}");
            assert_eq!(v["segments"][0]["file_len"], cut, "{case}: {v}");
            assert!(
                text.contains(&format!("CUT SHORT: {cut} bytes of the {declared}")),
                "{case}: {text}"
            );
        }
        assert!(!text.contains("no damage found"), "{case}: {text}");

        match deadletter::Store::open(dir.path(), crate::fixture::small_config()) {
            Err(deadletter::Error::Corruption { kind, .. }) if cut == 0 => {
                assert_eq!(
                    kind,
                    deadletter::recovery::CorruptionKind::BadHeader,
                    "{case}"
                )
            }
            Err(deadletter::Error::Corruption { kind, .. }) => assert_eq!(
                kind,
                deadletter::recovery::CorruptionKind::ShortSegment {
                    expected: declared,
                    actual: cut
                },
                "{case}"
            ),
            other => panic!("{case}: expected corruption, got {other:?}"),
        }
        assert_eq!(
            dir_snapshot(dir.path()),
            snapshot,
            "{case}: a refused open changes nothing"
        );

        let quarantine = crate::fixture::small_config().recovery(RecoveryMode::Quarantine);
        let store = deadletter::Store::open(dir.path(), quarantine).unwrap();
        assert!(!store.recovery_report().quarantined.is_empty(), "{case}");
        let q = store.queue("orders").unwrap();
        let fresh = q.enqueue("after the cut").unwrap();
        let highest = *ids.iter().max().unwrap();
        assert!(
            fresh > highest,
            "{case}: id {fresh} handed out again (ids went to {highest})"
        );
        drop(q);
        store.close().unwrap();
    }
}
