//! Format versions at the log level: every segment holds records of one format version
//! (its header's), every record read says which, and a log opened by a build of the next
//! release's version seals an older active segment (a store of an earlier release) and
//! writes on in a new one; a segment of a later version than the log's is refused with the
//! directory left as it was.
//!
//! The store always writes `FORMAT_VERSION`; these tests set the log's version
//! (`LogOptions::format_version`) to play a build of the next release's version.

use std::collections::BTreeMap;
use std::path::Path;

use deadletter::sim::{Log, LogOptions};
use deadletter::store::FORMAT_VERSION;
use deadletter::Error;

use crate::common::dir_contents;
use crate::helpers::{opts as sized, seg_path};

const SEGMENT: u64 = 4096;
const OLD: u16 = FORMAT_VERSION;
const NEW: u16 = FORMAT_VERSION + 1;

fn opts(version: u16) -> LogOptions {
    LogOptions {
        format_version: version,
        ..sized(SEGMENT, 512)
    }
}

/// Every record with its position, version and body.
fn records(log: &Log) -> Vec<(u64, u16, Vec<u8>)> {
    log.iter_from(0)
        .unwrap()
        .map(|r| {
            let (pos, rec) = r.unwrap();
            (pos, rec.version(), rec.to_vec())
        })
        .collect()
}

/// The version each segment file's header names, by file name.
fn header_versions(dir: &Path) -> BTreeMap<String, u16> {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            name.ends_with(".seg").then(|| {
                let bytes = std::fs::read(e.path()).unwrap();
                (name, u16::from_le_bytes([bytes[8], bytes[9]]))
            })
        })
        .collect()
}

#[test]
fn a_newer_build_seals_the_older_active_segment_and_writes_on_in_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = Log::open(dir.path(), opts(OLD)).unwrap();
    let old: Vec<u64> = (0..3u8)
        .map(|i| log.append(&[b'a' + i; 100]).unwrap())
        .collect();
    log.close().unwrap();
    drop(log);

    // The next version opens it: the old records read as version OLD, new ones go to a
    // new segment of version NEW that starts where the old data ends.
    let (log, _) = Log::open(dir.path(), opts(NEW)).unwrap();
    let end = log.end_position();
    let new = log.append(b"written by the next version").unwrap();
    assert_eq!(new, end);
    let segments = log.segments();
    assert_eq!(segments.len(), 2);
    assert_eq!((segments[0].end, segments[1].base), (end, end));
    let expected = vec![
        (old[0], OLD, vec![b'a'; 100]),
        (old[1], OLD, vec![b'b'; 100]),
        (old[2], OLD, vec![b'c'; 100]),
        (new, NEW, b"written by the next version".to_vec()),
    ];
    assert_eq!(records(&log), expected);
    assert_eq!(log.read(old[1]).unwrap().version(), OLD);
    assert_eq!(log.read(new).unwrap().version(), NEW);
    log.close().unwrap();
    drop(log);
    let versions: Vec<u16> = header_versions(dir.path()).into_values().collect();
    assert_eq!(versions, [OLD, NEW]);

    // It reopens as it is (the sealed old segment ends exactly at the new one's base).
    let (log, report) = Log::open(dir.path(), opts(NEW)).unwrap();
    assert!(report.torn_tail.is_none() && report.quarantined.is_empty());
    assert_eq!(records(&log), expected);
    drop(log);

    // The older build refuses it, naming both versions, and changes nothing.
    let before = dir_contents(dir.path());
    match Log::open(dir.path(), opts(OLD)) {
        Err(Error::UnsupportedFormat {
            path,
            found,
            supported,
            pre_release,
        }) => {
            assert_eq!((found, supported, pre_release), (NEW, OLD, false));
            assert_eq!(path, seg_path(dir.path(), end));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(dir_contents(dir.path()), before);
}

#[test]
fn an_empty_older_active_segment_is_replaced_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = Log::open(dir.path(), opts(OLD)).unwrap();
    log.close().unwrap();
    drop(log);
    assert_eq!(
        header_versions(dir.path())
            .into_values()
            .collect::<Vec<_>>(),
        [OLD]
    );
    let (log, report) = Log::open(dir.path(), opts(NEW)).unwrap();
    assert_eq!(report.segments, 1);
    let pos = log.append(b"first").unwrap();
    assert_eq!(pos, 0);
    assert_eq!(records(&log), [(0, NEW, b"first".to_vec())]);
    drop(log);
    let versions = header_versions(dir.path());
    assert_eq!(
        versions.into_iter().collect::<Vec<_>>(),
        [(format!("{:020}.seg", 0), NEW)]
    );
}
