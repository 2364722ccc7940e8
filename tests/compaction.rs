//! Compaction: disk reclaim with relocation and checkpoints, TTL expiry in both modes,
//! DLQ retention, clock jumps, and fast reopen from a checkpoint.

use std::time::Duration;

use deadletter::{
    CompactionOptions, Config, Durability, EnqueueOptions, Failure, FailureReport, ManualClock,
    QueueOptions, Store,
};

const T0: u64 = 1_700_000_000_000;

fn config(clock: &ManualClock) -> Config {
    Config::default()
        .durability(Durability::Never)
        .segment_size(256 << 10)
        .max_message_size(4 << 10)
        .compaction(CompactionOptions::default().interval(None))
        .clock(clock.clone())
}

fn disk_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum()
}

#[test]
fn reclaim_keeps_every_live_message_across_reopens() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let store = Store::open(dir.path(), config(&clock)).unwrap();
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
    assert!(disk_bytes(dir.path()) < 2 << 20);
    let stats = q.stats();
    assert_eq!(stats.ready as usize, kept.len());
    assert_eq!(q.dlq().len(), 20);
    drop(q);
    store.close().unwrap();

    let store = Store::open(dir.path(), config(&clock)).unwrap();
    let q = store.queue("q").unwrap();
    assert_eq!(q.stats().ready as usize, kept.len());
    assert_eq!(q.stats().acked, stats.acked);
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

#[test]
fn ttl_expiry_to_the_dlq_or_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let store = Store::open(dir.path(), config(&clock)).unwrap();
    let to_dlq = store.queue("to-dlq").unwrap();
    let dropped = store
        .queue_with("dropped", QueueOptions::default().expired_to_dlq(false))
        .unwrap();
    let ttl = EnqueueOptions::new().ttl(Duration::from_secs(60));
    let a = to_dlq.enqueue_with("a", &ttl).unwrap();
    dropped.enqueue_with("b", &ttl).unwrap();
    to_dlq.enqueue("no ttl").unwrap();
    clock.advance(59_000);
    let r = store.compact_now().unwrap();
    assert_eq!((r.expired_to_dlq, r.expired_dropped), (0, 0));
    clock.advance(2_000);
    let r = store.compact_now().unwrap();
    assert_eq!((r.expired_to_dlq, r.expired_dropped), (1, 1));
    assert_eq!(to_dlq.dlq().get(a).unwrap().failure.error_kind, "expired");
    assert_eq!(to_dlq.stats().expired, 1);
    assert_eq!(to_dlq.stats().ready, 1);
    assert_eq!(dropped.stats().expired, 1);
    assert_eq!(dropped.stats().ready, 0);
}

#[test]
fn dlq_retention_removes_old_entries_and_counts_them() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let mut cfg = config(&clock);
    cfg.retention = Some(Duration::from_secs(3600));
    let store = Store::open(dir.path(), cfg).unwrap();
    let q = store.queue("q").unwrap();
    q.enqueue("x").unwrap();
    let m = q.lease(1).unwrap().remove(0);
    q.dead_letter(&m, &FailureReport::new(&Failure::permanent("K", "m")))
        .unwrap();
    clock.advance(3_599_000);
    assert_eq!(store.compact_now().unwrap().retention_removed, 0);
    clock.advance(2_000);
    assert_eq!(store.compact_now().unwrap().retention_removed, 1);
    let stats = q.dlq().stats();
    assert_eq!((stats.total, stats.expired), (0, 1));
}

#[test]
fn clock_jumps_neither_mass_expire_nor_resurrect() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let store = Store::open(dir.path(), config(&clock)).unwrap();
    let q = store.queue("q").unwrap();
    let ttl = |s| EnqueueOptions::new().ttl(Duration::from_secs(s));
    q.enqueue_with("short", &ttl(60)).unwrap();
    q.enqueue_with("day", &ttl(86_400)).unwrap();
    // A jump a year ahead is followed at most one hour per reading.
    clock.set(T0 + 365 * 86_400_000);
    let r = store.compact_now().unwrap();
    assert_eq!(
        r.expired_to_dlq, 1,
        "only the 60 s message is due within the first hour"
    );
    assert_eq!(q.stats().ready, 1);
    // Back to the right time: nothing already expired comes back, nothing new expires.
    clock.set(T0 + 120_000);
    let r = store.compact_now().unwrap();
    assert_eq!(r.expired_to_dlq, 0);
    assert_eq!(q.dlq().len(), 1);
    assert_eq!(q.stats().ready, 1);
}

#[test]
fn reopen_from_a_checkpoint_replays_only_the_tail() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let store = Store::open(dir.path(), config(&clock)).unwrap();
    let q = store.queue("q").unwrap();
    for i in 0..500 {
        q.enqueue(format!("m{i}")).unwrap();
    }
    let r = store.compact_now().unwrap();
    let cp = r.checkpoint_position.unwrap();
    for i in 500..510 {
        q.enqueue(format!("m{i}")).unwrap();
    }
    drop(q);
    store.close().unwrap();
    let store = Store::open(dir.path(), config(&clock)).unwrap();
    assert!(cp > 0);
    let q = store.queue("q").unwrap();
    assert_eq!(q.stats().ready, 510);
    assert_eq!(q.stats().enqueued, 510);
    let all = q.lease(1000).unwrap();
    assert_eq!(all.len(), 510);
    assert_eq!(all[509].payload(), b"m509");
    // A damaged newest checkpoint falls back to the older one or a full replay.
    drop(all);
    drop(q);
    store.close().unwrap();
    for slot in ["checkpoint-0", "checkpoint-1"] {
        let p = dir.path().join(slot);
        if p.exists() {
            let mut bytes = std::fs::read(&p).unwrap();
            let n = bytes.len();
            bytes[n / 2] ^= 0xff;
            std::fs::write(&p, bytes).unwrap();
        }
    }
    let store = Store::open(dir.path(), config(&clock)).unwrap();
    assert_eq!(
        store.queue("q").unwrap().stats().in_flight + store.queue("q").unwrap().stats().ready,
        510
    );
}

// ---- Crash-safety regressions (issue 5 review) ----------------------------------------

use std::path::Path;
use std::sync::{Arc, Mutex};

use deadletter::sim::{checkpoint_positions, LockGuard, RealFs, StoreHooks, Vfs, VfsFile};
use deadletter::{CorruptionKind, Error, RecoveryMode};

/// The position each checkpoint slot covers (`None`: missing or damaged).
fn slot_positions(dir: &Path) -> [Option<u64>; 2] {
    checkpoint_positions(dir).unwrap()
}

fn damage(path: &Path) {
    let mut bytes = std::fs::read(path).unwrap();
    let n = bytes.len();
    bytes[n / 2] ^= 0xff;
    std::fs::write(path, bytes).unwrap();
}

/// Enqueues `n` messages of about 600 bytes to queue "churn" and acks them: traffic that
/// fills segments and leaves nothing live.
fn churn(store: &Store, n: usize) {
    let q = store.queue("churn").unwrap();
    let payloads: Vec<String> = (0..n)
        .map(|i| format!("churn-{i}-{}", "c".repeat(600)))
        .collect();
    for chunk in payloads.chunks(100) {
        q.enqueue_batch(chunk).unwrap();
        let leased = q.lease(chunk.len()).unwrap();
        q.ack_all(&leased).unwrap();
    }
}

#[test]
fn a_crash_between_checkpoint_and_reclaim_reads_the_slots_back() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let store = Store::open(dir.path(), config(&clock)).unwrap();
    let q = store.queue("q").unwrap();
    let keep = q.enqueue("kept across everything").unwrap();
    churn(&store, 500);
    let p1 = store.compact_now().unwrap().checkpoint_position.unwrap();
    churn(&store, 500);
    let p2 = store.compact_now().unwrap().checkpoint_position.unwrap();
    assert_eq!(slot_positions(dir.path()), [Some(p1), Some(p2)]);
    churn(&store, 50);
    store.sync().unwrap();
    drop(q);
    // Dies after the second checkpoint, before anything else.
    store.abandon();

    let store = Store::open(dir.path(), config(&clock)).unwrap();
    let q = store.queue("q").unwrap();
    assert_eq!(q.stats().ready, 1);
    let first_before = store.storage_stats().first_position;
    // The next checkpoint replaces the older slot (slot 0), never the newer one.
    let r = store.compact_now().unwrap();
    let p3 = r.checkpoint_position.unwrap();
    assert!(p3 > p2);
    assert_eq!(slot_positions(dir.path()), [Some(p3), Some(p2)]);
    // Reclaim stays below the older checkpoint and the kept message's payload.
    assert!(store.storage_stats().first_position <= p2);
    assert!(store.storage_stats().first_position >= first_before);
    let m = q.lease(10).unwrap();
    assert_eq!(m.len(), 1);
    assert_eq!(m[0].id(), keep);
    assert_eq!(m[0].payload(), b"kept across everything");
}

#[test]
fn a_damaged_slot_falls_back_to_the_other_and_is_rewritten_first() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let store = Store::open(dir.path(), config(&clock)).unwrap();
    let q = store.queue("q").unwrap();
    q.enqueue("a").unwrap();
    churn(&store, 300);
    let p1 = store.compact_now().unwrap().checkpoint_position.unwrap();
    q.enqueue("b").unwrap();
    churn(&store, 300);
    let p2 = store.compact_now().unwrap().checkpoint_position.unwrap();
    q.enqueue("c").unwrap();
    drop(q);
    store.close().unwrap();
    // The newer slot (1) is damaged: the older one plus the log after it rebuild the state.
    damage(&dir.path().join("checkpoint-1"));
    assert_eq!(slot_positions(dir.path()), [Some(p1), None]);
    let store = Store::open(dir.path(), config(&clock)).unwrap();
    let q = store.queue("q").unwrap();
    assert_eq!(q.stats().ready, 3);
    assert_eq!(store.queue("churn").unwrap().stats().acked, 600);
    // The damaged slot is written next; the good one is kept until then.
    let p3 = store.compact_now().unwrap().checkpoint_position.unwrap();
    assert!(p3 > p2);
    assert_eq!(slot_positions(dir.path()), [Some(p1), Some(p3)]);
    let got: Vec<String> = q
        .lease(10)
        .unwrap()
        .iter()
        .map(|m| String::from_utf8_lossy(&m.payload()[..m.payload().len().min(12)]).into_owned())
        .collect();
    assert_eq!(got, ["a", "b", "c"]);
}

#[test]
fn a_compacted_log_without_a_good_checkpoint_is_a_typed_error() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let store = Store::open(dir.path(), config(&clock)).unwrap();
    let q = store.queue("q").unwrap();
    for _ in 0..3 {
        churn(&store, 400);
        store.compact_now().unwrap();
    }
    q.enqueue("live").unwrap();
    assert!(
        store.storage_stats().first_position > 0,
        "the log was compacted"
    );
    drop(q);
    store.close().unwrap();
    let expect_bad_checkpoint = |what: &str| match Store::open(dir.path(), config(&clock)) {
        Err(Error::Corruption {
            kind: CorruptionKind::BadCheckpoint,
            ..
        }) => {}
        Err(e) => panic!("{what}: wrong error {e:?}"),
        Ok(_) => panic!("{what}: opened a compacted log without its checkpoint"),
    };
    // Both damaged.
    damage(&dir.path().join("checkpoint-0"));
    damage(&dir.path().join("checkpoint-1"));
    expect_bad_checkpoint("both slots damaged");
    // Both missing.
    std::fs::remove_file(dir.path().join("checkpoint-0")).unwrap();
    std::fs::remove_file(dir.path().join("checkpoint-1")).unwrap();
    expect_bad_checkpoint("both slots missing");
}

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
    assert_eq!(q.stats().acked, 500);
    drop(q);
    store.abandon();

    let store = Store::open(dir.path(), cfg).unwrap();
    let q = store.queue("q").unwrap();
    assert_eq!(q.stats().ready, 500, "the acks were lost with the crash");
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

/// A checkpoint covering more log than there is (the log lost durable records) is a typed
/// error in strict mode; in quarantine mode it is removed, so that it can never describe
/// the records written after the reopen.
#[test]
fn a_checkpoint_past_the_log_end_is_never_used() {
    let clock = ManualClock::new(T0);
    let long = tempfile::tempdir().unwrap();
    {
        let store = Store::open(long.path(), config(&clock)).unwrap();
        let q = store.queue("q").unwrap();
        for i in 0..200 {
            q.enqueue(format!("long-{i}")).unwrap();
        }
        store.compact_now().unwrap();
        drop(q);
        store.close().unwrap();
    }
    let short = tempfile::tempdir().unwrap();
    {
        let store = Store::open(short.path(), config(&clock)).unwrap();
        let q = store.queue("q").unwrap();
        for i in 0..3 {
            q.enqueue(format!("short-{i}")).unwrap();
        }
        drop(q);
        store.close().unwrap();
    }
    std::fs::copy(
        long.path().join("checkpoint-0"),
        short.path().join("checkpoint-0"),
    )
    .unwrap();
    match Store::open(short.path(), config(&clock)) {
        Err(Error::Corruption {
            kind: CorruptionKind::BadCheckpoint,
            ..
        }) => {}
        other => panic!("strict open: {other:?}"),
    }
    let mut cfg = config(&clock);
    cfg.recovery = RecoveryMode::Quarantine;
    let store = Store::open(short.path(), cfg).unwrap();
    assert!(!short.path().join("checkpoint-0").exists());
    let q = store.queue("q").unwrap();
    assert_eq!(q.stats().ready, 3);
    for i in 3..300 {
        q.enqueue(format!("short-{i}")).unwrap();
    }
    drop(q);
    store.close().unwrap();
    let store = Store::open(short.path(), config(&clock)).unwrap();
    let q = store.queue("q").unwrap();
    assert_eq!(q.stats().ready, 300);
    assert_eq!(q.lease(1).unwrap()[0].payload(), b"short-0");
}

/// An imported DLQ entry's envelope is its payload record: relocation copies that record
/// once and the entry keeps its payload, failure and metadata, through a checkpoint reopen
/// and a full replay alike.
#[test]
fn a_relocated_imported_entry_keeps_its_envelope() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let store = Store::open(dir.path(), config(&clock)).unwrap();
    let source = store.queue("source").unwrap();
    let target = store.queue("target").unwrap();
    source
        .enqueue("imported payload \u{0}\u{ff} bytes")
        .unwrap();
    let m = source.lease(1).unwrap().remove(0);
    let failure = Failure::permanent("ImportKind", "import me").with_context("k", "v");
    source
        .dead_letter(&m, &FailureReport::new(&failure).worker("w-1"))
        .unwrap();
    let original = source.dlq().get(m.id()).unwrap();
    let id = target.dlq().import(&original).unwrap();
    source.dlq().delete(m.id()).unwrap();
    let expected = target.dlq().get(id).unwrap();
    churn(&store, 400);
    let r = store.compact_now().unwrap();
    assert_eq!(r.records_relocated, 1, "one record, copied once: {r:?}");
    assert_eq!(target.dlq().get(id).unwrap(), expected);
    churn(&store, 400);
    store.compact_now().unwrap();
    assert!(
        store.storage_stats().first_position > 0,
        "the original is gone"
    );
    assert_eq!(target.dlq().get(id).unwrap(), expected);
    drop((source, target));
    store.close().unwrap();
    let store = Store::open(dir.path(), config(&clock)).unwrap();
    let dlq = store.queue("target").unwrap().dlq();
    let got = dlq.get(id).unwrap();
    assert_eq!(got, expected);
    assert_eq!(got.payload, original.payload);
    assert_eq!(got.failure, original.failure);
}

/// A message relocated with a TTL keeps its expiry: through a checkpoint reopen (the
/// original segment deleted) and through a full replay (originals and copies both in the
/// log).
#[test]
fn relocated_messages_keep_their_ttl() {
    for full_replay in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new(T0);
        let store = Store::open(dir.path(), config(&clock)).unwrap();
        let q = store.queue("q").unwrap();
        let filler = store.queue("filler").unwrap();
        let ttl = EnqueueOptions::new().ttl(Duration::from_secs(600));
        let id = q.enqueue_with("short-lived", &ttl).unwrap();
        churn(&store, 400);
        let r = store.compact_now().unwrap();
        assert!(r.records_relocated >= 1, "{r:?}");
        if !full_replay {
            churn(&store, 400);
            store.compact_now().unwrap();
            assert!(store.storage_stats().first_position > 0);
        }
        drop((q, filler));
        store.close().unwrap();
        if full_replay {
            assert_eq!(store_first_segment(dir.path()), 0, "nothing reclaimed yet");
            for slot in ["checkpoint-0", "checkpoint-1"] {
                let _ = std::fs::remove_file(dir.path().join(slot));
            }
        }
        clock.advance(599_000);
        let store = Store::open(dir.path(), config(&clock)).unwrap();
        let q = store.queue("q").unwrap();
        assert_eq!(store.compact_now().unwrap().expired_to_dlq, 0);
        clock.advance(2_000);
        let r = store.compact_now().unwrap();
        assert_eq!(r.expired_to_dlq, 1, "full replay: {full_replay}");
        let entry = q.dlq().get(id).unwrap();
        assert_eq!(entry.failure.error_kind, "expired");
        assert_eq!(entry.payload, b"short-lived");
    }
}

fn store_first_segment(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            deadletter::sim::parse_segment_name(&name)
        })
        .min()
        .unwrap()
}
