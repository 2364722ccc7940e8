//! The configuration and the steps these tests share.

use std::time::Duration;

use deadletter::clock::ManualClock;
use deadletter::queue::{FailureReport, QueueOptions};
use deadletter::store::Durability;
use deadletter::{Config, Failure, Queue};

use crate::common;

/// The tests' configuration: durable, segments not preallocated (small files), the manual
/// clock, compaction only when called.
pub fn config(clock: &ManualClock) -> Config {
    common::config_at(clock).preallocate(false)
}

/// [`config`] without fsync, for tests that do not reopen after a crash.
pub fn fast(clock: &ManualClock) -> Config {
    config(clock).durability(Durability::Never)
}

/// `max_attempts` deliveries, leases of one second.
pub fn options(max_attempts: u32) -> QueueOptions {
    QueueOptions::default()
        .max_attempts(max_attempts)
        .visibility_timeout(Duration::from_secs(1))
}

/// Leases one message and dead-letters it with `kind`.
pub fn fail_one(q: &Queue, kind: &str) -> u64 {
    let m = q.lease(1).unwrap().remove(0);
    let f = Failure::permanent(kind, "broken");
    q.dead_letter(&m, &FailureReport::new(&f)).unwrap();
    m.id()
}
