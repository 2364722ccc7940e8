//! A backend held in memory that implements only the core traits ([`MessageQueue`],
//! [`DeadLetterQueue`], [`Delivery`]): the smallest real backend, which shows that the
//! contract and the [`WorkerPool`] need nothing more. The pool runs on it through
//! [`CoreOnly`], that is through [`WorkerQueue`]'s defaults, and the whole conformance
//! suite passes on it (`tests/memory.rs`).
//!
//! Everything a queue holds lives in the process and is gone with it; otherwise it keeps
//! every promise of the traits: counted deliveries, leases that run out (to the DLQ on the
//! last attempt), backoff without holding up later messages, delays, time to live,
//! idempotency keys (for an hour), a limit of pending messages, the whole envelope with a
//! bounded history, replay rules, counters, retention (30 days) and size alerts.
//!
//! ```
//! use std::time::Duration;
//! use deadletter::{DeadLetterQueue, Delivery, Failure, Filter, MessageQueue, Page};
//! use deadletter::backend::CoreOnly;
//! use deadletter::WorkerPool;
//! use deadletter::pool::Retry;
//! use deadletter_conformance::memory::{Memory, MemoryMessage};
//!
//! # fn main() -> deadletter::Result<()> {
//! let orders = Memory::new().queue("orders")?;
//! orders.enqueue_batch(&["ORD-1", "flaky", "poison"])?;
//! let pool = WorkerPool::new(&CoreOnly(orders.clone()))
//!     .workers(2)
//!     .retry(Retry::fixed(Duration::from_millis(5)).max_attempts(3))
//!     .start(|msg: &MemoryMessage| match (msg.text(), msg.attempt()) {
//!         (Some("flaky"), 1) => Err(Failure::transient("Timeout", "try again")),
//!         (Some("poison"), _) => Err(Failure::permanent("Invalid", "not an order")),
//!         _ => Ok(()),
//!     })?;
//! pool.run_until_idle()?; // returns once the retry has been handled too
//! let c = pool.shutdown(Duration::from_secs(5))?.counters;
//! assert_eq!((c.processed, c.retried, c.dead_lettered), (2, 1, 1));
//! let poison = &orders.dlq().list(&Filter::all(), Page::first(10))?[0];
//! assert_eq!(poison.payload, b"poison");
//! assert_eq!(poison.failure.error_kind, "Invalid");
//! # Ok(()) }
//! ```
//!
//! [`MessageQueue`]: deadletter::MessageQueue
//! [`DeadLetterQueue`]: deadletter::DeadLetterQueue
//! [`Delivery`]: deadletter::Delivery
//! [`WorkerPool`]: deadletter::WorkerPool
//! [`CoreOnly`]: deadletter::backend::CoreOnly
//! [`WorkerQueue`]: deadletter::backend::WorkerQueue

mod dlq;
mod queue;
mod state;

pub use dlq::MemoryDlq;
pub use queue::{MemoryMessage, MemoryQueue};
pub use state::Memory;
