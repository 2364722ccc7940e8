//! An operation sequence with a crash point, on the simulated disk.
//!
//! The input is a seed, a crash point (the Nth mutating file operation from which every
//! one fails, as if the process died there; or none) and a list of operations (enqueue,
//! batch, lease, ack, retry, dead-letter, replay, delete, compaction, clock jumps). After
//! the crash point fires, or at the end, the power is cut (seeded) and the store reopened.
//! Checks: opening never fails; every message whose enqueue returned `Ok` and that no
//! later operation touched is still in its queue or its DLQ with its exact payload; every
//! payload the store holds is one that was enqueued; opening twice gives the same state.

#![no_main]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use deadletter::clock::ManualClock;
use deadletter::queue::{FailureReport, MessageId, QueueOptions};
use deadletter::sim::Vfs;
use deadletter::sim::inspect::census;
use deadletter::sim::{Fault, FaultyFs, OpKinds, SimDisk, SimRng};
use deadletter::store::{CompactionOptions, Durability};
use deadletter::{Config, Failure, Filter, ReplayOptions, Store};
use libfuzzer_sys::fuzz_target;

const DIR: &str = "/sim/store";

fn config(fs: &FaultyFs, clock: &ManualClock) -> Config {
    Config::default().durability(Durability::Always).segment_size(80 << 10).max_message_size(8 << 10).queue_defaults(QueueOptions::default().max_attempts(2)).compaction(CompactionOptions::default().interval(None).relocate_below(0.9))
    .vfs(Arc::new(fs.clone()))
    .clock(clock.clone())
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 10 {
        return;
    }
    let seed = u64::from_le_bytes(data[0..8].try_into().unwrap());
    let crash_at = data[8];
    let ops = &data[9..];
    let mut rng = SimRng::new(seed);
    let disk = SimDisk::new();
    disk.create_dir_all(Path::new("/sim")).unwrap();
    disk.sync_dir(Path::new("/")).unwrap();
    let fs = FaultyFs::new(Arc::new(disk.clone()), seed);
    let clock = ManualClock::new(1_700_000_000_000);
    // Enqueued with Ok and untouched since: must survive. Every payload ever enqueued.
    let mut untouched: BTreeMap<MessageId, Vec<u8>> = BTreeMap::new();
    let mut all_payloads: Vec<Vec<u8>> = Vec::new();
    {
        let store = Store::open(DIR, config(&fs, &clock)).expect("first open");
        let queues = [store.queue("a").unwrap(), store.queue("b").unwrap()];
        if crash_at != 255 {
            fs.fail_from(crash_at as u64, OpKinds::MUTATING, Fault::Eio);
        }
        for &op in ops.iter().take(200) {
            if fs.injected() > 0 || store.storage_stats().poisoned {
                break; // the process died here
            }
            let q = &queues[(op >> 7) as usize];
            match op & 0x7f {
                0..=29 => {
                    let n = (rng.below(4) * rng.below(2000) + rng.below(100) + 1) as usize;
                    let p = rng.bytes(n);
                    all_payloads.push(p.clone());
                    if let Ok(id) = q.enqueue(&p) {
                        untouched.insert(id, p);
                    }
                }
                30..=39 => {
                    let batch: Vec<Vec<u8>> = (0..rng.range(2, 20))
                        .map(|_| {
                            let n = rng.range(1, 6000) as usize;
                            rng.bytes(n)
                        })
                        .collect();
                    all_payloads.extend(batch.iter().cloned());
                    if let Ok(ids) = q.enqueue_batch(&batch) {
                        untouched.extend(ids.into_iter().zip(batch));
                    }
                }
                40..=69 => {
                    let Ok(msgs) = q.lease(rng.range(1, 4) as usize) else { continue };
                    for m in msgs {
                        untouched.remove(&m.id());
                        let f = Failure::transient("E", "failed");
                        let _ = match rng.below(4) {
                            0 => q.ack(&m),
                            1 => q
                                .retry(&m, &FailureReport::new(&f), 0)
                                .map(|_| ()),
                            2 => q.dead_letter(&m, &FailureReport::new(&f)),
                            _ => q.release(&m, Duration::ZERO),
                        };
                    }
                }
                70..=79 => {
                    let dlq = q.dlq();
                    if rng.chance(0.5) {
                        let _ = dlq.replay(&Filter::all(), &ReplayOptions::to_origin().limit(3));
                    } else if let Ok(ids) = dlq.ids(&Filter::all(), Some(1)) {
                        for id in ids {
                            let _ = dlq.delete(id);
                        }
                    }
                }
                80..=89 => {
                    let _ = store.compact_now();
                }
                _ => clock.advance(rng.below(120_000)),
            }
        }
        // Messages leased-but-not-reported may be dead-lettered at the next lease: that is
        // a place change the checks below allow (queue or DLQ).
    }
    disk.power_cut(rng.next_u64());
    fs.clear();
    let store = Store::open(DIR, config(&fs, &clock)).expect("open after the crash");
    let c = census(&store).expect("a consistent store");
    for (id, p) in &untouched {
        let e = c.get(id).unwrap_or_else(|| panic!("acknowledged message {id} lost"));
        assert_eq!(&e.payload, p, "payload of {id}");
    }
    for (id, e) in &c {
        assert!(all_payloads.contains(&e.payload), "message {id} was never enqueued");
    }
    drop(store);
    let again = Store::open(DIR, config(&fs, &clock)).expect("second open");
    assert_eq!(census(&again).expect("consistent"), c, "opening twice differs");
});
