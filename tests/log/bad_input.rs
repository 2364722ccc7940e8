//! Bad input to the log: records too large or empty (nothing is appended), positions that
//! are not a record's, and invalid options (nothing is created).

use deadletter::sim::{Log, LogOptions};
use deadletter::store::Durability;
use deadletter::Error;

use crate::helpers::{opts, FRAME};

#[test]
fn bad_appends_reads_and_options() {
    let root = tempfile::tempdir().unwrap();
    let o = opts(4096, 100);
    let (log, _) = Log::open(root.path(), o.clone()).unwrap();
    let p0 = log.append(b"first").unwrap();
    let p1 = log.append(&[7u8; 100]).unwrap();
    let end = log.end_position();

    // Too large, alone or in a batch: nothing is appended.
    match log.append(&[1u8; 101]) {
        Err(Error::TooLarge {
            size: 101,
            max: 100,
        }) => {}
        other => panic!("expected TooLarge, got {other:?}"),
    }
    let batch: Vec<Vec<u8>> = vec![vec![1; 10], vec![2; 101]];
    assert!(matches!(
        log.append_batch(&batch),
        Err(Error::TooLarge { .. })
    ));
    // Empty, alone or in a batch: nothing is appended.
    assert!(matches!(log.append(b""), Err(Error::EmptyRecord)));
    let batch: Vec<&[u8]> = vec![b"ok", b""];
    assert!(matches!(log.append_batch(&batch), Err(Error::EmptyRecord)));
    assert_eq!(log.end_position(), end, "a rejected append wrote nothing");

    // Invalid positions: past the end, inside a record, far away.
    for bad in [end, end + 1, p0 + 1, p1 + 3, p1 + FRAME, u64::MAX] {
        match log.read(bad) {
            Err(Error::InvalidPosition(p)) => assert_eq!(p, bad),
            other => panic!("read({bad}): expected InvalidPosition, got {other:?}"),
        }
    }
    assert!(matches!(
        log.iter_from(end + 1),
        Err(Error::InvalidPosition(_))
    ));
    assert_eq!(log.iter_from(end).unwrap().count(), 0);
    let mut it = log.iter_from(p1 + 5).unwrap();
    assert!(matches!(it.next(), Some(Err(Error::InvalidPosition(_)))));
    assert!(it.next().is_none());
    assert_eq!(&*log.read(p1).unwrap(), &[7u8; 100][..]);
    drop(log);

    // Invalid options.
    let bad_options = [
        LogOptions {
            max_record_size: 0,
            ..o.clone()
        },
        LogOptions {
            max_record_size: 4096 - 48 + 1,
            ..o.clone()
        },
        LogOptions {
            segment_size: 10,
            ..o.clone()
        },
        LogOptions {
            durability: Durability::Interval(std::time::Duration::ZERO),
            ..o.clone()
        },
    ];
    for bad in bad_options {
        match Log::open(root.path().join("never"), bad.clone()) {
            Err(Error::InvalidConfig(msg)) => assert!(!msg.is_empty()),
            other => panic!("{bad:?}: expected InvalidConfig, got {other:?}"),
        }
    }
    assert!(
        !root.path().join("never").exists(),
        "bad options create nothing"
    );
    // The largest record the options allow fits in one segment.
    let (log, _) = Log::open(
        root.path().join("max"),
        LogOptions {
            max_record_size: 4096 - 72,
            ..o
        },
    )
    .unwrap();
    // A version-2 header (56 bytes) and a frame header (16) around it.
    log.append(&[3u8; 4096 - 72]).unwrap();
    log.append(&[4u8; 4096 - 72]).unwrap();
    assert_eq!(log.stats().segments, 2);
}
