//! Segments roll at the configured size, never split a record, and are deleted whole
//! (never the active one); what remains reads back after a reopen. A store's segment size
//! is read back from its files (its largest segment).

use deadletter::sim::{segment_name, Log, DEFAULT_SEGMENT_SIZE, FRAME_HEADER_LEN, V2_HEADER_LEN};
use deadletter::{Config, Error, Store};

use crate::helpers::{body, opts, read_all, FRAME, HEADER};

#[test]
fn segments_roll_at_the_configured_size_and_delete_whole() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("log");
    let o = opts(1024, 200);
    let (log, _) = Log::open(&dir, o.clone()).unwrap();
    let mut written = Vec::new();
    for i in 0..100u64 {
        let b = body(i, 100);
        written.push((log.append(&b).unwrap(), b));
    }
    let segs = log.segments();
    assert!(segs.len() >= 10, "{} segments", segs.len());
    for pair in segs.windows(2) {
        assert_eq!(pair[0].end, pair[1].base, "segments are contiguous");
        assert!(!pair[0].active);
    }
    assert!(segs.last().unwrap().active);
    for s in &segs {
        assert_eq!(std::fs::metadata(&s.path).unwrap().len(), 1024);
        assert!(s.end - s.base <= 1024 - HEADER);
    }
    for (p, b) in &written {
        let s = segs.iter().find(|s| s.base <= *p && *p < s.end).unwrap();
        assert!(
            p + FRAME + b.len() as u64 <= s.end,
            "a record never spans segments"
        );
    }

    let cut = written[50].0;
    let doomed: Vec<_> = segs.iter().filter(|s| s.end <= cut).cloned().collect();
    assert_eq!(log.delete_below(cut).unwrap(), doomed.len());
    for s in &doomed {
        assert!(!s.path.exists());
    }
    let first = log.first_position();
    assert!(first <= cut && first > 0);
    for (p, b) in &written {
        if *p < first {
            assert!(matches!(log.read(*p), Err(Error::InvalidPosition(_))));
        } else {
            assert_eq!(&*log.read(*p).unwrap(), &b[..]);
        }
    }
    // The records from `first` on.
    let from = |first: u64| -> Vec<_> {
        written
            .iter()
            .filter(|(p, _)| *p >= first)
            .cloned()
            .collect()
    };
    assert_eq!(read_all(&log), from(first));
    // The active segment is never deleted.
    let n = log.segments().len();
    assert_eq!(log.delete_below(u64::MAX).unwrap(), n - 1);
    assert_eq!(log.segments().len(), 1);
    let first = log.first_position();
    drop(log);

    let (log, report) = Log::open(&dir, o).unwrap();
    assert_eq!(report.segments, 1);
    assert_eq!(read_all(&log), from(first));
    let p = log.append(b"after deletion").unwrap();
    assert_eq!(&*log.read(p).unwrap(), b"after deletion");
}

#[test]
fn an_existing_store_gives_its_segment_size() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(
        Config::for_existing_store(dir.path()).segment_size,
        DEFAULT_SEGMENT_SIZE
    );
    let size = 128 << 10;
    let config = Config::default()
        .segment_size(size)
        .max_message_size(16 << 10);
    // A new store's segment is too small to tell: the defaults.
    Store::open(dir.path(), config.clone())
        .unwrap()
        .close()
        .unwrap();
    assert_eq!(
        Config::for_existing_store(dir.path()).segment_size,
        DEFAULT_SEGMENT_SIZE
    );
    // Grown to its largest (32, 64, 128 KiB), it gives that.
    let store = Store::open(dir.path(), config).unwrap();
    let q = store.queue("q").unwrap();
    for _ in 0..30 {
        q.enqueue(vec![1u8; 8 << 10]).unwrap();
    }
    drop(q);
    store.close().unwrap();
    let found = Config::for_existing_store(dir.path());
    assert_eq!(found.segment_size, size);
    // The room a record keeps besides its message: 64 KiB of metadata.
    let overhead = 64 << 10;
    assert_eq!(
        found.max_message_size,
        (size - (overhead + V2_HEADER_LEN + FRAME_HEADER_LEN) as u64) as usize
    );
    // A newer file named like a segment that is not one is passed over.
    std::fs::write(dir.path().join(segment_name(1 << 40)), b"not a segment").unwrap();
    assert_eq!(Config::for_existing_store(dir.path()).segment_size, size);
}
