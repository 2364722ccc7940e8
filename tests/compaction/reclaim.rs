//! Disk reclaim: relocation and segment deletion keep every live message (payload, DLQ
//! entry) across reopens while the disk shrinks to what is live, and judge what is live
//! from the checkpoint, so nothing a crash could bring back loses its payload.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use deadletter::clock::ManualClock;
use deadletter::queue::FailureReport;
use deadletter::sim::{LockGuard, RealFs, StoreHooks, Vfs, VfsFile};
use deadletter::{Failure, Store};

use crate::common::{self, T0};
use crate::helpers::{churn, config};

/// A file system that runs a hook when a checkpoint's temporary file is created, that is in
/// the middle of a compaction, after its snapshot.
struct HookFs {
    hook: Hook,
}

/// A hook run once.
type Hook = Arc<Mutex<Option<Box<dyn FnOnce() + Send>>>>;

impl Vfs for HookFs {
    fn create_dir_all(&self, dir: &Path) -> std::io::Result<()> {
        RealFs.create_dir_all(dir)
    }
    fn create(&self, path: &Path) -> std::io::Result<Arc<dyn VfsFile>> {
        if path.file_name().is_some_and(|n| n == "checkpoint.tmp") {
            let hook = self.hook.lock().unwrap().take();
            if let Some(hook) = hook {
                hook();
            }
        }
        RealFs.create(path)
    }
    fn open(&self, path: &Path, read_only: bool) -> std::io::Result<Arc<dyn VfsFile>> {
        RealFs.open(path, read_only)
    }
    fn rename(&self, from: &Path, to: &Path) -> std::io::Result<()> {
        RealFs.rename(from, to)
    }
    fn remove(&self, path: &Path) -> std::io::Result<()> {
        RealFs.remove(path)
    }
    fn list(&self, dir: &Path) -> std::io::Result<Vec<String>> {
        RealFs.list(dir)
    }
    fn sync_dir(&self, dir: &Path) -> std::io::Result<()> {
        RealFs.sync_dir(dir)
    }
    fn lock(&self, path: &Path) -> std::io::Result<Box<dyn LockGuard>> {
        RealFs.lock(path)
    }
}

#[test]
fn reclaim_keeps_every_live_message_across_reopens() {
    let clock = ManualClock::new(T0);
    let (dir, store) = common::temp_store(config(&clock));
    let q = store.queue("q").unwrap();
    let mut kept = Vec::new();
    for round in 0..20 {
        let ids = q
            .enqueue_batch(
                &(0..200)
                    .map(|i| format!("r{round}-m{i}-{}", "x".repeat(100)))
                    .collect::<Vec<_>>(),
            )
            .unwrap();
        // Keep one message in fifty; ack the rest; dead-letter one per round.
        let leased = q.lease(10_000).unwrap();
        for m in leased {
            let Some(i) = ids.iter().position(|&x| x == m.id()) else {
                // Kept from an earlier round: stays.
                q.release(&m, Duration::ZERO).unwrap();
                continue;
            };
            if i == 7 {
                let f = Failure::permanent("Bad", "bad");
                q.dead_letter(&m, &FailureReport::new(&f)).unwrap();
            } else if i % 50 == 0 {
                q.release(&m, Duration::ZERO).unwrap();
                kept.push((m.id(), m.payload().to_vec()));
            } else {
                q.ack(&m).unwrap();
            }
        }
        store.compact_now().unwrap();
    }
    let before = store.storage_stats().segments.len();
    let report = store.compact_now().unwrap();
    let after = store.storage_stats().segments.len();
    assert!(
        after < 10,
        "segments left: {after} (before {before}), {report:?}"
    );
    assert!(common::disk_bytes(dir.path()) < 2 << 20);
    let stats = q.stats();
    assert_eq!(stats.counts.ready as usize, kept.len());
    assert_eq!(q.dlq().len(), 20);
    drop(q);
    store.close().unwrap();

    let store = Store::open(dir.path(), config(&clock)).unwrap();
    let q = store.queue("q").unwrap();
    assert_eq!(q.stats().counts.ready as usize, kept.len());
    assert_eq!(q.stats().counts.acked, stats.counts.acked);
    let mut got: Vec<(u64, Vec<u8>)> = q
        .lease(10_000)
        .unwrap()
        .into_iter()
        .map(|m| (m.id(), m.payload().to_vec()))
        .collect();
    got.sort();
    kept.sort();
    assert_eq!(got, kept);
    let dlq = q.dlq();
    assert_eq!(dlq.len(), 20);
    for e in dlq.peek(100).unwrap() {
        assert_eq!(e.failure.error_kind, "Bad");
        assert!(e.payload.starts_with(b"r"));
    }
}

/// Reclaim must judge what is live from the checkpoint's snapshot, not from the live index:
/// an ack applied to the index but not yet durable is lost by a crash, and the message it
/// acked must then still have its payload.
#[test]
fn reclaim_keeps_what_a_crash_could_bring_back() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let hook: Hook = Arc::new(Mutex::new(None));
    let cfg = config(&clock).vfs(Arc::new(HookFs {
        hook: Arc::clone(&hook),
    }));
    let store = Store::open(dir.path(), cfg.clone()).unwrap();
    let q = store.queue("q").unwrap();
    // A dense first segment of messages that stay leased.
    let payloads: Vec<String> = (0..500)
        .map(|i| format!("held-{i}-{}", "h".repeat(600)))
        .collect();
    let ids = q.enqueue_batch(&payloads).unwrap();
    let held = q.lease(500).unwrap();
    assert_eq!(held.len(), 500);
    churn(&store, 500);
    store.compact_now().unwrap();
    churn(&store, 500);
    store.compact_now().unwrap();
    store
        .queue("other")
        .unwrap()
        .enqueue("so that a checkpoint is due")
        .unwrap();
    store.sync().unwrap();
    // During the next compaction, after its snapshot, every held message is acked; the
    // acks are in the index but not durable (Durability::Never, nothing synced after).
    let acker = q.clone();
    *hook.lock().unwrap() = Some(Box::new(move || acker.ack_all(&held).unwrap()));
    store.compact_now().unwrap();
    assert!(hook.lock().unwrap().is_none(), "the hook ran");
    assert_eq!(q.stats().counts.acked, 500);
    drop(q);
    store.abandon();

    let store = Store::open(dir.path(), cfg).unwrap();
    let q = store.queue("q").unwrap();
    assert_eq!(
        q.stats().counts.ready,
        500,
        "the acks were lost with the crash"
    );
    // They were in flight when the process died: suspects, delivered one at a time.
    let mut back = Vec::new();
    while let Some(m) = q.lease(1000).unwrap().pop() {
        q.ack(&m).unwrap();
        back.push(m);
    }
    back.sort_by_key(|m| m.id());
    assert_eq!(back.len(), 500);
    for ((m, &id), p) in back.iter().zip(&ids).zip(&payloads) {
        assert_eq!(m.id(), id);
        assert!(m.payload() == p.as_bytes(), "payload of {id}");
    }
}
