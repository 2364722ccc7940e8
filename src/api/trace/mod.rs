//! Tracing: the trace context a message carries ([`TraceParent`], in its `traceparent`
//! attribute) and the spans and events deadletter emits about it with the feature
//! `tracing` (`spans`, whose module documentation lists each name, level and field).
//!
//! Invariant: this module depends on nothing of the API above it (queues, pools, the DLQ
//! call into it with plain values), so any layer can emit its span or event.

pub(crate) mod spans;
mod traceparent;

pub use traceparent::{ParseTraceParentError, TraceParent, TRACEPARENT_ATTRIBUTE};

/// The events of a message's enqueue and replay, for a backend to emit from its own
/// (the embedded store emits them itself; the worker pools emit the handler spans and
/// the failure events for every backend). With the feature `tracing` they are the
/// `deadletter.enqueue` and `deadletter.replay` events the `spans` table lists; without
/// it they do nothing and cost nothing.
pub mod events {
    pub use super::spans::{enqueued, replayed};
}
