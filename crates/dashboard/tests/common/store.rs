//! The store the dashboard tests serve: small segments (1 MiB, so a test writes little to
//! disk) and a manual clock, so ages and hourly buckets are exact.

use std::path::Path;

use deadletter::clock::ManualClock;
use deadletter::{Config, Store};

/// Opens a store in `dir` whose clock starts at `t0` (ms since the epoch) and moves only
/// when the test advances it.
pub fn small_store(dir: &Path, t0: u64) -> (Store, ManualClock) {
    let clock = ManualClock::new(t0);
    let config = Config::default()
        .segment_size(1 << 20)
        .max_message_size(256 << 10)
        .clock(clock.clone());
    (Store::open(dir, config).unwrap(), clock)
}
