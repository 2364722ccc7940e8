//! Full-disk behaviour (ENOSPC), on the simulated disk behind `FaultyFs`.
//!
//! What is promised (see `docs/RELIABILITY.md`, "A full disk"):
//! - an enqueue that needs space the disk does not have fails with `Error::DiskFull`, whose
//!   message says so and names the file;
//! - the store stays readable and consistent (stats, DLQ browsing, the census of every
//!   message), and consumers can still lease, ack and dead-letter while the active segment
//!   has room (segments are preallocated, so writing into one needs no new space);
//! - ENOSPC while *creating* a segment (a roll) leaves no segment behind and does not poison
//!   the log: once space returns, writing resumes without reopening;
//! - ENOSPC on a *write* or an *fsync* of a segment (a file system that allocates lazily)
//!   poisons the log like any failed write or fsync: writes resume after a reopen, and
//!   nothing acknowledged before is lost;
//! - on a disk filled to the brim (a disk with a size, `SimDisk::set_capacity`), once
//!   consumers have acked, compaction frees space on its own: its checkpoint goes over the
//!   reserve kept for it, and writes resume.

mod common;

use std::path::Path;
use std::sync::Arc;

use common::T0;
use deadletter::clock::ManualClock;
use deadletter::queue::{FailureReport, MessageId};
use deadletter::sim::inspect::census;
use deadletter::sim::Vfs;
use deadletter::sim::{Fault, FaultyFs, OpKinds, SimDisk};
use deadletter::{Config, Error, Failure, Filter, Page, Queue, Store};

const DIR: &str = "/data/store";
const SEGMENT: u64 = 80 << 10;

fn setup() -> (SimDisk, FaultyFs) {
    let disk = SimDisk::new();
    disk.create_dir_all(Path::new("/data")).unwrap();
    disk.sync_dir(Path::new("/")).unwrap();
    let fs = FaultyFs::new(Arc::new(disk.clone()), 1);
    (disk, fs)
}

fn config(fs: &FaultyFs) -> Config {
    common::config_at(&ManualClock::new(T0))
        .segment_size(SEGMENT)
        // Every segment of the full size from the first: the cases count segments.
        .first_segment_size(SEGMENT)
        .max_message_size(8 << 10)
        .vfs(Arc::new(fs.clone()))
}

/// Enqueues `size`-byte messages until one fails; returns the ids of those that succeeded.
fn fill(q: &Queue, size: usize) -> (Vec<MessageId>, Error) {
    let mut ids = Vec::new();
    for i in 0..10_000u32 {
        match q.enqueue(vec![(i % 250) as u8 + 1; size]) {
            Ok(id) => ids.push(id),
            Err(e) => return (ids, e),
        }
    }
    panic!("the disk never filled");
}

fn assert_all_present(store: &Store, ids: &[MessageId]) {
    let c = census(store).expect("a consistent store");
    for id in ids {
        assert!(c.contains_key(id), "acknowledged message {id} is missing");
    }
}

#[test]
fn enqueue_fails_clearly_consumers_go_on_and_writes_resume_without_reopen() {
    let (disk, fs) = setup();
    let store = Store::open(DIR, config(&fs)).unwrap();
    let q = store.queue("orders").unwrap();
    let mut acked: Vec<MessageId> = (0..3).map(|i| q.enqueue([i; 100]).unwrap()).collect();
    // The disk fills while the first segment is still less than half used (no spare yet).
    fs.set_disk_full(true);
    let (more, err) = fill(&q, 4000);
    acked.extend(more);
    match &err {
        Error::DiskFull { path } => assert!(path.starts_with(DIR), "{path:?}"),
        other => panic!("expected DiskFull, got {other:?}"),
    }
    assert!(err.to_string().contains("disk full"), "{err}");
    assert!(
        !store.storage_stats().poisoned,
        "ENOSPC creating a segment does not poison"
    );
    assert_eq!(
        store.storage_stats().segments.len(),
        1,
        "no half-made segment is left in the log"
    );

    // Readable and consistent.
    assert_eq!(q.stats().counts.ready as usize, acked.len());
    assert_all_present(&store, &acked);
    assert!(q
        .dlq()
        .list(&Filter::all(), Page::first(10))
        .unwrap()
        .is_empty());

    // Consumers go on while the active segment has room: lease, ack, dead-letter.
    let leased = q.lease(2).unwrap();
    assert_eq!(leased.len(), 2);
    q.ack(&leased[0]).unwrap();
    let failure = Failure::permanent("Invalid", "bad order");
    q.dead_letter(&leased[1], &FailureReport::new(&failure))
        .unwrap();
    acked.retain(|id| *id != leased[0].id());
    assert_eq!(q.dlq().len(), 1);

    // Space comes back: writing resumes in the same process.
    fs.set_disk_full(false);
    let (more, _) = fill_n(&q, 4000, 40);
    acked.extend(more);
    assert!(
        store.storage_stats().segments.len() > 1,
        "the log rolled once space returned"
    );
    assert_all_present(&store, &acked);
    drop(leased);
    drop(q);
    drop(store);

    // And all of it is durable.
    disk.power_cut(7);
    let store = Store::open(DIR, config(&fs)).unwrap();
    assert_all_present(&store, &acked);
    assert_eq!(store.existing_queue("orders").unwrap().dlq().len(), 1);
}

fn fill_n(q: &Queue, size: usize, n: usize) -> (Vec<MessageId>, ()) {
    let ids = (0..n)
        .map(|i| q.enqueue(vec![i as u8; size]).expect("space is back"))
        .collect();
    (ids, ())
}

#[test]
fn enospc_on_a_segment_write_poisons_until_reopen() {
    let (disk, fs) = setup();
    let store = Store::open(DIR, config(&fs)).unwrap();
    let q = store.queue("q").unwrap();
    let acked: Vec<MessageId> = (0..5).map(|i| q.enqueue([i; 300]).unwrap()).collect();
    fs.fail_nth(0, OpKinds::WRITE, Fault::Enospc);
    let err = q.enqueue(b"no room for this").unwrap_err();
    assert!(matches!(err, Error::DiskFull { .. }), "{err:?}");
    assert!(store.storage_stats().poisoned);
    assert!(matches!(q.enqueue(b"later"), Err(Error::Poisoned)));
    // Still readable: counts and the DLQ; the one record that never reached the file is
    // in the index until the reopen, and reading it says why it cannot be read.
    assert_eq!(q.stats().counts.ready, 6);
    assert!(q.dlq().list(&Filter::all(), Page::first(10)).is_ok());
    assert!(matches!(census(&store), Err(Error::Poisoned)));
    drop(q);
    drop(store);
    disk.power_cut(3);
    let store = Store::open(DIR, config(&fs)).unwrap();
    assert_all_present(&store, &acked);
    store.queue("q").unwrap().enqueue(b"after reopen").unwrap();
}

#[test]
fn enospc_from_fsync_poisons_until_reopen() {
    // A file system that allocates at write-back (delayed allocation) reports a full disk
    // at fsync time; the data may be gone from the page cache, so this is a failed fsync.
    let (disk, fs) = setup();
    let store = Store::open(DIR, config(&fs)).unwrap();
    let q = store.queue("q").unwrap();
    let acked: Vec<MessageId> = (0..5).map(|i| q.enqueue([i; 300]).unwrap()).collect();
    fs.fail_nth(0, OpKinds::SYNC, Fault::Enospc);
    assert!(matches!(q.enqueue(b"x"), Err(Error::DiskFull { .. })));
    assert!(matches!(q.enqueue(b"y"), Err(Error::Poisoned)));
    drop(q);
    drop(store);
    disk.power_cut(4);
    let store = Store::open(DIR, config(&fs)).unwrap();
    assert_all_present(&store, &acked);
}

#[test]
fn a_full_store_opens_and_serves_consumers() {
    let (disk, fs) = setup();
    let store = Store::open(DIR, config(&fs)).unwrap();
    let q = store.queue("q").unwrap();
    fs.set_disk_full(true);
    let (acked, err) = fill(&q, 4000);
    assert!(matches!(err, Error::DiskFull { .. }));
    drop(q);
    drop(store);
    disk.power_cut(5);
    // Reopening needs no new space: the active segment is already allocated.
    let store = Store::open(DIR, config(&fs)).expect("opens on a full disk");
    assert_all_present(&store, &acked);
    let q = store.queue("q").unwrap();
    let leased = q.lease(1).unwrap();
    q.ack(&leased[0]).unwrap();
    // This disk frees nothing (a switch, not a size): compaction writes its checkpoint
    // over the reserve, then finds no room for the second slot's copy and says so.
    assert!(matches!(store.compact_now(), Err(Error::DiskFull { .. })));
    assert!(!store.storage_stats().poisoned);
    fs.set_disk_full(false);
    store.compact_now().unwrap();
    q.enqueue(b"space is back").unwrap();
    assert_all_present(&store, &acked[1..]);
}

#[test]
fn a_spare_segment_made_before_the_disk_filled_gives_one_more_segment() {
    let (_disk, fs) = setup();
    let store = Store::open(DIR, config(&fs)).unwrap();
    let q = store.queue("q").unwrap();
    // Past half of the first segment, the next one is prepared (allocated) in advance.
    while store.storage_stats().segments[0].end * 2 < SEGMENT {
        q.enqueue([7u8; 2000]).unwrap();
    }
    q.enqueue([7u8; 2000]).unwrap();
    fs.set_disk_full(true);
    let (_, err) = fill(&q, 4000);
    assert!(matches!(err, Error::DiskFull { .. }));
    assert_eq!(
        store.storage_stats().segments.len(),
        2,
        "the prepared spare became the second segment; the third could not be made"
    );
    assert!(!store.storage_stats().poisoned);
    fs.set_disk_full(false);
    q.enqueue(b"space is back").unwrap();
    assert!(fs.list(Path::new(DIR)).unwrap().len() >= 3);
}

#[test]
fn small_enqueues_cannot_take_the_room_consumers_need() {
    // Producers of small messages fill the segment as far as they may; the last 1/32 of it
    // is kept for records without a payload, so consumers can still drain the queue.
    let (_disk, fs) = setup();
    let store = Store::open(DIR, config(&fs)).unwrap();
    let q = store.queue("q").unwrap();
    fs.set_disk_full(true);
    let (ids, err) = fill(&q, 100);
    assert!(matches!(err, Error::DiskFull { .. }));
    assert!(ids.len() > 100);
    for i in 0..20 {
        let m = q.lease(1).unwrap();
        assert_eq!(m.len(), 1);
        q.ack(&m[0])
            .unwrap_or_else(|e| panic!("ack {i} on a full disk: {e}"));
    }
    let batch = q.lease(10).unwrap();
    q.ack_all(&batch).unwrap();
    assert!(matches!(q.enqueue([1u8; 100]), Err(Error::DiskFull { .. })));
    assert_eq!(q.stats().counts.ready as usize, ids.len() - 30);
    fs.set_disk_full(false);
    q.enqueue([1u8; 100]).unwrap();
}

#[test]
fn compaction_recovers_a_full_disk_on_its_own() {
    let (disk, fs) = setup();
    let store = Store::open(DIR, config(&fs)).unwrap();
    let q = store.queue("q").unwrap();
    let (mut acked, ()) = fill_n(&q, 4000, 50);
    store.compact_now().unwrap();
    // The disk is full to the last byte; producers fill the active segment and fail.
    disk.set_capacity(Some(disk.used_bytes()));
    let (more, err) = fill(&q, 4000);
    assert!(matches!(err, Error::DiskFull { .. }), "{err:?}");
    acked.extend(more);
    let segments = store.storage_stats().segments.len();
    assert!(segments >= 3, "{segments} segments");
    // Consumers ack all but the newest few (into the room kept for them).
    let keep = acked.split_off(acked.len() - 3);
    while let Some(batch) = Some(q.lease(100).unwrap()).filter(|b| !b.is_empty()) {
        let (ack, release): (Vec<_>, Vec<_>) =
            batch.into_iter().partition(|m| !keep.contains(&m.id()));
        q.ack_all(&ack).unwrap();
        for m in release {
            q.release(&m, std::time::Duration::from_secs(3600)).unwrap();
        }
    }
    assert!(matches!(
        q.enqueue([1u8; 4000]),
        Err(Error::DiskFull { .. })
    ));
    // Compaction frees the space on its own: no file removed by hand, no reopen.
    let report = store.compact_now().expect("compaction on a full disk");
    assert!(report.segments_deleted > 0, "{report:?}");
    assert!(!report.reserve_short, "{report:?}");
    let (resumed, ()) = fill_n(&q, 4000, 10);
    drop(q);
    drop(store);
    disk.power_cut(9);
    let store = Store::open(DIR, config(&fs)).unwrap();
    let c = census(&store).unwrap();
    let present: Vec<MessageId> = c.keys().copied().collect();
    let expected: Vec<MessageId> = keep.iter().chain(&resumed).copied().collect();
    assert_eq!(
        present, expected,
        "exactly the unacked and the new messages"
    );
}

/// A tmpfs of `size` bytes mounted on a fresh directory, unmounted when dropped: a real
/// file system that really fills. `None` where mounting is not allowed (not root, no
/// `CAP_SYS_ADMIN`).
struct Tmpfs {
    _dir: tempfile::TempDir,
    mount: std::path::PathBuf,
}

impl Tmpfs {
    fn mount(size: u64) -> Option<Tmpfs> {
        let dir = tempfile::tempdir().expect("temporary directory");
        let mount = dir.path().join("fs");
        std::fs::create_dir(&mount).expect("mount point");
        let status = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&mount)
            .stderr(std::process::Stdio::null())
            .status()
            .ok()?;
        status.success().then_some(Tmpfs { _dir: dir, mount })
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let umount = |lazy: bool| {
            let mut cmd = std::process::Command::new("umount");
            if lazy {
                cmd.arg("-l");
            }
            cmd.arg(&self.mount).status().is_ok_and(|s| s.success())
        };
        if !umount(false) {
            umount(true);
        }
    }
}

/// The same as `compaction_recovers_a_full_disk_on_its_own`, on a real file system that
/// fills (a 2 MiB tmpfs; skipped, saying so, where it cannot be mounted): the reserve is
/// real, allocated bytes, compaction on the full disk writes its checkpoint over them and
/// frees the dead segments, and enqueues work again without a reopen.
#[test]
fn on_a_real_full_file_system_compaction_frees_space_on_its_own() {
    let Some(fs) = Tmpfs::mount(2 << 20) else {
        eprintln!("skipped: cannot mount a tmpfs here (needs root)");
        return;
    };
    let dir = fs.mount.join("store");
    let config = || {
        common::config_at(&ManualClock::new(T0))
            .segment_size(256 << 10)
            .first_segment_size(256 << 10)
            .max_message_size(16 << 10)
    };
    let store = Store::open(&dir, config()).unwrap();
    // The reserve is there and its bytes are allocated (not a sparse length).
    let reserve = std::fs::metadata(dir.join("checkpoint.tmp")).expect("the reserve");
    assert!(reserve.len() >= 16 << 10, "{}", reserve.len());
    assert!(
        std::os::unix::fs::MetadataExt::blocks(&reserve) * 512 >= reserve.len(),
        "the reserve is sparse"
    );
    let q = store.queue("q").unwrap();
    let (mut acked, err) = fill(&q, 12_000);
    assert!(matches!(err, Error::DiskFull { .. }), "{err:?}");
    assert!(store.storage_stats().segments.len() >= 4);
    let keep = acked.split_off(acked.len() - 2);
    while let Some(batch) = Some(q.lease(50).unwrap()).filter(|b| !b.is_empty()) {
        let (ack, release): (Vec<_>, Vec<_>) =
            batch.into_iter().partition(|m| !keep.contains(&m.id()));
        q.ack_all(&ack).unwrap();
        for m in release {
            q.release(&m, std::time::Duration::from_secs(3600)).unwrap();
        }
    }
    // Still full. (On a real file system the log prepares its next segment on another
    // thread, and one that failed for want of space gives its partial file back: fill
    // what that freed, so that the last roll failed.)
    let (more, err) = fill(&q, 12_000);
    assert!(matches!(err, Error::DiskFull { .. }), "{err:?}");
    let mut keep = keep;
    keep.extend(more);
    let report = store.compact_now().expect("compaction on a full disk");
    assert!(
        report.full_disk && report.segments_deleted > 0,
        "{report:?}"
    );
    assert!(!report.reserve_short, "{report:?}");
    let resumed: Vec<MessageId> = (0..10)
        .map(|i| q.enqueue([i as u8; 12_000]).expect("space is back"))
        .collect();
    drop(q);
    drop(store);
    let store = Store::open(&dir, config()).unwrap();
    let present: Vec<MessageId> = census(&store).unwrap().keys().copied().collect();
    let expected: Vec<MessageId> = keep.iter().chain(&resumed).copied().collect();
    assert_eq!(
        present, expected,
        "exactly the unacked and the new messages"
    );
    drop(store);
    drop(fs);
}
