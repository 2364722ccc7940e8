//! The conformance suite: the contract of a deadletter backend, written once.
//!
//! Every scenario is a function generic over [`TestBackend`], a small factory a backend
//! implements to hand out queues in a fresh, isolated namespace (a temporary store
//! directory, unique stream names on a server, a schema...). The scenarios use only the
//! backend traits of the `deadletter` crate ([`MessageQueue`], [`DeadLetterQueue`],
//! [`Delivery`]) and the [`WorkerPool`], so a new backend reuses the suite as it is:
//!
//! ```text
//! deadletter_conformance::conformance_tests!(MyBackend::fresh());
//! ```
//!
//! expands to one `#[test]` per scenario, each on a fresh backend.
//!
//! The scenarios run on the real clock with short delays (tens to hundreds of
//! milliseconds), because a remote backend's own timers (redelivery after a negative
//! acknowledgement, lease expiry) follow the real clock. They assert what every backend
//! promises (see `deadletter::MessageQueue`), never a duration an operation must stay
//! under. What a backend may count differently is left out on purpose: a message waiting
//! out a backoff is `ready` on the embedded store and may be `in_flight` elsewhere, so
//! the suite checks their sum.
//!
//! [`MessageQueue`]: deadletter::MessageQueue
//! [`DeadLetterQueue`]: deadletter::DeadLetterQueue
//! [`Delivery`]: deadletter::Delivery
//! [`WorkerPool`]: deadletter::WorkerPool

pub mod delivery;
pub mod dlq;
pub mod seeds;
mod support;

use deadletter::{QueueOptions, Result, WorkerQueue};

/// A backend under test: hands out queues in its own isolated namespace.
pub trait TestBackend {
    /// The backend's queue handle, with the worker pool's batching it implements (an
    /// empty `impl WorkerQueue` for a backend that keeps the defaults).
    type Queue: WorkerQueue;
    /// Opens queue `name` (created empty on first use) with `options`. Two calls with the
    /// same name give handles on the same queue.
    fn queue(&self, name: &str, options: QueueOptions) -> Result<Self::Queue>;
    /// Whether a lease refuses an outcome reported for an earlier delivery of the same
    /// message (the embedded store does: `Error::InvalidState`). A backend that cannot
    /// tell deliveries apart says false, and the scenario that checks it is skipped.
    fn refuses_stale_outcomes(&self) -> bool {
        true
    }
}

/// Expands to one `#[test]` per scenario, each calling `$make` for a fresh backend.
#[macro_export]
macro_rules! conformance_tests {
    (@tests $make:expr; $($module:ident :: $name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                let backend = $make;
                $crate::$module::$name(&backend);
            }
        )*
    };
    ($make:expr) => {
        $crate::conformance_tests!(@tests $make;
            seeds::orders,
            seeds::newsletter,
            delivery::batches,
            delivery::retry_waits_and_blocks_nothing,
            delivery::lost_lease_comes_back,
            delivery::lost_lease_on_the_last_attempt_goes_to_the_dlq,
            delivery::typed_payloads,
            delivery::delays_and_time_to_live,
            delivery::worker_pool,
            dlq::envelope_keeps_everything,
            dlq::browse_has_no_side_effects,
            dlq::filters_and_pages,
            dlq::replay_rules,
            dlq::replay_to_another_queue,
            dlq::corrected_replay_keeps_the_old_payload,
            dlq::stats_and_counters,
            dlq::delete_and_purge,
            dlq::analyze_groups_patterns,
            dlq::alerts_fire_both_ways,
        );
    };
}

/// Queue options with `max_attempts` and a lease of `visibility_ms`.
pub fn options(max_attempts: u32, visibility_ms: u64) -> QueueOptions {
    QueueOptions::default()
        .max_attempts(max_attempts)
        .visibility_timeout(std::time::Duration::from_millis(visibility_ms))
}
