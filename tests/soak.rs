//! Soak: a steady stream of enqueue and ack, one message in ten dead-lettered, a short DLQ
//! retention, small segments and periodic compaction. Disk use must track the live data,
//! not the history.
//!
//! Bounded by default (`DEFAULT_MESSAGES`); `DEADLETTER_SOAK_MESSAGES=1000000` runs the long
//! mode (`cargo test --release --test soak -- --nocapture`).
//!
//! # The bound asserted
//!
//! `disk <= LIVE_MULTIPLE * live + ALLOWANCE` with `LIVE_MULTIPLE = 5` and `ALLOWANCE` = 4
//! segments of 1 MiB, checked just before every compaction run (the high point of the
//! saw-tooth). `live` is the payload bytes of the messages in the queue and in its DLQ;
//! `disk` is the sum of the sizes of every file in the store directory. Why these numbers
//! (see `src/compaction.rs`):
//! - after a run, the sealed segments that remain are at least `relocate_below` (0.5) live,
//!   taken together: the oldest prefix of segments whose live fraction is under it is
//!   relocated and deleted, so every remaining prefix, the whole included, is at least half
//!   live. Sealed segments therefore take at most `2 x` the live *record* bytes;
//! - a live message costs more record bytes than its payload: its payload record (frame
//!   header and metadata, about 50 bytes), and for a DLQ entry also its envelope (the
//!   dead-letter record: failure, one attempt, DLQ metadata, about 160 bytes). With payloads
//!   of 100 to 400 bytes (mean 250) a DLQ entry needs about `1.85 x` its payload, a waiting
//!   message about `1.2 x`: at most `2 x`, so `2 x 2 = 4`;
//! - the two checkpoint slots hold about 80 bytes per DLQ entry each, about `0.6 x` the
//!   payload of the DLQ here, and the checkpoint reserve kept for a full disk
//!   (`checkpoint.tmp`, twice the last checkpoint: see `docs/RELIABILITY.md`, *A full
//!   disk*) as much again, `1.2 x` in all: with a DLQ entry's `1.85 x` rather than the
//!   rounded `2 x` above, `2 x 1.85 + 1.2 = 4.9`, so `LIVE_MULTIPLE = 5`;
//! - `ALLOWANCE`: the active segment (preallocated, so 1 MiB on disk from the start), the
//!   traffic written since the last run (the test compacts every 2,000 messages, about
//!   0.7 MiB: one segment), and the segments relocated by a run that wait for the *older*
//!   checkpoint to pass them before they are deleted (one run of lag: two segments);
//! - the audit trail's tombstones (evidence of the entries retention evicted) are capped
//!   at `TOMBSTONES` here: the default cap, 100,000, would grow the checkpoints (and their
//!   reserve) past every live-data bound on a store this small.
//!
//! Before the prefix rule (each segment judged alone, stopping at the first dense one) this
//! test failed at 52,000 messages with 13.3 MB on disk for 1.8 MB live, and the saw-tooth
//! grew with the retention: the relocated DLQ entries formed a dense segment at the front
//! that pinned every dead segment behind it until half of them expired.

mod common;

use std::collections::VecDeque;
use std::path::Path;
use std::time::{Duration, Instant};

use common::{disk_bytes, T0};
use deadletter::audit::AuditLimits;
use deadletter::clock::{Clock, ManualClock};
use deadletter::queue::FailureReport;
use deadletter::store::Durability;
use deadletter::{Config, Failure, Page, Store};

const DEFAULT_MESSAGES: u64 = 200_000;
const SEGMENT: u64 = 1 << 20;
/// Messages enqueued (and consumed) per step.
const STEP: u64 = 100;
/// Simulated time per step: 100 messages per 100 ms, 1,000 messages per second.
const STEP_MS: u64 = 100;
/// DLQ retention (simulated): 30 s, so about 3,000 DLQ entries in steady state.
const RETENTION_MS: u64 = 100_000;
/// Messages waiting in the queue at any time.
const BACKLOG: u64 = 2_000;
/// Steps between compaction runs (2,000 messages, about 0.6 MiB of records).
const COMPACT_EVERY: u64 = 20;
const SAMPLES: u64 = 20;
const LIVE_MULTIPLE: u64 = 5;
const ALLOWANCE: u64 = 4 * SEGMENT;
/// Tombstones kept (the audit trail's evidence of evicted entries; the default keeps
/// 100,000, which would dominate a store this small).
const TOMBSTONES: usize = 1_000;

/// The payload of message number `seq`: 100 to 400 bytes, derived from `seq` alone.
fn payload(seq: u64) -> Vec<u8> {
    let mut x = seq.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    let len = 100 + (x % 301) as usize;
    let mut out = format!("m{seq}:").into_bytes();
    while out.len() < len {
        out.push(b'a' + ((seq as usize + out.len()) % 26) as u8);
    }
    out.truncate(len);
    out
}

fn seq_of(payload: &[u8]) -> u64 {
    let text = std::str::from_utf8(payload).expect("utf-8 payload");
    let end = text.find(':').expect("seq prefix");
    text[1..end].parse().expect("seq")
}

/// The checkpoint slots and the reserve kept for the next checkpoint.
fn checkpoint_bytes(dir: &Path) -> u64 {
    ["checkpoint-0", "checkpoint-1", "checkpoint.tmp"]
        .iter()
        .filter_map(|n| std::fs::metadata(dir.join(n)).ok())
        .map(|m| m.len())
        .sum()
}

fn config(clock: &ManualClock) -> Config {
    common::config_at(clock)
        .durability(Durability::Never)
        .segment_size(SEGMENT)
        .max_message_size(4 << 10)
        .retention(Some(Duration::from_millis(RETENTION_MS)))
        .audit_limits(AuditLimits {
            tombstones: TOMBSTONES,
            ..AuditLimits::default()
        })
}

struct Sample {
    messages: u64,
    disk: u64,
    live: u64,
    dlq: u64,
    segments: usize,
}

#[test]
fn disk_use_stays_bounded_under_a_steady_load() {
    let total: u64 = common::env_number("DEADLETTER_SOAK_MESSAGES", DEFAULT_MESSAGES);
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let store = Store::open(dir.path(), config(&clock)).unwrap();
    let q = store.queue("soak").unwrap();
    let dlq = q.dlq();

    // The backlog: (seq, payload length) of the messages waiting, oldest first.
    let mut waiting: VecDeque<(u64, u64)> = VecDeque::new();
    let mut waiting_bytes = 0u64;
    let mut next_seq = 0u64;
    let mut enqueue = |n: u64, waiting: &mut VecDeque<(u64, u64)>, waiting_bytes: &mut u64| {
        let batch: Vec<Vec<u8>> = (next_seq..next_seq + n).map(payload).collect();
        q.enqueue_batch(&batch).unwrap();
        for (i, p) in batch.iter().enumerate() {
            waiting.push_back((next_seq + i as u64, p.len() as u64));
            *waiting_bytes += p.len() as u64;
        }
        next_seq += n;
    };
    enqueue(BACKLOG, &mut waiting, &mut waiting_bytes);

    let steps = total.div_ceil(STEP);
    let sample_every = (steps / COMPACT_EVERY / SAMPLES).max(1) * COMPACT_EVERY;
    let failure = Failure::permanent("SoakError", "one in ten fails");
    // The DLQ as the test expects it: (dead-lettered at, payload length), oldest first.
    let mut dead: VecDeque<(u64, u64)> = VecDeque::new();
    let mut dead_bytes = 0u64;
    let mut samples: Vec<Sample> = Vec::new();
    let mut worst_ratio = 0f64;
    let mut worst = (0, 0, 0, 0, 0);
    // The worst ratio once the DLQ is full (a retention period in).
    let mut steady_worst = 0f64;
    let mut relocated = 0u64;
    let mut dead_lettered = 0u64;
    for step in 1..=steps {
        enqueue(STEP, &mut waiting, &mut waiting_bytes);
        let leased = q.lease(STEP as usize).unwrap();
        assert_eq!(leased.len() as u64, STEP);
        let mut acks = Vec::with_capacity(leased.len());
        for m in leased {
            let (seq, len) = waiting.pop_front().unwrap();
            assert_eq!(seq_of(m.payload()), seq, "FIFO order");
            waiting_bytes -= len;
            if seq % 10 == 3 {
                q.dead_letter(&m, &FailureReport::new(&failure)).unwrap();
                dead.push_back((clock.now_ms(), len));
                dead_bytes += len;
                dead_lettered += 1;
            } else {
                acks.push(m);
            }
        }
        q.ack_all(&acks).unwrap();
        clock.advance(STEP_MS);
        if step % COMPACT_EVERY == 0 {
            let disk = disk_bytes(dir.path());
            let sampling = step % sample_every == 0 || step + COMPACT_EVERY > steps;
            let live = waiting_bytes + dead_bytes;
            let bound = LIVE_MULTIPLE * live + ALLOWANCE;
            if step * STEP_MS > RETENTION_MS {
                steady_worst = steady_worst.max(disk as f64 / live.max(1) as f64);
            }
            if disk as f64 / live.max(1) as f64 > worst_ratio {
                worst_ratio = disk as f64 / live.max(1) as f64;
                worst = (
                    step * STEP,
                    disk,
                    live,
                    checkpoint_bytes(dir.path()),
                    store.storage_stats().segments.len(),
                );
            }
            assert!(
                disk <= bound,
                "step {step}: disk {disk} B over the bound {bound} B (live {live} B, {} segments)",
                store.storage_stats().segments.len()
            );
            if sampling {
                // The DLQ holds exactly what the test expects (read back in full).
                let read: u64 = read_all(&dlq).iter().map(|p| p.len() as u64).sum();
                assert_eq!((dlq.len(), read), (dead.len() as u64, dead_bytes));
                samples.push(Sample {
                    messages: step * STEP,
                    disk,
                    live,
                    dlq: dlq.len(),
                    segments: store.storage_stats().segments.len(),
                });
            }
            let report = store.compact_now().unwrap();
            relocated += report.records_relocated;
            // Retention removes what was dead-lettered `RETENTION_MS` ago or earlier.
            let now = clock.now_ms();
            let mut removed = 0;
            while dead
                .front()
                .is_some_and(|&(at, _)| at + RETENTION_MS <= now)
            {
                dead_bytes -= dead.pop_front().unwrap().1;
                removed += 1;
            }
            assert_eq!(report.retention_removed, removed);
        }
    }

    println!(
        "soak: {} messages ({} dead-lettered), {} records relocated, {:.1?}",
        steps * STEP,
        dead_lettered,
        relocated,
        started.elapsed()
    );
    println!(
        "bound: disk <= {LIVE_MULTIPLE} x live payload + {} MiB; worst disk/live {:.2}, {:.2} once the DLQ is full",
        ALLOWANCE >> 20,
        worst_ratio,
        steady_worst
    );
    println!(
        "worst at {} messages: disk {} KiB = {} segments + {} KiB of checkpoints and reserve; live {} KiB",
        worst.0,
        worst.1 >> 10,
        worst.4,
        worst.3 >> 10,
        worst.2 >> 10
    );
    println!(
        "{:>10} {:>10} {:>10} {:>7} {:>6} {:>6}",
        "messages", "disk KiB", "live KiB", "ratio", "dlq", "segs"
    );
    for s in &samples {
        println!(
            "{:>10} {:>10} {:>10} {:>7.2} {:>6} {:>6}",
            s.messages,
            s.disk >> 10,
            s.live >> 10,
            s.disk as f64 / s.live.max(1) as f64,
            s.dlq,
            s.segments
        );
    }

    // Steady state: the DLQ holds about the retention's worth of failures, not the history.
    let expected_dlq = RETENTION_MS / STEP_MS * STEP / 10;
    assert!(dlq.len() <= expected_dlq + COMPACT_EVERY * STEP / 10 + STEP);
    assert!(dlq.stats().expired > 0 || steps * STEP_MS < RETENTION_MS);

    // Everything still there is intact after a reopen.
    let kept_waiting: Vec<u64> = waiting.iter().map(|&(s, _)| s).collect();
    let dlq_before = dlq.len();
    let stats_before = q.stats();
    drop((q, dlq));
    store.close().unwrap();
    let store = Store::open(dir.path(), config(&clock)).unwrap();
    let q = store.queue("soak").unwrap();
    let after = q.stats();
    assert_eq!(after.counts.ready, stats_before.counts.ready);
    assert_eq!(after.counts.acked, stats_before.counts.acked);
    assert_eq!(
        after.counts.dead_lettered,
        stats_before.counts.dead_lettered
    );
    let got: Vec<u64> = q
        .lease(kept_waiting.len() + 1)
        .unwrap()
        .iter()
        .map(|m| {
            let seq = seq_of(m.payload());
            assert_eq!(m.payload(), payload(seq).as_slice());
            seq
        })
        .collect();
    assert_eq!(got, kept_waiting);
    let dlq = q.dlq();
    assert_eq!(dlq.len(), dlq_before);
    for p in read_all(&dlq) {
        let seq = seq_of(&p);
        assert_eq!(seq % 10, 3);
        assert_eq!(p, payload(seq));
    }
    for e in dlq.peek(50).unwrap() {
        assert_eq!(e.failure.error_kind, "SoakError");
        assert_eq!(e.failure.attempts.len(), 1);
    }
}

fn read_all(dlq: &deadletter::Dlq) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut page = Page::first(1000);
    loop {
        let entries = dlq.list(&deadletter::Filter::all(), page).unwrap();
        let Some(last) = entries.last() else {
            return out;
        };
        page = Page::after(last.id(), 1000);
        out.extend(entries.into_iter().map(|e| e.payload));
    }
}
