//! deadletter on NATS JetStream: the same queues, worker pool and DLQ as the embedded
//! store, shared by worker processes on many machines.
//!
//! [`JetStream`] connects to a namespace on a server and hands out [`JetStreamQueue`]s and
//! [`JetStreamDlq`]s, which implement `deadletter`'s backend traits
//! ([`MessageQueue`](deadletter::MessageQueue),
//! [`DeadLetterQueue`](deadletter::DeadLetterQueue)): code written against the traits,
//! and `deadletter::WorkerPool`, run unchanged on either backend.
//!
//! ```no_run
//! use std::time::Duration;
//! use deadletter::{DeadLetterQueue, Failure, MessageQueue, WorkerPool};
//! use deadletter::pool::Retry;
//! use deadletter_jetstream::{JetStream, JetStreamMessage};
//!
//! # fn main() -> deadletter::Result<()> {
//! let js = JetStream::connect("nats://127.0.0.1:4222", "shop")?;
//! let orders = js.queue("orders")?;
//! orders.enqueue(br#"{"orderId":"ORD-1"}"#)?;
//! let pool = WorkerPool::new(&orders)
//!     .workers(4)
//!     .retry(Retry::exponential(Duration::from_millis(100)).max_attempts(5))
//!     .start(|msg: &JetStreamMessage| {
//!         use deadletter::Delivery;
//!         msg.text().map(|_| ()).ok_or_else(|| Failure::permanent("NotText", "not UTF-8"))
//!     })?;
//! pool.run_until_idle()?;
//! println!("{:?}", orders.dlq().stats()?);
//! # Ok(()) }
//! ```
//!
//! How queues, leases, retries and the DLQ map onto streams and consumers, and what
//! JetStream's own durability settings mean for "nothing acknowledged is lost", is in the
//! project's `docs/ARCHITECTURE.md` ("The JetStream backend"). In short: a queue is a
//! work-queue stream with one durable pull consumer; a lease is a fetch, with the ack wait
//! as the visibility timeout; a retry is a negative acknowledgement with a delay; a move to
//! the DLQ publishes the whole envelope (JSON, see `wire`) with a deduplication id, waits
//! for its acknowledgement, then terminates the original.
//!
//! The same queues and DLQs have async handles ([`JetStreamQueue::asynchronous`],
//! [`AsyncJetStreamQueue`], [`AsyncJetStreamDlq`]) implementing `deadletter`'s async
//! traits ([`AsyncMessageQueue`](deadletter::async_api::AsyncMessageQueue),
//! [`AsyncDeadLetterQueue`](deadletter::async_api::AsyncDeadLetterQueue)), awaited on the
//! caller's tokio runtime; the blocking handles run the same futures on the connection's
//! own runtime.
//!
//! Requires nats-server 2.10 or later ([`MINIMUM_SERVER`]) with JetStream enabled and
//! `sync_interval: always`; connecting to an older server fails with
//! [`UnsupportedServer`] (see its documentation for why).

mod asynchronous;
mod client;
mod counts;
mod dlq;
mod forward;
mod handles;
mod holds;
#[cfg(feature = "local-server")]
pub mod local_server;
mod message;
mod moves;
mod names;
mod namespace;
mod options;
mod pool;
mod queue;
mod repair;
mod scan;
mod wire;

pub use asynchronous::{AsyncJetStreamDlq, AsyncJetStreamQueue};
pub use client::{UnsupportedServer, MINIMUM_SERVER};
pub use dlq::JetStreamDlq;
pub use forward::{
    FleetDlq, FleetEntry, ForwardOptions, ForwardStatus, ForwardStatusHandle, Forwarder, LinkState,
    QueueLag,
};
pub use message::JetStreamMessage;
pub use namespace::JetStream;
pub use options::{JetStreamOptions, Storage};
pub use pool::MAX_RESERVATION;
pub use queue::{JetStreamQueue, SequenceWentBackwards};
