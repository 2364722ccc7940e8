//! The forwarder's link to the server: one connection that is never re-established
//! ([`Conn::connect_once`]), the edge stream, and the publishing of a window of messages.
//!
//! Invariants:
//! - a window's publishes are all sent before any acknowledgement is awaited (one round
//!   trip per window), and at most one window is in flight;
//! - [`Link::publish_window`] reports how many publishes, from the first, the server
//!   acknowledged; since the connection never comes back once dropped, the server stored
//!   either a prefix of the window or, for a publish whose acknowledgement was lost, more
//!   than that prefix, never a later message without an earlier one. Sending the rest again
//!   (over a new link) therefore keeps each queue's order, and the deduplication ids make
//!   the messages the server already had duplicates, not copies.

use std::time::Duration;

use async_nats::jetstream::consumer::{pull, AckPolicy, PullConsumer};
use async_nats::jetstream::context::PublishErrorKind;
use async_nats::jetstream::message::PublishMessage;
use async_nats::jetstream::stream::{self, StorageType};
use deadletter::{Error, Result};

use crate::client::{backend, Conn};
use crate::names::Names;
use crate::options::Storage;

use super::central::return_stream_config;
use super::options::ForwardOptions;

/// A publish to make: its subject and message (with its deduplication id).
pub(crate) struct Publication {
    pub(crate) subject: String,
    pub(crate) message: PublishMessage,
}

/// What the server said about a window.
pub(crate) struct WindowResult {
    /// Publishes acknowledged, from the first.
    pub(crate) acknowledged: usize,
    /// Of those, the ones the server already held.
    pub(crate) duplicates: usize,
    /// Why the rest were not acknowledged.
    pub(crate) error: Option<Error>,
    /// The index of a publish the client refused to send because it is larger than the
    /// server's `max_payload`: nothing from it on was sent, so the link is still sound.
    pub(crate) too_large: Option<usize>,
}

/// A connection to the central server, with the edge stream in place.
pub(crate) struct Link {
    pub(crate) conn: Conn,
    /// This origin's durable consumer of the returns stream (with `returns` on).
    pub(crate) returns: Option<PullConsumer>,
}

impl Link {
    /// Connects, and creates the edge stream if it is new (and, with `returns`, the
    /// returns stream and this origin's consumer of it). A
    /// link is only returned once the server answered a JetStream request, so a server
    /// still starting its JetStream is a failed connect, not refused publishes.
    pub(crate) fn open(options: &ForwardOptions, names: &Names) -> Result<Link> {
        let conn = Conn::connect_once(&options.url, options.request_timeout)?;
        let returns = conn.run(async {
            for (name, subjects) in [(names.edge_stream(), names.edge_subjects())] {
                let config = stream::Config {
                    name,
                    subjects: vec![subjects],
                    storage: match options.storage {
                        Storage::File => StorageType::File,
                        Storage::Memory => StorageType::Memory,
                    },
                    num_replicas: options.replicas,
                    duplicate_window: options.duplicate_window,
                    ..Default::default()
                };
                conn.js
                    .get_or_create_stream(config)
                    .await
                    .map_err(|e| backend("create the edge stream", e))?;
            }
            if !options.returns {
                return Ok(None);
            }
            let config = return_stream_config(names, options.replicas, options.duplicate_window);
            let stream = conn
                .js
                .get_or_create_stream(config)
                .await
                .map_err(|e| backend("create the returns stream", e))?;
            let durable = format!("returns-{}", options.origin);
            let consumer = stream
                .get_or_create_consumer(
                    &durable,
                    pull::Config {
                        durable_name: Some(durable.clone()),
                        filter_subject: names.edge_returns(&options.origin),
                        ack_policy: AckPolicy::Explicit,
                        ack_wait: Duration::from_secs(30),
                        ..Default::default()
                    },
                )
                .await
                .map_err(|e| backend("create the returns consumer", e))?;
            Ok::<_, Error>(Some(consumer))
        })?;
        Ok(Link { conn, returns })
    }

    /// Publishes `window` and waits for the acknowledgements, in order (each for at most
    /// the request timeout). Stops counting at the first publish not acknowledged.
    pub(crate) fn publish_window(&self, window: Vec<Publication>) -> WindowResult {
        self.conn.run(async {
            let mut result = WindowResult {
                acknowledged: 0,
                duplicates: 0,
                error: None,
                too_large: None,
            };
            let mut pending = Vec::with_capacity(window.len());
            for (i, p) in window.into_iter().enumerate() {
                match self.conn.js.send_publish(p.subject, p.message).await {
                    Ok(ack) => pending.push(ack),
                    Err(e) if e.kind() == PublishErrorKind::MaxPayloadExceeded => {
                        result.too_large = Some(i);
                        result.error = Some(backend("forward (over the server's max_payload)", e));
                        break;
                    }
                    Err(e) => {
                        result.error = Some(backend("forward", e));
                        break;
                    }
                }
            }
            let sent = pending.len();
            for ack in pending {
                match ack.await {
                    Ok(ack) => {
                        result.acknowledged += 1;
                        result.duplicates += usize::from(ack.duplicate);
                    }
                    Err(e) => {
                        let refused = e.kind() == PublishErrorKind::Other;
                        let what = if refused {
                            "forward (the server refused a message)"
                        } else {
                            "forward"
                        };
                        result.error = Some(backend(what, e));
                        break;
                    }
                }
            }
            if result.acknowledged < sent {
                // A publish before the refused one failed: that is the error to act on.
                result.too_large = None;
            }
            result
        })
    }
}
