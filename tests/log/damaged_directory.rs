//! A directory that is not as the log left it: a segment missing in the middle, a sealed
//! segment cut short, an empty or zero-filled last segment, a leftover temporary file,
//! foreign files, and a file with a segment's name but not a segment's content.

use deadletter::recovery::{CorruptionKind, CorruptionLocation};
use deadletter::sim::Log;
use deadletter::Error;

use crate::helpers::{
    multi_segment_log, opts, quarantine, read_all, seg_path, segment_bases, FRAME, HEADER,
};

#[test]
fn missing_middle_segment_is_reported() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("log");
    let o = opts(512, 100);
    let written = multi_segment_log(&dir, &o, 30);
    let bases = segment_bases(&dir);
    assert!(bases.len() >= 4, "{bases:?}");
    std::fs::remove_file(seg_path(&dir, bases[1])).unwrap();
    // The error names the missing range: from where the segment before it ends to where
    // the one after it begins.
    let missing = CorruptionKind::MissingRange {
        start: bases[1],
        end: bases[2],
    };
    match Log::open(&dir, o.clone()) {
        Err(Error::Corruption {
            kind,
            location: CorruptionLocation::File { path, offset },
        }) => {
            assert_eq!(kind, missing);
            assert_eq!(path, seg_path(&dir, bases[0]));
            assert_eq!(offset, HEADER + (bases[1] - bases[0]));
        }
        other => panic!("expected MissingRange, got {other:?}"),
    }
    // Quarantine mode opens, lists the gap, and returns the records around it.
    let (log, report) = Log::open(&dir, quarantine(o)).unwrap();
    assert_eq!(report.quarantined.len(), 1, "{report:?}");
    let q = &report.quarantined[0];
    assert_eq!(q.kind, missing);
    assert_eq!((q.start, q.end), (bases[1], bases[2]));
    let want: Vec<_> = written
        .iter()
        .filter(|(p, _)| *p < bases[1] || *p >= bases[2])
        .cloned()
        .collect();
    assert_eq!(read_all(&log), want);
    assert!(matches!(log.read(bases[1]), Err(Error::Corruption { .. })));
}

#[test]
fn truncated_sealed_segment_is_reported() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("log");
    let o = opts(512, 100);
    multi_segment_log(&dir, &o, 30);
    let bases = segment_bases(&dir);
    let victim = seg_path(&dir, bases[1]);
    // Mid-record first, then at a record boundary (set_len only shrinks here).
    for cut in [HEADER + 66 * 3 + 20, HEADER + 66 * 3] {
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&victim)
            .unwrap();
        f.set_len(cut).unwrap();
        drop(f);
        match Log::open(&dir, o.clone()) {
            Err(Error::Corruption {
                kind: CorruptionKind::ShortSegment { expected, actual },
                location: CorruptionLocation::File { path, offset },
            }) => {
                assert_eq!(path, victim);
                assert_eq!((expected, actual, offset), (512, cut, cut), "sizes");
            }
            other => panic!("cut at {cut}: expected ShortSegment, got {other:?}"),
        }
    }
    let (log, report) = Log::open(&dir, quarantine(o)).unwrap();
    assert_eq!(report.quarantined.len(), 1);
    assert_eq!(
        report.quarantined[0].kind,
        CorruptionKind::ShortSegment {
            expected: 512,
            actual: HEADER + 66 * 3
        }
    );
    assert!(log.iter_from(0).unwrap().all(|r| r.is_ok()));
}

#[test]
fn zero_filled_or_empty_last_segment_is_a_bad_header_on_itself() {
    // A `.seg` name always has a durable header (creation goes through a temporary name),
    // so an empty or zero-filled file after the last segment is damage, reported against
    // that file, never the segment before it.
    for empty in [false, true] {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("log");
        let o = opts(512, 100);
        let written = multi_segment_log(&dir, &o, 4);
        let end = written
            .last()
            .map(|(p, b)| p + FRAME + b.len() as u64)
            .unwrap();
        // Past the last segment's data, as a stray file would be.
        let stray = seg_path(&dir, end + 1000);
        let content = if empty { Vec::new() } else { vec![0u8; 512] };
        std::fs::write(&stray, &content).unwrap();
        match Log::open(&dir, o.clone()) {
            Err(Error::Corruption {
                kind: CorruptionKind::BadHeader,
                location: CorruptionLocation::File { path, offset: 0 },
            }) => assert_eq!(path, stray),
            other => panic!("expected BadHeader on the stray file, got {other:?}"),
        }
        assert_eq!(std::fs::read(&stray).unwrap(), content, "left as it was");
        // Quarantine opens, keeps the file, and never appends below it.
        let (log, report) = Log::open(&dir, quarantine(o.clone())).unwrap();
        assert!(report
            .quarantined
            .iter()
            .any(|q| q.kind == CorruptionKind::BadHeader && q.path == stray));
        let p = log.append(b"after").unwrap();
        assert!(p > end + 1000, "{p}");
        drop(log);
        assert_eq!(std::fs::read(&stray).unwrap(), content);
    }
}

#[test]
fn directory_named_like_a_segment_is_reported_against_itself() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("log");
    let o = opts(512, 100);
    let written = multi_segment_log(&dir, &o, 30);
    let bases = segment_bases(&dir);
    let last_end = written
        .last()
        .map(|(p, b)| p + FRAME + b.len() as u64)
        .unwrap();
    for at in [bases[1] + 3, last_end + 512] {
        let stray = seg_path(&dir, at);
        std::fs::create_dir(&stray).unwrap();
        match Log::open(&dir, o.clone()) {
            Err(Error::Corruption {
                kind: CorruptionKind::NotASegment,
                location: CorruptionLocation::File { path, offset: 0 },
            }) => assert_eq!(path, stray),
            other => panic!("expected NotASegment on {stray:?}, got {other:?}"),
        }
        std::fs::remove_dir(&stray).unwrap();
    }
    assert_eq!(read_all(&Log::open(&dir, o).unwrap().0), written);
}

#[test]
fn leftover_temp_file_is_removed_and_foreign_files_are_left_alone() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("log");
    let o = opts(4096, 100);
    let written = multi_segment_log(&dir, &o, 5);
    let temp = format!("{:020}.tmp", 99_999);
    std::fs::write(dir.join(&temp), [1u8; 100]).unwrap();
    let foreign = [
        ("notes.txt", &b"an operator's notes"[..]),
        ("backup.tmp", &b"not ours either"[..]),
        ("123.seg", &b"a short name is not a segment name"[..]),
    ];
    for (name, content) in foreign {
        std::fs::write(dir.join(name), content).unwrap();
    }
    let (log, report) = Log::open(&dir, o).unwrap();
    assert_eq!(report.removed_temp_files, vec![temp.clone()]);
    assert!(!dir.join(&temp).exists());
    let mut ignored = report.ignored_files.clone();
    ignored.sort();
    assert_eq!(ignored, vec!["123.seg", "backup.tmp", "notes.txt"]);
    for (name, content) in foreign {
        assert_eq!(
            std::fs::read(dir.join(name)).unwrap(),
            content,
            "{name} touched"
        );
    }
    assert_eq!(read_all(&log), written);
}

#[test]
fn segment_named_file_with_foreign_content_is_a_bad_header() {
    let root = tempfile::tempdir().unwrap();
    // As the only segment.
    let dir = root.path().join("only");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        seg_path(&dir, 0),
        b"{\"hello\": \"this is JSON, not a segment\"}",
    )
    .unwrap();
    match Log::open(&dir, opts(4096, 100)) {
        Err(Error::Corruption {
            kind: CorruptionKind::BadHeader,
            location: CorruptionLocation::File { path, offset: 0 },
        }) => assert_eq!(path, seg_path(&dir, 0)),
        other => panic!("expected BadHeader, got {other:?}"),
    }
    // Following a real segment, at the position where the next segment would start.
    let dir = root.path().join("after");
    let o = opts(4096, 100);
    let written = multi_segment_log(&dir, &o, 3);
    let end = written
        .last()
        .map(|(p, b)| p + FRAME + b.len() as u64)
        .unwrap();
    let mut foreign = b"PK\x03\x04 a zip archive, say".to_vec();
    foreign.resize(4096, 0x55);
    std::fs::write(seg_path(&dir, end), &foreign).unwrap();
    match Log::open(&dir, o.clone()) {
        Err(Error::Corruption {
            kind: CorruptionKind::BadHeader,
            location: CorruptionLocation::File { path, offset: 0 },
        }) => assert_eq!(path, seg_path(&dir, end)),
        other => panic!("expected BadHeader, got {other:?}"),
    }
    // A valid header naming a different base than the file name is also a bad header.
    let mut moved = std::fs::read(seg_path(&dir, 0)).unwrap();
    moved.truncate(4096);
    std::fs::write(seg_path(&dir, end), &moved).unwrap();
    assert!(matches!(
        Log::open(&dir, o.clone()),
        Err(Error::Corruption {
            kind: CorruptionKind::BadHeader,
            ..
        })
    ));
    // Quarantine opens, keeps the file, and lists it.
    let (log, report) = Log::open(&dir, quarantine(o)).unwrap();
    assert_eq!(report.quarantined[0].kind, CorruptionKind::BadHeader);
    assert_eq!(read_all(&log), written);
    assert_eq!(std::fs::read(seg_path(&dir, end)).unwrap(), moved);
    log.append(b"still writable").unwrap();
}
