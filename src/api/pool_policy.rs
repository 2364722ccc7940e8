//! The policy both worker pools share, the thread pool (`worker`) and the async pool
//! (`asynchronous::pool`), so both classify, back off, lease and dead-letter alike: their
//! settings ([`PoolSettings`], with the setters `pool_setters!` gives both builders) and
//! what they do with a failed delivery ([`on_failure`]).
//!
//! Invariants:
//! - a failure the handler classed itself keeps its class; a converted one is classed by
//!   the pool's [`Classifier`];
//! - a permanent failure dead-letters at once; a transient one is retried after the
//!   [`Retry`] policy's delay for that attempt (the backend moves it to the DLQ instead on
//!   the last attempt, from its own attempt count);
//! - a panic is a transient failure of kind `Panic` with the panic's message.

use std::any::Any;
use std::time::Duration;

use crate::api::backend::Delivery;
use crate::api::classify::Classifier;
use crate::api::core::types::Failure;
use crate::api::retry::Retry;
use crate::api::trace::spans;
use crate::rng::SplitMix64;

/// The settings of a pool both kinds share.
#[derive(Debug, Clone)]
pub(crate) struct PoolSettings {
    /// The retry policy (its `max_attempts` becomes the queue's).
    pub(crate) retry: Retry,
    /// Lease length, extended for handlers that run longer.
    pub(crate) lease: Duration,
    /// Prefix of worker names (recorded with failures).
    pub(crate) name: String,
    /// True when the builder was given the name (the pool is then listed under it).
    pub(crate) named: bool,
    /// How long an idle worker waits for work before it looks again.
    pub(crate) idle_poll: Duration,
    /// How converted failures are classified.
    pub(crate) classifier: Classifier,
}

impl PoolSettings {
    /// The defaults: the default [`Retry`], a 30 s lease, workers named `name-{index}`.
    pub(crate) fn new(name: &str) -> Self {
        PoolSettings {
            retry: Retry::default(),
            lease: Duration::from_secs(30),
            name: name.into(),
            named: false,
            idle_poll: Duration::from_millis(200),
            classifier: Classifier::new(),
        }
    }

    /// The pool's name among the attached pools: the one its builder was given, if any.
    pub(crate) fn given_name(&self) -> Option<String> {
        self.named.then(|| self.name.clone())
    }
}

/// The setters of [`PoolSettings`] in a pool builder whose field `settings` holds them.
macro_rules! pool_setters {
    () => {
        setters! {
            /// How failures converted from errors with `?` are classified (see
            /// [`Classifier`](crate::pool::Classifier)): by default every such failure is
            /// transient except a payload that does not decode.
            classify(classifier: crate::pool::Classifier) => settings.classifier = classifier;
            /// The retry policy (its `max_attempts` becomes the queue's).
            retry(retry: crate::pool::Retry) => settings.retry = retry;
            /// Lease length; handlers running longer get it extended.
            lease(lease: std::time::Duration) =>
                settings.lease = lease.max(std::time::Duration::from_millis(10));
            /// Prefix of worker names (recorded with failures): `{name}-{index}`; also
            /// the pool's name among the store's attached pools
            /// ([`Store::attached_pools`](crate::Store::attached_pools)).
            name(name: impl Into<String>) =>
                settings.name = name.into(), settings.named = true;
        }
    };
}
pub(crate) use pool_setters;

/// What to report for a failed delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    /// Move it to the DLQ now.
    DeadLetter,
    /// Retry it: visible again at this time (ms on the queue's clock).
    RetryAt(u64),
}

/// The handler's failure as the pool reports it, classed by `classifier`, and what to do
/// with it: the delivery was attempt `attempt`, the queue's clock reads `now_ms`, and
/// `rng` draws the retry's jitter.
pub(crate) fn on_failure(
    classifier: &Classifier,
    retry: &Retry,
    failure: Failure,
    attempt: u32,
    now_ms: u64,
    rng: &mut SplitMix64,
) -> (Failure, Action) {
    let failure = classifier.apply(failure);
    if failure.is_permanent() {
        return (failure, Action::DeadLetter);
    }
    let delay = retry.delay_with(attempt, || rng.next_u64());
    (failure, Action::RetryAt(now_ms + delay.as_millis() as u64))
}

/// The failure a handler's panic counts as.
pub(crate) fn panic_failure(panic: &(dyn Any + Send)) -> Failure {
    let text = panic.downcast_ref::<&str>().copied();
    let message = match text.or_else(|| panic.downcast_ref::<String>().map(String::as_str)) {
        Some(s) => format!("handler panicked: {s}"),
        None => "handler panicked".to_string(),
    };
    Failure::transient("Panic", message)
}

/// The trace event of a pool's failed delivery of `msg` (feature `tracing`): retried at
/// `retry_at`, or, with `None`, dead-lettered.
pub(crate) fn trace_failure<M: Delivery>(msg: &M, error_kind: &str, retry_at: Option<u64>) {
    let (queue, attributes) = (msg.queue(), msg.attributes());
    spans::failed(
        queue,
        msg.id(),
        msg.attempt(),
        error_kind,
        retry_at,
        attributes,
    );
}
