//! What a store costs on disk, from its files' allocated blocks (what `du` counts), which
//! are deterministic: an empty store, the bytes written to create it, a store drained
//! after a workload, and the sizes its segments grow by (issue 29, items 1 to 3).
//!
//! - an empty store takes at most 64 KiB (its first segment is 32 KiB, allocated and never
//!   written; the checkpoint reserve 16 KiB; the lock, the tail hint and the directory one
//!   block each), and creating it dirties at most 64 KiB of pages (no zeros are written);
//! - segments grow by doubling from the first size to the configured one;
//! - after 200,000 messages of 100 bytes enqueued and acked, one compaction run brings the
//!   store back to at most 256 KiB;
//! - a preallocated, never-written tail reads as zeros after a reopen and takes appends.

mod common;

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use deadletter::sim::FIRST_SEGMENT_SIZE;
use deadletter::{Config, Store};

/// Bytes allocated to the directory and the files in it, as `du` counts them.
fn allocated(dir: &Path) -> u64 {
    let own = std::fs::metadata(dir).unwrap().blocks() * 512;
    let files: u64 = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().blocks() * 512)
        .sum();
    own + files
}

/// The segment files' lengths, in base order.
fn segment_sizes(dir: &Path) -> Vec<u64> {
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".seg"))
        .collect();
    names.sort();
    names
        .iter()
        .map(|n| std::fs::metadata(dir.join(n)).unwrap().len())
        .collect()
}

/// Bytes of pages this thread dirtied so far (`/proc/thread-self/io`, `write_bytes`):
/// the store's open does its file work on the calling thread.
#[cfg(target_os = "linux")]
fn thread_write_bytes() -> u64 {
    let io = std::fs::read_to_string("/proc/thread-self/io").expect("per-thread I/O counters");
    io.lines()
        .find_map(|l| l.strip_prefix("write_bytes: "))
        .and_then(|v| v.trim().parse().ok())
        .expect("write_bytes")
}

#[test]
fn an_empty_store_takes_at_most_64_kib_and_writes_no_zeros() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("store");
    #[cfg(target_os = "linux")]
    let before = thread_write_bytes();
    let store = Store::open(&dir, common::config()).unwrap();
    store.close().unwrap();
    #[cfg(target_os = "linux")]
    {
        let written = thread_write_bytes() - before;
        eprintln!("bytes written to create an empty store: {written}");
        assert!(
            written <= 64 << 10,
            "creating an empty store wrote {written} bytes"
        );
    }
    assert_eq!(segment_sizes(&dir), vec![FIRST_SEGMENT_SIZE]);
    let bytes = allocated(&dir);
    eprintln!("an empty store on disk: {bytes} bytes");
    assert!(bytes <= 64 << 10, "an empty store takes {bytes} bytes");
    // Its segment's blocks are its own (allocated, not a sparse length).
    let seg = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap())
        .find(|e| e.file_name().to_string_lossy().ends_with(".seg"))
        .unwrap();
    let meta = seg.metadata().unwrap();
    assert!(meta.blocks() * 512 >= meta.len(), "{meta:?}");
    // Reopened, it is the same store, and as small.
    let store = Store::open(&dir, common::config()).unwrap();
    store.close().unwrap();
    assert_eq!(segment_sizes(&dir), vec![FIRST_SEGMENT_SIZE]);
    assert!(allocated(&dir) <= 64 << 10);
}

#[test]
fn segments_double_from_the_first_size_to_the_configured_one() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("store");
    let max = 1 << 20;
    let config = common::config()
        .segment_size(max)
        .max_message_size(64 << 10)
        .durability(deadletter::store::Durability::Never);
    let store = Store::open(&dir, config).unwrap();
    let q = store.queue("q").unwrap();
    let payloads = vec![vec![7u8; 100]; 100];
    for _ in 0..300 {
        q.enqueue_batch(&payloads).unwrap();
    }
    drop(q);
    store.close().unwrap();
    let sizes = segment_sizes(&dir);
    let expected: Vec<u64> = (0..sizes.len() as u32)
        .map(|i| (FIRST_SEGMENT_SIZE << i).min(max))
        .collect();
    assert_eq!(sizes, expected);
    assert!(sizes.ends_with(&[max, max]), "{sizes:?}");
}

#[test]
fn a_record_larger_than_the_first_segment_gets_a_segment_that_holds_it() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("store");
    let store = Store::open(&dir, common::config()).unwrap();
    let q = store.queue("q").unwrap();
    // Into the empty first segment: a larger one takes its place.
    let big = vec![3u8; 200 << 10];
    let id = q.enqueue(big.clone()).unwrap();
    // After a small record, into the next segment, sized for it.
    q.enqueue(b"small").unwrap();
    let bigger = vec![4u8; 1 << 20];
    let id2 = q.enqueue(bigger.clone()).unwrap();
    drop(q);
    store.close().unwrap();
    let store = Store::open(&dir, common::config()).unwrap();
    let q = store.queue("q").unwrap();
    let got = q.lease(3).unwrap();
    assert_eq!(got.len(), 3);
    assert_eq!(got[0].id(), id);
    assert_eq!(got[0].payload(), &big[..]);
    assert_eq!(got[2].id(), id2);
    assert_eq!(got[2].payload(), &bigger[..]);
    drop(q);
    store.close().unwrap();
}

#[test]
fn a_drained_store_returns_to_at_most_256_kib() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("store");
    let store = Store::open(
        &dir,
        common::config().durability(deadletter::store::Durability::Never),
    )
    .unwrap();
    let q = store.queue("q").unwrap();
    let payloads = vec![vec![5u8; 100]; 100];
    for _ in 0..2_000 {
        q.enqueue_batch(&payloads).unwrap();
    }
    loop {
        let batch = q.lease(1_000).unwrap();
        if batch.is_empty() {
            break;
        }
        q.ack_all(&batch).unwrap();
    }
    store.sync().unwrap();
    let full = allocated(&dir);
    assert!(full > 16 << 20, "the workload took {full} bytes");
    let report = store.compact_now().unwrap();
    assert!(report.restarted_small, "{report:?}");
    let bytes = allocated(&dir);
    eprintln!("drained: {full} bytes on disk before the run, {bytes} after");
    assert!(bytes <= 256 << 10, "a drained store takes {bytes} bytes");
    assert_eq!(segment_sizes(&dir), vec![FIRST_SEGMENT_SIZE]);
    // A second run finds nothing to shrink, and the store still works and reopens.
    let again = store.compact_now().unwrap();
    assert!(!again.restarted_small);
    let id = q.enqueue(b"after").unwrap();
    drop(q);
    store.close().unwrap();
    let store = Store::open(&dir, common::config()).unwrap();
    let q = store.queue("q").unwrap();
    let got = q.lease(10).unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].id(), id);
    drop(q);
    store.close().unwrap();
    assert!(allocated(&dir) <= 256 << 10);
}

#[test]
fn a_preallocated_tail_never_written_reads_as_zeros_and_takes_appends() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("store");
    let config = || {
        Config::default().compaction(deadletter::store::CompactionOptions::default().interval(None))
    };
    let store = Store::open(&dir, config()).unwrap();
    let q = store.queue("q").unwrap();
    let first = q.enqueue(b"one").unwrap();
    drop(q);
    store.close().unwrap();
    // Without its tail hint, the open reads the whole allocated segment.
    for e in std::fs::read_dir(&dir).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().into_string().unwrap();
        if name.ends_with(".tmp") && name.len() == 24 {
            std::fs::remove_file(e.path()).unwrap();
        }
    }
    let store = Store::open(&dir, config()).unwrap();
    assert!(store.recovery_report().torn_tail.is_none());
    let q = store.queue("q").unwrap();
    let second = q.enqueue(b"two").unwrap();
    let got = q.lease(10).unwrap();
    assert_eq!(
        got.iter().map(|m| m.id()).collect::<Vec<_>>(),
        vec![first, second]
    );
    drop(q);
    store.close().unwrap();
}
