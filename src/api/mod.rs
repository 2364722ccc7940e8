//! The API layer: the store, queues, DLQs, the worker pool and their options and reports.

pub mod clock;
pub mod dlq;
pub mod metrics;
pub mod queue;
pub mod retry;
pub mod store;
pub mod types;
pub mod verify;
pub mod worker;
