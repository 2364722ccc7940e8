//! The API layer: what users see. Its modules are layers too, and imports run one way,
//! from the top down:
//!
//! ```text
//!  open                 Store::open: the facade, starts the services its Config asks for
//!  services/            started on a store, each a guard: compactor, replay_driver, control/
//!  guarded/, compaction policies over the operations: guarded replay, a compaction run
//!  worker, backend/     the worker pool and the traits the handles implement
//!  queue/, dlq/,        the handles and reads that turn each user operation into records
//!  history, metrics,    (activity: the pools attached and the recent rates)
//!  activity
//!  core/                the store's shared state and handle, settings, actors, alerts,
//!                       clock, durations, the types users see
//! ```
//!
//! Beside them: [`retry`] and [`classify`] (the pool's policies), [`verify`] (a check of
//! a store's files, which opens no store) and [`trace`] (the trace context and the spans
//! every layer emits; it imports nothing of them).
//!
//! Every change goes through the engine's write path (`Engine::commit_with`, reached
//! through the store handle): a handle validates against the index under the lock, builds
//! the records, and the engine appends and applies them. Reads (lists, stats) take the lock
//! briefly and read the log outside it. The crate root re-exports this layer's public
//! types; the modules themselves are private.

pub mod activity;
#[cfg(feature = "async")]
pub mod asynchronous;
pub mod backend;
pub mod classify;
mod compaction;
pub mod core;
pub mod dlq;
pub mod guarded;
pub mod history;
pub mod metrics;
mod open;
mod pool_policy;
pub mod queue;
pub mod retry;
pub mod services;
pub mod trace;
pub mod verify;
pub mod worker;
