//! The API layer: what users see. [`store::Store`] wraps the engine with configuration,
//! per-queue options, alert hooks and the compaction thread; [`queue`], [`dlq`] and
//! [`worker`] are the handles that turn each user operation into records; the rest are
//! policies ([`retry`], [`expiry`]), the backend contract ([`backend`]: the traits the
//! handles implement, so the pool and user code run on other engines too), options ([`config`]), reports ([`metrics`],
//! [`verify`]) and types ([`types`], [`clock`], [`alert`]).
//!
//! Every change goes through the engine's write path (`Engine::commit_with`): a handle
//! validates against the index under the lock, builds the records, and the engine appends
//! and applies them. Reads (lists, stats) take the lock briefly and read the log outside it.
//! The crate root re-exports this layer's public types; the modules themselves are private.

pub mod actor;
pub mod alert;
pub mod backend;
pub mod classify;
pub mod clock;
pub mod config;
pub mod control;
pub mod dlq;
pub mod durations;
mod expiry;
pub mod guarded;
pub mod history;
pub mod metrics;
pub mod queue;
pub mod retry;
pub mod store;
pub mod types;
pub mod verify;
pub mod worker;
