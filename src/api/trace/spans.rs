//! The spans and events deadletter emits (feature `tracing`), one function per point of a
//! message's life, so each call site is one line and the field names are written once.
//!
//! Without the feature every function here is empty and inlined away: the default build
//! has no `tracing` dependency and no cost. With it, each span and event carries the
//! message's `traceparent` attribute as a field (absent when the message has none), which
//! is what lets a subscriber put a message's enqueue, deliveries, retries, dead letter and
//! replay into one trace.
//!
//! Where they come from: `deadletter.handle`, `deadletter.retry` and
//! `deadletter.dead_letter` from the worker pools (the thread pool on any backend, the
//! async pool) and from [`Queue::retry`](crate::Queue::retry) and
//! [`Queue::dead_letter`](crate::Queue::dead_letter); `deadletter.enqueue` and
//! `deadletter.replay` from the embedded store's queues and DLQs, and from another
//! backend's own enqueues and replays through [`crate::trace::events`] (the JetStream
//! backend's, with its feature `tracing`).
//!
//! | name | kind, level | fields |
//! |---|---|---|
//! | `deadletter.enqueue` | event, DEBUG | `queue`, `message_id` (the first), `count`, `traceparent` |
//! | `deadletter.handle` | span, INFO, around one handler call | `queue`, `message_id`, `attempt`, `traceparent`, `outcome` (`ok`, `retry`, `dead_letter`) |
//! | `deadletter.retry` | event, INFO | `queue`, `message_id`, `attempt`, `error_kind`, `retry_at_ms`, `traceparent` |
//! | `deadletter.dead_letter` | event, WARN | `queue`, `message_id`, `attempt`, `error_kind`, `traceparent` |
//! | `deadletter.replay` | event, INFO | `dlq`, `queue` (where it went), `message_id`, `traceparent` |

use std::collections::BTreeMap;

#[cfg(feature = "tracing")]
use super::traceparent::TRACEPARENT_ATTRIBUTE;

#[cfg(feature = "tracing")]
fn traceparent(attributes: &BTreeMap<String, String>) -> Option<&str> {
    attributes.get(TRACEPARENT_ATTRIBUTE).map(String::as_str)
}

/// The span of one handler call (`deadletter.handle`); nothing without the feature.
#[derive(Clone)]
pub(crate) struct HandlerSpan {
    #[cfg(feature = "tracing")]
    span: tracing::Span,
}

impl HandlerSpan {
    /// The span of delivery `attempt` of message `id` of `queue`.
    #[inline]
    pub(crate) fn new(
        queue: &str,
        id: u64,
        attempt: u32,
        attributes: &BTreeMap<String, String>,
    ) -> Self {
        #[cfg(feature = "tracing")]
        {
            let span = tracing::info_span!(
                target: "deadletter",
                "deadletter.handle",
                queue,
                message_id = id,
                attempt,
                traceparent = traceparent(attributes),
                outcome = tracing::field::Empty,
            );
            HandlerSpan { span }
        }
        #[cfg(not(feature = "tracing"))]
        {
            let _ = (queue, id, attempt, attributes);
            HandlerSpan {}
        }
    }

    /// Runs `f` inside the span.
    #[inline]
    pub(crate) fn in_scope<R>(&self, f: impl FnOnce() -> R) -> R {
        #[cfg(feature = "tracing")]
        {
            self.span.in_scope(f)
        }
        #[cfg(not(feature = "tracing"))]
        {
            f()
        }
    }

    /// Records how the call ended: `ok`, `retry` or `dead_letter`.
    #[inline]
    pub(crate) fn outcome(&self, outcome: &'static str) {
        #[cfg(feature = "tracing")]
        self.span.record("outcome", outcome);
        #[cfg(not(feature = "tracing"))]
        let _ = outcome;
    }

    /// `future`, run inside the span at each poll (the async pool's handlers).
    #[cfg(feature = "async")]
    pub(crate) fn instrument<F: std::future::Future>(
        &self,
        future: F,
    ) -> impl std::future::Future<Output = F::Output> {
        #[cfg(feature = "tracing")]
        {
            tracing::Instrument::instrument(future, self.span.clone())
        }
        #[cfg(not(feature = "tracing"))]
        {
            future
        }
    }
}

/// Messages `ids` were enqueued to `queue` with `attributes` (`deadletter.enqueue`);
/// nothing without the feature `tracing`.
#[inline]
pub fn enqueued(queue: &str, ids: &[u64], attributes: &BTreeMap<String, String>) {
    #[cfg(feature = "tracing")]
    tracing::debug!(
        name: "deadletter.enqueue",
        target: "deadletter",
        queue,
        message_id = ids.first().copied(),
        count = ids.len(),
        traceparent = traceparent(attributes),
        "enqueued",
    );
    #[cfg(not(feature = "tracing"))]
    let _ = (queue, ids, attributes);
}

/// Delivery `attempt` of message `id` failed with `error_kind`: retried at `retry_at_ms`
/// (`deadletter.retry`), or, with `None`, moved to the DLQ (`deadletter.dead_letter`).
#[inline]
pub(crate) fn failed(
    queue: &str,
    id: u64,
    attempt: u32,
    error_kind: &str,
    retry_at_ms: Option<u64>,
    attributes: &BTreeMap<String, String>,
) {
    #[cfg(feature = "tracing")]
    match retry_at_ms {
        Some(retry_at_ms) => tracing::info!(
            name: "deadletter.retry",
            target: "deadletter",
            queue,
            message_id = id,
            attempt,
            error_kind,
            retry_at_ms,
            traceparent = traceparent(attributes),
        "delivery failed, retry scheduled",
        ),
        None => tracing::warn!(
            name: "deadletter.dead_letter",
            target: "deadletter",
            queue,
            message_id = id,
            attempt,
            error_kind,
            traceparent = traceparent(attributes),
        "delivery failed, moved to the DLQ",
        ),
    }
    #[cfg(not(feature = "tracing"))]
    let _ = (queue, id, attempt, error_kind, retry_at_ms, attributes);
}

/// True when a subscriber takes `deadletter.replay` events: a replay reads each entry's
/// attributes for them only then (it does not need them otherwise).
#[inline]
pub(crate) fn replays_traced() -> bool {
    #[cfg(feature = "tracing")]
    {
        tracing::enabled!(target: "deadletter", tracing::Level::INFO)
    }
    #[cfg(not(feature = "tracing"))]
    {
        false
    }
}

/// DLQ entry `id` of `dlq`, with `attributes`, was replayed into `queue`
/// (`deadletter.replay`); nothing without the feature `tracing`.
#[inline]
pub fn replayed(dlq: &str, queue: &str, id: u64, attributes: &BTreeMap<String, String>) {
    #[cfg(feature = "tracing")]
    tracing::info!(
        name: "deadletter.replay",
        target: "deadletter",
        dlq,
        queue,
        message_id = id,
        traceparent = traceparent(attributes),
        "replayed from the DLQ",
    );
    #[cfg(not(feature = "tracing"))]
    let _ = (dlq, queue, id, attributes);
}
