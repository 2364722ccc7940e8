//! Compaction: disk reclaim with relocation and checkpoints, TTL expiry in both modes,
//! DLQ retention, clock jumps, and fast reopen from a checkpoint.

use std::time::Duration;

use deadletter::{
    CompactionOptions, Config, Durability, EnqueueOptions, Failure, FailureReport, ManualClock,
    QueueOptions, Store,
};

const T0: u64 = 1_700_000_000_000;

fn config(clock: &ManualClock) -> Config {
    Config {
        durability: Durability::Never,
        segment_size: 256 << 10,
        max_message_size: 4 << 10,
        compaction: CompactionOptions {
            interval: None,
            ..CompactionOptions::default()
        },
        ..Config::default()
    }
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
            .enqueue_batch(&(0..200).map(|i| format!("r{round}-m{i}-{}", "x".repeat(100))).collect::<Vec<_>>())
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
    let before = store.log().segments().len();
    let report = store.compact_now().unwrap();
    let after = store.log().segments().len();
    assert!(after < 10, "segments left: {after} (before {before}), {report:?}");
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
        .queue_with(
            "dropped",
            QueueOptions {
                expired_to_dlq: false,
                ..QueueOptions::default()
            },
        )
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
    assert_eq!(r.expired_to_dlq, 1, "only the 60 s message is due within the first hour");
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
    assert_eq!(store.queue("q").unwrap().stats().in_flight + store.queue("q").unwrap().stats().ready, 510);
}
