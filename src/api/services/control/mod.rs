//! The control socket: how another process (the `deadletter` command) asks the process that
//! holds a store to change it.
//!
//! One process holds a store (its directory lock), so a change to a live store must be made
//! by that process. With [`Config::control_socket`](crate::Config::control_socket) on (or a
//! [`ControlServer`](crate::services::ControlServer) started on it), the store serves a
//! Unix domain socket, `control.sock` in its directory, readable and writable by its
//! owner's user only (mode 0600: file permissions are the access control). A [`Client`]
//! connects to it and asks for one change at a time: enqueue, replay, delete, purge, mark
//! reprocessed, import, an operator's retry now, delay, move to the DLQ or delete of a
//! queue's waiting messages; or for what only the owner knows: the worker pools attached to
//! its queues and their recent rates ([`Client::workers`]), and which of its pool's
//! workers holds an in-flight message ([`Client::messages`]). The owner carries each one
//! out through its own
//! [`Store`](crate::Store), with the same calls a program makes, so a change asked this way
//! is exactly a local one (same records, same checks, same durability) and the reply comes
//! once it is durable.
//!
//! Reads need no owner: [`Store::open_read_only`](crate::Store::open_read_only) reads a
//! snapshot without the lock. A tool selects entries on a snapshot and sends their ids;
//! entries that changed in between are reported as refused or missing, never changed twice.
//!
//! The protocol is small and versioned (`docs/CONTROL.md` describes it byte by byte): each
//! request and reply is a frame of a 4-byte little-endian length, a 2-byte protocol version
//! ([`PROTOCOL_VERSION`]) and a bincode body. The socket code runs on its own threads and
//! touches nothing on the store's hot paths.
//!
//! ```
//! use deadletter::control::Client;
//! use deadletter::{Config, Store};
//! use deadletter::queue::EnqueueOptions;
//!
//! # let dir = tempfile::tempdir().unwrap();
//! let owner = Store::open(&dir, Config::fast().control_socket(true))?;
//! owner.queue("orders")?;
//!
//! // Another process (here the same one) asks the owner to enqueue.
//! let client = Client::connect(&dir)?;
//! assert_eq!(client.owner_pid(), std::process::id());
//! let id = client.enqueue("orders", b"ORD-1", &EnqueueOptions::new())?;
//! assert_eq!(owner.existing_queue("orders")?.len(), 1);
//! # let _ = id;
//! # Ok::<(), deadletter::Error>(())
//! ```

mod client;
mod protocol;
pub(crate) mod server;

pub use client::{Client, MarkReport};
pub use protocol::{OLDEST_COMPATIBLE, PROTOCOL_VERSION};

/// The socket's file name in the store directory.
pub const SOCKET_NAME: &str = crate::storage::log::CONTROL_SOCKET;
