//! What a worker pool does with a failed delivery: the one policy the thread pool
//! (`worker`) and the async pool (`asynchronous::pool`) share, so both classify, back off
//! and dead-letter alike.
//!
//! Invariants:
//! - a failure the handler classed itself keeps its class; a converted one is classed by
//!   the pool's [`Classifier`];
//! - a permanent failure dead-letters at once; a transient one is retried after the
//!   [`Retry`] policy's delay for that attempt (the backend moves it to the DLQ instead on
//!   the last attempt, from its own attempt count);
//! - a panic is a transient failure of kind `Panic` with the panic's message.

use std::any::Any;

use crate::api::classify::Classifier;
use crate::api::core::types::Failure;
use crate::api::retry::Retry;
use crate::rng::SplitMix64;

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
