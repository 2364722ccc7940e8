//! Tracing: the trace context a message carries ([`TraceParent`], in its `traceparent`
//! attribute) and the spans and events deadletter emits about it with the feature
//! `tracing` (`spans`, whose module documentation lists each name, level and field).
//!
//! Invariant: this module depends on nothing of the API above it (queues, pools, the DLQ
//! call into it with plain values), so any layer can emit its span or event.

pub(crate) mod spans;
mod traceparent;

pub use traceparent::{ParseTraceParentError, TraceParent, TRACEPARENT_ATTRIBUTE};
