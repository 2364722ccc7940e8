//! Names on the server: the streams, subjects and consumers of a namespace, and message
//! ids.
//!
//! A namespace `ns` (letters, digits and `_`) holds:
//!
//! | stream | subjects | holds |
//! |---|---|---|
//! | `{ns}-q-{queue}` | `{ns}.q.{queue}` | the queue's messages (work-queue retention), with the durable pull consumer `workers` |
//! | `{ns}-dlq` | `{ns}.dlq.{queue}.{id}` | DLQ entries, one per subject (limits retention: browsable) |
//! | `{ns}-history` | `{ns}.history.{id}` | the failed attempts of a message still in a queue, one record per subject |
//! | `{ns}-events` | `{ns}.events.{queue}.{event}` | one small message per counted event (retried, dead-lettered, replayed...) |
//! | `{ns}-registry` | `{ns}.registry.{queue}` | one message per queue: its number is the message's sequence |
//! | `{ns}-edge` | `{ns}.edge.{origin}.q.{queue}`, `{ns}.edge.{origin}.dlq.{queue}` | what forwarders of edge stores sent: queue messages and DLQ entries, by origin (limits retention) |
//! | `{ns}-edge-return` | `{ns}.edge-return.{origin}` | fleet DLQ entries replayed back to their device (work-queue retention) |
//!
//! A queue name is letters, digits, `_` and `-` (a subject token and part of a stream
//! name). Since the namespace has no `-`, the first `-` of a stream name ends the
//! namespace, so two (namespace, queue) pairs never share a stream.
//!
//! A message id is the queue's number times 2^40 plus the message's sequence in its
//! queue's stream when it was first enqueued: unique in the namespace (like the embedded
//! store's ids in a store), and kept for the message's whole life, replays to another queue
//! included (a replayed message carries it in a header).

use deadletter::queue::{MessageId, NameProblem};
use deadletter::{Error, Result};

/// Bits of a message id taken by the stream sequence.
const SEQUENCE_BITS: u32 = 40;

/// The name of the durable pull consumer every worker of a queue shares.
pub(crate) const CONSUMER: &str = "workers";

/// Checks a namespace: 1 to 64 letters, digits or `_`.
pub(crate) fn validate_namespace(ns: &str) -> Result<()> {
    let ok = !ns.is_empty()
        && ns.len() <= 64
        && ns.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(Error::InvalidConfig(format!(
            "JetStream namespace {ns:?}: 1 to 64 letters, digits or '_'"
        )))
    }
}

/// Checks a queue name: the store's rules (`NameProblem::of`), and 1 to 128 letters,
/// digits, `_` or `-` (a name becomes part of stream and subject names).
pub(crate) fn validate_queue(name: &str) -> Result<()> {
    let narrow = name.len() <= 128
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    let problem = NameProblem::of(name).or((!narrow).then_some(NameProblem::NotAllowed {
        allowed: "on JetStream a queue name is 1 to 128 letters, digits, '_' or '-'",
    }));
    match problem {
        None => Ok(()),
        Some(problem) => Err(Error::InvalidQueueName {
            name: name.to_string(),
            problem,
        }),
    }
}

/// The names of one namespace's streams and subjects.
#[derive(Debug, Clone)]
pub(crate) struct Names {
    ns: String,
}

impl Names {
    pub(crate) fn new(ns: &str) -> Result<Self> {
        validate_namespace(ns)?;
        Ok(Names { ns: ns.to_string() })
    }

    pub(crate) fn namespace(&self) -> &str {
        &self.ns
    }

    pub(crate) fn queue_stream(&self, queue: &str) -> String {
        format!("{}-q-{queue}", self.ns)
    }
    pub(crate) fn queue_subject(&self, queue: &str) -> String {
        format!("{}.q.{queue}", self.ns)
    }

    pub(crate) fn dlq_stream(&self) -> String {
        format!("{}-dlq", self.ns)
    }
    pub(crate) fn dlq_subjects(&self) -> String {
        format!("{}.dlq.>", self.ns)
    }
    /// The subject of every entry of `queue`'s DLQ.
    pub(crate) fn dlq_filter(&self, queue: &str) -> String {
        format!("{}.dlq.{queue}.*", self.ns)
    }
    pub(crate) fn dlq_entry(&self, queue: &str, id: MessageId) -> String {
        format!("{}.dlq.{queue}.{id}", self.ns)
    }

    pub(crate) fn history_stream(&self) -> String {
        format!("{}-history", self.ns)
    }
    pub(crate) fn history_subjects(&self) -> String {
        format!("{}.history.*", self.ns)
    }
    pub(crate) fn history(&self, id: MessageId) -> String {
        format!("{}.history.{id}", self.ns)
    }

    pub(crate) fn events_stream(&self) -> String {
        format!("{}-events", self.ns)
    }
    pub(crate) fn events_subjects(&self) -> String {
        format!("{}.events.>", self.ns)
    }
    pub(crate) fn event(&self, queue: &str, event: Event) -> String {
        format!("{}.events.{queue}.{}", self.ns, event.token())
    }
    pub(crate) fn events_of(&self, queue: &str) -> String {
        format!("{}.events.{queue}.*", self.ns)
    }

    pub(crate) fn registry_stream(&self) -> String {
        format!("{}-registry", self.ns)
    }
    pub(crate) fn registry_subjects(&self) -> String {
        format!("{}.registry.*", self.ns)
    }
    pub(crate) fn registry(&self, queue: &str) -> String {
        format!("{}.registry.{queue}", self.ns)
    }
    /// The queue a registry subject names.
    pub(crate) fn queue_of_registry<'s>(&self, subject: &'s str) -> Option<&'s str> {
        subject
            .strip_prefix(self.ns.as_str())?
            .strip_prefix(".registry.")
    }
}

/// Checks an origin (the name of a forwarding store, such as a device id): 1 to 128
/// letters, digits, `_` or `-`, like a queue name (it is a subject token).
pub(crate) fn validate_origin(origin: &str) -> Result<()> {
    validate_queue(origin).map_err(|_| {
        Error::InvalidConfig(format!(
            "origin {origin:?}: 1 to 128 letters, digits, '_' or '-'"
        ))
    })
}

impl Names {
    pub(crate) fn edge_stream(&self) -> String {
        format!("{}-edge", self.ns)
    }
    pub(crate) fn edge_subjects(&self) -> String {
        format!("{}.edge.>", self.ns)
    }
    /// Where the forwarder of `origin` sends the messages of its queue `queue`.
    pub(crate) fn edge_queue(&self, origin: &str, queue: &str) -> String {
        format!("{}.edge.{origin}.q.{queue}", self.ns)
    }
    /// Where the forwarder of `origin` sends the entries of its queue `queue`'s DLQ.
    pub(crate) fn edge_dlq(&self, origin: &str, queue: &str) -> String {
        format!("{}.edge.{origin}.dlq.{queue}", self.ns)
    }
    /// The DLQ entries forwarded from `origin` (every origin with `None`).
    pub(crate) fn edge_dlq_filter(&self, origin: Option<&str>) -> String {
        format!("{}.edge.{}.dlq.*", self.ns, origin.unwrap_or("*"))
    }
    /// The origin and queue of a forwarded DLQ entry's subject.
    pub(crate) fn edge_dlq_parts<'s>(&self, subject: &'s str) -> Option<(&'s str, &'s str)> {
        let rest = subject
            .strip_prefix(self.ns.as_str())?
            .strip_prefix(".edge.")?;
        let (origin, rest) = rest.split_once('.')?;
        Some((origin, rest.strip_prefix("dlq.")?))
    }
    /// Where replays of forwarded DLQ entries wait for `origin`'s forwarder.
    pub(crate) fn edge_returns(&self, origin: &str) -> String {
        format!("{}.edge-return.{origin}", self.ns)
    }
    pub(crate) fn edge_returns_stream(&self) -> String {
        format!("{}-edge-return", self.ns)
    }
    pub(crate) fn edge_returns_subjects(&self) -> String {
        format!("{}.edge-return.*", self.ns)
    }
}

/// What the events stream counts, per queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Event {
    /// A failed delivery scheduled for another attempt.
    Retried,
    /// A message moved to the DLQ.
    DeadLettered,
    /// A message whose time to live passed (to the DLQ or dropped).
    Expired,
    /// A message whose time to live passed, dropped rather than moved to the DLQ.
    Dropped,
    /// A DLQ entry deleted or purged.
    Deleted,
    /// A DLQ entry replayed to a queue.
    Replayed,
    /// Reprocessing that succeeded (a replayed message acked, or an entry marked ok).
    ReprocessedOk,
    /// Reprocessing that failed (a replayed message dead-lettered again, or marked failed).
    ReprocessedFailed,
}

impl Event {
    pub(crate) const ALL: [Event; 8] = [
        Event::Retried,
        Event::DeadLettered,
        Event::Expired,
        Event::Dropped,
        Event::Deleted,
        Event::Replayed,
        Event::ReprocessedOk,
        Event::ReprocessedFailed,
    ];

    pub(crate) fn token(self) -> &'static str {
        match self {
            Event::Retried => "retried",
            Event::DeadLettered => "dead_lettered",
            Event::Expired => "expired",
            Event::Dropped => "dropped",
            Event::Deleted => "deleted",
            Event::Replayed => "replayed",
            Event::ReprocessedOk => "reprocessed_ok",
            Event::ReprocessedFailed => "reprocessed_failed",
        }
    }

    pub(crate) fn from_subject(subject: &str) -> Option<Event> {
        let token = subject.rsplit('.').next()?;
        Event::ALL.into_iter().find(|e| e.token() == token)
    }
}

/// The id of the message at `sequence` in the stream of the queue numbered `queue`.
pub(crate) fn message_id(queue: u64, sequence: u64) -> Result<MessageId> {
    if sequence >= 1 << SEQUENCE_BITS || queue >= 1 << (64 - SEQUENCE_BITS) {
        return Err(Error::InvalidConfig(format!(
            "message id out of range: queue number {queue}, sequence {sequence}"
        )));
    }
    Ok((queue << SEQUENCE_BITS) | sequence)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_do_not_collide_and_ids_are_unique_per_queue() {
        let a = Names::new("a_q").unwrap();
        let b = Names::new("a").unwrap();
        assert_ne!(a.queue_stream("b"), b.queue_stream("q_b"));
        assert!(validate_namespace("a-b").is_err());
        assert!(validate_queue("orders.eu").is_err());
        assert!(validate_queue("orders-eu_1").is_ok());
        assert_ne!(message_id(1, 5).unwrap(), message_id(2, 5).unwrap());
        assert!(message_id(1, 1 << 40).is_err());
        assert_eq!(b.queue_of_registry("a.registry.orders"), Some("orders"));
        assert_eq!(
            b.edge_dlq_parts(&b.edge_dlq("dev-1", "orders")),
            Some(("dev-1", "orders"))
        );
        assert_eq!(b.edge_dlq_parts(&b.edge_queue("dev-1", "orders")), None);
        assert!(validate_origin("dev.1").is_err());
        assert_eq!(
            Event::from_subject(&b.event("x", Event::Replayed)),
            Some(Event::Replayed)
        );
    }
}
