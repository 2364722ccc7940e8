//! The test machinery itself: the simulated disk (`SimDisk`: capacity, what a power cut
//! keeps, atomic renames, exclusive locks, maps as snapshots), the fault injector
//! (`FaultyFs`: the n-th operation, from the n-th on, a full disk, read errors) and the
//! seeded generator (`SimRng`) the other tests are built on; and the real file system's
//! maps (`RealFs`), which are live.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use deadletter::sim::{Fault, FaultyFs, OpKinds, RealFs, SimDisk, SimRng, Vfs};

fn p(s: &str) -> PathBuf {
    PathBuf::from(s)
}

#[test]
fn a_disk_with_a_capacity_refuses_growth_past_it_and_frees_what_is_removed() {
    let disk = SimDisk::new();
    disk.create_dir_all(&p("/d")).unwrap();
    let a = disk.create(&p("/d/a")).unwrap();
    a.write_at(&[1; 600], 0).unwrap();
    disk.set_capacity(Some(1000));
    let b = disk.create(&p("/d/b")).unwrap();
    b.set_len(400).unwrap();
    assert_eq!(disk.used_bytes(), 1000);
    let full = b.write_at(b"x", 400).unwrap_err();
    assert_eq!(full.kind(), io::ErrorKind::StorageFull);
    assert!(b.set_len(401).is_err());
    assert!(disk.create(&p("/d/c")).is_err());
    // Inside a file's length, nothing new is needed.
    b.write_at(&[2; 400], 0).unwrap();
    a.sync().unwrap();
    // Shrinking and removing free space.
    a.set_len(100).unwrap();
    b.write_at(&[3; 500], 400).unwrap();
    disk.remove(&p("/d/b")).unwrap();
    assert_eq!(disk.used_bytes(), 100);
    disk.create(&p("/d/c"))
        .unwrap()
        .write_at(&[4; 900], 0)
        .unwrap();
    disk.set_capacity(None);
    disk.create(&p("/d/e"))
        .unwrap()
        .write_at(&[5; 5000], 0)
        .unwrap();
}

#[test]
fn synced_data_and_names_survive_everything_else_may_not() {
    let disk = SimDisk::new();
    disk.create_dir_all(&p("/d")).unwrap();
    disk.sync_dir(&p("/")).unwrap();
    let f = disk.create(&p("/d/a")).unwrap();
    f.write_at(b"hello", 0).unwrap();
    f.sync().unwrap();
    disk.sync_dir(&p("/d")).unwrap();
    f.write_at(b"world", 5).unwrap();
    let g = disk.create(&p("/d/b")).unwrap();
    g.write_at(b"x", 0).unwrap();
    g.sync().unwrap();
    let mut saw_lost = false;
    for seed in 0..200 {
        let d = disk.fork();
        d.power_cut(seed);
        let a = d.file_bytes(&p("/d/a")).unwrap();
        assert_eq!(&a[..5], b"hello");
        saw_lost |= d.file_bytes(&p("/d/b")).is_none();
        assert!(f.len().is_ok(), "the original disk's handles still work");
    }
    assert!(saw_lost, "an unsynced creation is sometimes undone");
    disk.power_cut(1);
    assert!(f.write_at(b"z", 0).is_err(), "stale handle");
}

#[test]
fn rename_is_atomic_and_locks_are_exclusive() {
    let disk = SimDisk::new();
    let f = disk.create(&p("t")).unwrap();
    f.write_at(b"new", 0).unwrap();
    f.sync().unwrap();
    disk.sync_dir(&p("")).unwrap();
    disk.rename(&p("t"), &p("final")).unwrap();
    for seed in 0..100 {
        let d = disk.fork();
        d.power_cut(seed);
        let names = d.list(&p("")).unwrap();
        assert_eq!(names.len(), 1, "{names:?}");
    }
    let l = disk.lock(&p("LOCK")).unwrap();
    assert_eq!(
        disk.lock(&p("LOCK")).err().map(|e| e.kind()),
        Some(io::ErrorKind::WouldBlock)
    );
    drop(l);
    let _again = disk.lock(&p("LOCK")).unwrap();
    disk.power_cut(3);
    let _after_cut = disk.lock(&p("LOCK")).unwrap();
}

#[test]
fn maps_are_snapshots() {
    let disk = SimDisk::new();
    let f = disk.create(&p("f")).unwrap();
    f.write_at(b"abc", 0).unwrap();
    let m = f.map().unwrap();
    f.write_at(b"d", 3).unwrap();
    assert_eq!(m.range(0, 3), Some(&b"abc"[..]));
    assert!(!m.is_live());
    let again = f.map().unwrap();
    assert_eq!(again.range(0, again.len()), Some(&b"abcd"[..]));
}

#[test]
fn nth_from_and_disk_full() {
    let fs = FaultyFs::new(Arc::new(SimDisk::new()), 1);
    let f = fs.create(Path::new("a")).unwrap();
    f.set_len(100).unwrap();
    fs.fail_nth(1, OpKinds::WRITE, Fault::Eio);
    f.write_at(b"x", 0).unwrap();
    assert!(f.write_at(b"x", 0).is_err());
    f.write_at(b"x", 0).unwrap();
    fs.fail_from(0, OpKinds::SYNC, Fault::FailedSync);
    assert!(f.sync().is_err());
    assert!(f.sync().is_err());
    fs.clear();
    f.sync().unwrap();
    fs.set_disk_full(true);
    f.write_at(b"inside", 10).unwrap();
    let e = f.write_at(b"past the end", 95).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::StorageFull);
    assert!(fs.create(Path::new("b")).is_err());
    fs.set_disk_full(false);
    fs.create(Path::new("b")).unwrap();
    assert_eq!(fs.injected(), 5);
}

#[test]
fn read_errors_fail_reads_only_while_on() {
    let fs = FaultyFs::new(Arc::new(SimDisk::new()), 2);
    let f = fs.create(Path::new("a")).unwrap();
    f.write_at(b"data", 0).unwrap();
    fs.set_read_errors(Some(1.0));
    let mut buf = [0u8; 4];
    assert!(f.read_at(&mut buf, 0).is_err());
    assert!(f.map().is_err());
    assert!(f.len().is_err());
    f.write_at(b"more", 4).unwrap();
    f.sync().unwrap();
    assert_eq!(fs.read_errors(), 3);
    fs.set_read_errors(Some(0.5));
    let failed = (0..400).filter(|_| f.read_at(&mut buf, 0).is_err()).count();
    assert!((100..300).contains(&failed), "{failed} of 400");
    fs.set_read_errors(None);
    assert!(!fs.read_errors_on());
    assert_eq!(f.read_at(&mut buf, 0).unwrap(), 4);
    assert_eq!(&buf, b"data");
}

#[test]
fn deterministic_and_in_range() {
    let mut a = SimRng::new(42);
    let mut b = SimRng::new(42);
    for _ in 0..1000 {
        assert_eq!(a.next_u64(), b.next_u64());
        assert!(a.below(7) < 7);
        b.below(7);
    }
    assert_eq!(SimRng::new(1).below(0), 0);
    let mut c = SimRng::new(3);
    let hits = (0..10_000).filter(|_| c.chance(0.25)).count();
    assert!((2000..3000).contains(&hits), "{hits}");
}

/// A real file's map is live: a write through the file after mapping shows through
/// the map (the log relies on it to read new records without mapping again).
#[test]
#[cfg_attr(miri, ignore)]
fn a_real_files_map_shows_later_writes() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = RealFs.create(&dir.path().join("f")).expect("create");
    file.set_len(4096).expect("size");
    let map = file.map().expect("map");
    assert!(map.is_live());
    assert_eq!(map.range(10, 14), Some(&[0u8; 4][..]));
    file.write_at(b"live", 10).expect("write");
    assert_eq!(map.range(10, 14), Some(&b"live"[..]));
}

/// A real file's map reads back ranges of what was written, and no range past it (not
/// under Miri, which cannot map files).
#[test]
#[cfg_attr(miri, ignore)]
fn a_mapped_file_reads_back_ranges_of_what_was_written() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = RealFs.create(&dir.path().join("f")).expect("create");
    let bytes: Vec<u8> = (0..8192u32).map(|i| (i % 253) as u8).collect();
    file.write_at(&bytes, 0).expect("write");
    let map = file.map().expect("map");
    assert_eq!(map.len(), bytes.len());
    assert_eq!(map.range(100, 200), Some(&bytes[100..200]));
    assert_eq!(map.range(0, 8192), Some(&bytes[..]));
    assert_eq!(map.range(8000, 8193), None);
    assert_eq!(map.range(9, 8), None);
}
