//! The configuration these tests share, and the steps that fill, inspect and damage their
//! stores.

use std::path::Path;

use deadletter::clock::ManualClock;
use deadletter::sim::checkpoint_positions;
use deadletter::store::Durability;
use deadletter::{Config, Store};

use crate::common;

/// Small segments (256 KiB, so a few hundred messages fill several), no fsync, the manual
/// clock, compaction only when the test calls it.
pub fn config(clock: &ManualClock) -> Config {
    common::config_at(clock)
        .durability(Durability::Never)
        .segment_size(256 << 10)
        .max_message_size(4 << 10)
}

/// The position each checkpoint slot covers (`None`: missing or damaged).
pub fn slot_positions(dir: &Path) -> [Option<u64>; 2] {
    checkpoint_positions(dir).unwrap()
}

/// Flips the bits of the byte in the middle of the file at `path`.
pub fn damage(path: &Path) {
    let mut bytes = std::fs::read(path).unwrap();
    let n = bytes.len();
    bytes[n / 2] ^= 0xff;
    std::fs::write(path, bytes).unwrap();
}

/// Enqueues `n` messages of about 600 bytes to queue "churn" and acks them: traffic that
/// fills segments and leaves nothing live.
pub fn churn(store: &Store, n: usize) {
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

/// The first position of the oldest segment file in `dir`.
pub fn store_first_segment(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            deadletter::sim::parse_segment_name(&name)
        })
        .min()
        .unwrap()
}
