//! Helpers the scenarios share: leasing with a deadline, failing a delivery, waiting for
//! something to happen, and counts that do not move with the clock.

use std::time::{Duration, Instant};

use deadletter::dlq::DlqStats;
use deadletter::queue::{FailureOutcome, FailureReport};
use deadletter::{Delivery, Failure, MessageQueue};

/// How long a scenario waits for something that must happen (a redelivery after its
/// backoff, a message to arrive). Generous: the machine may be busy; waiting that long
/// only happens when the backend is broken.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// Leases until `n` messages are in hand or [`PATIENCE`] runs out; panics then.
pub fn lease_n<Q: MessageQueue>(queue: &Q, n: usize) -> Vec<Q::Message> {
    let give_up = Instant::now() + PATIENCE;
    let mut got = Vec::new();
    while got.len() < n {
        let left = give_up.saturating_duration_since(Instant::now());
        assert!(
            !left.is_zero(),
            "only {} of {n} messages arrived on {}",
            got.len(),
            queue.name()
        );
        let more = queue
            .lease_wait(n - got.len(), left.min(Duration::from_secs(1)))
            .expect("lease");
        got.extend(more);
    }
    got
}

/// Leases exactly one message, waiting for it.
pub fn lease_one<Q: MessageQueue>(queue: &Q) -> Q::Message {
    lease_n(queue, 1).remove(0)
}

/// Asserts that nothing is leased within `wait` (the queue holds nothing visible).
pub fn assert_nothing_visible<Q: MessageQueue>(queue: &Q, wait: Duration) {
    let got = queue.lease_wait(10, wait).expect("lease");
    assert!(
        got.is_empty(),
        "{} delivered {:?} when nothing should be visible",
        queue.name(),
        got.iter()
            .map(|m| m.text().map(str::to_string))
            .collect::<Vec<_>>()
    );
}

/// Reports `failure` for `msg` from worker `worker`, to be retried after `backoff`.
pub fn fail<Q: MessageQueue>(
    queue: &Q,
    msg: &Q::Message,
    failure: &Failure,
    worker: &str,
    backoff: Duration,
) -> FailureOutcome {
    let report = FailureReport::new(failure)
        .worker(worker)
        .duration(Duration::from_millis(5));
    let at = queue.now_ms() + backoff.as_millis() as u64;
    queue.retry(msg, &report, at).expect("retry")
}

/// Waits until `cond` holds, checking every 20 ms, for up to [`PATIENCE`]; panics with
/// `what` otherwise.
pub fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let give_up = Instant::now() + PATIENCE;
    while !cond() {
        assert!(Instant::now() < give_up, "never happened: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Queue size as every backend counts it: waiting (now or later) plus leased.
pub fn held<Q: MessageQueue>(queue: &Q) -> u64 {
    let s = queue.stats().expect("stats");
    s.counts.ready + s.counts.in_flight
}

/// DLQ stats without the ages, which move with the clock.
pub fn counts(mut s: DlqStats) -> DlqStats {
    s.oldest_age_ms = None;
    s.newest_age_ms = None;
    s
}
