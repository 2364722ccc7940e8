//! The conformance suite: the contract of a deadletter backend, written once.
//!
//! Every scenario is a function generic over [`TestBackend`], a small factory a backend
//! implements to hand out queues in a fresh, isolated namespace (a temporary store
//! directory, unique stream names on a server, a schema...). The scenarios use only the
//! backend traits of the `deadletter` crate ([`MessageQueue`], [`DeadLetterQueue`],
//! [`Delivery`], and [`WorkerQueue`] through the [`WorkerPool`]), so a new backend
//! reuses the suite as it is:
//!
//! ```text
//! deadletter_conformance::conformance_tests!(MyBackend::fresh());
//! ```
//!
//! expands to one `#[test]` per scenario, each on a fresh backend, and once more for each
//! scenario of the worker pool (module `through_core`), with the pool's batching left to
//! [`WorkerQueue`]'s defaults built on the core trait ([`ThroughCore`]): so the suite
//! checks both traits, the backend's own batching and the defaults, on every backend.
//!
//! The scenarios run on the real clock with short delays (tens to hundreds of
//! milliseconds), because a remote backend's own timers (redelivery after a negative
//! acknowledgement, lease expiry) follow the real clock. They assert what every backend
//! promises (see `deadletter::MessageQueue`), never a duration an operation must stay
//! under; a time a backend records is checked against the clock readings around the call
//! that recorded it. What a backend may count differently is left out on purpose or
//! asked of the backend: a message waiting out a backoff is `ready` on the embedded store
//! and may be `in_flight` elsewhere, so the suite checks their sum.
//!
//! [`memory`] is a backend of its own, in memory, that implements only the core traits.
//! With the feature `async`, `through_async` drives the embedded store through its async
//! API, so the whole suite runs on it (`tests/embedded_async.rs`).
//!
//! [`MessageQueue`]: deadletter::MessageQueue
//! [`DeadLetterQueue`]: deadletter::DeadLetterQueue
//! [`Delivery`]: deadletter::Delivery
//! [`WorkerQueue`]: deadletter::backend::WorkerQueue
//! [`WorkerPool`]: deadletter::WorkerPool

pub mod delivery;
pub mod dlq;
pub mod memory;
pub mod pool;
pub mod seeds;
mod support;
#[cfg(feature = "async")]
pub mod through_async;

use deadletter::backend::{CoreOnly, WorkerQueue};
use deadletter::queue::QueueOptions;
use deadletter::{MessageQueue, Result};

/// The DLQ handle of a backend's queues.
pub type DlqOf<B> = <<B as TestBackend>::Queue as MessageQueue>::Dlq;

/// A backend under test: hands out queues in its own isolated namespace.
pub trait TestBackend {
    /// The backend's queue handle, with the pool's batching it implements (an empty
    /// `impl WorkerQueue` for one that implements only the core, or its queue wrapped in
    /// [`CoreOnly`]).
    type Queue: WorkerQueue;
    /// Opens queue `name` (created empty on first use) with `options`. Two calls with the
    /// same name give handles on the same queue.
    fn queue(&self, name: &str, options: QueueOptions) -> Result<Self::Queue>;
    /// The DLQ named `name` (such as `"orders-dlq"`), opened by its name as a tool that
    /// knows nothing else would.
    fn dlq(&self, name: &str) -> Result<DlqOf<Self>>;
    /// Lets go of where the queues are kept and takes hold of it again, as a new process
    /// would: the embedded store closes and reopens its directory, a network backend
    /// connects again. The scenario drops every handle it holds first and opens them
    /// again after. A backend whose queues live in the process (the in-memory one) has
    /// nothing to let go of, and its queues stay as they are.
    fn reopen(&self) -> Result<()>;
    /// Whether a lease refuses an outcome reported for an earlier delivery of the same
    /// message (the embedded store does: `Error::InvalidState`). A backend that cannot
    /// tell deliveries apart says false, and the scenario that checks it is skipped.
    fn refuses_stale_outcomes(&self) -> bool {
        true
    }
    /// Whether a replayed message counts again in its queue's `QueueStats::enqueued`
    /// (JetStream's count is its stream's sequence, which a replay's publish moves); by
    /// default it does not, as on the embedded store.
    fn counts_replays_as_enqueued(&self) -> bool {
        false
    }
}

/// A backend whose queues are used through the core trait only: each is wrapped in
/// [`CoreOnly`], so the worker pool runs on [`WorkerQueue`]'s defaults instead of the
/// backend's own batching.
pub struct ThroughCore<B>(pub B);

impl<B: TestBackend> TestBackend for ThroughCore<B> {
    type Queue = CoreOnly<B::Queue>;
    fn queue(&self, name: &str, options: QueueOptions) -> Result<Self::Queue> {
        self.0.queue(name, options).map(CoreOnly)
    }
    fn dlq(&self, name: &str) -> Result<DlqOf<Self>> {
        self.0.dlq(name)
    }
    fn reopen(&self) -> Result<()> {
        self.0.reopen()
    }
    fn refuses_stale_outcomes(&self) -> bool {
        self.0.refuses_stale_outcomes()
    }
    fn counts_replays_as_enqueued(&self) -> bool {
        self.0.counts_replays_as_enqueued()
    }
}

/// A scenario of the suite, by its name (`module::function`, as the test
/// [`conformance_tests!`] generates for it is named), run on a backend.
pub type Scenario<B> = (&'static str, fn(&B));

/// Every scenario but the worker pool's, in the order [`conformance_tests!`] lists them:
/// for a harness that runs the suite its own way (several scenarios on one shared
/// server cluster, a subset in CI). The same list as the macro's, from one place.
pub fn scenarios<B: TestBackend>() -> Vec<Scenario<B>> {
    crate::__core_scenarios!(__scenario_list!(B))
}

/// The worker pool's scenarios (run once more through [`ThroughCore`] by the macro).
pub fn pool_scenarios<B: TestBackend>() -> Vec<Scenario<B>> {
    crate::__pool_scenarios!(__scenario_list!(B))
}

/// Calls `$callback!(args...; module::scenario, ...)` with every scenario but the pool's:
/// the one list both [`conformance_tests!`] and [`scenarios`] expand.
#[doc(hidden)]
#[macro_export]
macro_rules! __core_scenarios {
    ($callback:ident ! ($($args:tt)*)) => {
        $crate::$callback! {$($args)*;
            seeds::orders,
            seeds::newsletter,
            delivery::batches,
            delivery::retry_waits_and_blocks_nothing,
            delivery::lost_lease_comes_back,
            delivery::lost_lease_on_the_last_attempt_goes_to_the_dlq,
            delivery::typed_payloads,
            delivery::delays_and_time_to_live,
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
        }
    };
}

/// Calls `$callback!(args...; module::scenario, ...)` with the worker pool's scenarios.
#[doc(hidden)]
#[macro_export]
macro_rules! __pool_scenarios {
    ($callback:ident ! ($($args:tt)*)) => {
        $crate::$callback! {$($args)*;
            pool::worker_pool,
            pool::pool_policy_and_typed_handlers,
            pool::slow_handlers_keep_their_lease,
            pool::shutdown_gives_back_what_has_not_started,
        }
    };
}

/// The scenarios named as a `Vec<Scenario<$b>>` (see [`scenarios`]).
#[doc(hidden)]
#[macro_export]
macro_rules! __scenario_list {
    ($b:ident; $($module:ident :: $name:ident),* $(,)?) => {
        vec![$((
            concat!(stringify!($module), "::", stringify!($name)),
            $crate::$module::$name::<$b> as fn(&$b),
        )),*]
    };
}

/// Expands to one `#[test]` per scenario, each calling `$make` for a fresh backend, and
/// to a module `through_core` that runs the worker pool's scenarios again on
/// [`ThroughCore`]`($make)`.
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
        $crate::__core_scenarios!(conformance_tests!(@tests $make));
        $crate::__pool_scenarios!(conformance_tests!(@tests $make));

        /// The worker pool's scenarios through [`WorkerQueue`]'s defaults.
        ///
        /// [`WorkerQueue`]: deadletter::backend::WorkerQueue
        mod through_core {
            #[allow(unused_imports)]
            use super::*;

            $crate::__pool_scenarios!(conformance_tests!(@tests $crate::ThroughCore($make)));
        }
    };
}

/// Queue options with `max_attempts` and a lease of `visibility_ms`.
pub fn options(max_attempts: u32, visibility_ms: u64) -> QueueOptions {
    QueueOptions::default()
        .max_attempts(max_attempts)
        .visibility_timeout(std::time::Duration::from_millis(visibility_ms))
}
