//! The API layer: the store, queues, DLQs, the worker pool and their options and reports.

pub mod alert;
pub mod clock;
pub mod config;
pub mod dlq;
mod expiry;
pub mod metrics;
pub mod queue;
pub mod retry;
pub mod store;
pub mod types;
pub mod verify;
pub mod worker;
