//! [`ForwardOptions`]: what a [`Forwarder`](super::Forwarder) forwards, where to, and how
//! it behaves while the link is down.

use std::time::Duration;

use crate::options::Storage;

/// Settings of a [`Forwarder`](super::Forwarder).
///
/// ```
/// use deadletter_jetstream::ForwardOptions;
///
/// let options = ForwardOptions::new("nats://cloud.example:4222", "fleet", "device-17")
///     .queue("readings")
///     .dlq("readings")
///     .max_in_flight(512);
/// assert_eq!(options.queues, ["readings"]);
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ForwardOptions {
    /// The server (`nats://host:port`).
    pub url: String,
    /// The central namespace (letters, digits, `_`): messages go to its stream
    /// `{namespace}-edge`.
    pub namespace: String,
    /// The name of this store in the fleet, such as a device id (letters, digits, `_`,
    /// `-`). It is part of every subject and deduplication id: two stores must never
    /// forward under one origin.
    pub origin: String,
    /// Local queues whose messages are forwarded.
    pub queues: Vec<String>,
    /// Local queues whose DLQ entries are forwarded.
    pub dlqs: Vec<String>,
    /// Publishes awaiting their acknowledgement, at most (also the messages leased at a
    /// time per queue). Default 1,024.
    pub max_in_flight: usize,
    /// How long the forwarder's leases last; they are extended while the link is down.
    /// Default 5 minutes.
    pub lease: Duration,
    /// The first delay before connecting again after a failure. Default 100 ms.
    pub backoff_min: Duration,
    /// The longest delay between connect attempts. Default 10 s.
    pub backoff_max: Duration,
    /// How long to wait before looking again when there was nothing to forward. Default
    /// 50 ms.
    pub idle_wait: Duration,
    /// How long a connect or a publish acknowledgement may take. Default 5 s.
    pub request_timeout: Duration,
    /// Storage of the edge stream, if the forwarder creates it.
    pub storage: Storage,
    /// Replicas of the edge stream, if the forwarder creates it.
    pub replicas: usize,
    /// The edge stream's duplicate window, if the forwarder creates it: a message
    /// published again later than this after its first publish is stored twice. Default
    /// one hour.
    pub duplicate_window: Duration,
    /// Enqueue the entries replayed from the fleet DLQ ([`FleetDlq::replay`](super::FleetDlq::replay)) back into
    /// their local queues (default on).
    pub returns: bool,
}

impl ForwardOptions {
    /// The defaults, forwarding nothing yet: add queues with [`ForwardOptions::queue`]
    /// and DLQs with [`ForwardOptions::dlq`].
    pub fn new(
        url: impl Into<String>,
        namespace: impl Into<String>,
        origin: impl Into<String>,
    ) -> Self {
        ForwardOptions {
            url: url.into(),
            namespace: namespace.into(),
            origin: origin.into(),
            queues: Vec::new(),
            dlqs: Vec::new(),
            max_in_flight: 1024,
            lease: Duration::from_secs(300),
            backoff_min: Duration::from_millis(100),
            backoff_max: Duration::from_secs(10),
            idle_wait: Duration::from_millis(50),
            request_timeout: Duration::from_secs(5),
            storage: Storage::File,
            replicas: 1,
            duplicate_window: Duration::from_secs(3600),
            returns: true,
        }
    }
    /// Forwards the messages of local queue `name`.
    pub fn queue(mut self, name: impl Into<String>) -> Self {
        self.queues.push(name.into());
        self
    }
    /// Forwards the DLQ entries of local queue `name`.
    pub fn dlq(mut self, name: impl Into<String>) -> Self {
        self.dlqs.push(name.into());
        self
    }
    /// Sets the publishes in flight at most (at least 1).
    pub fn max_in_flight(mut self, n: usize) -> Self {
        self.max_in_flight = n.max(1);
        self
    }
    /// Sets the forwarder's lease length.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }
    /// Sets the reconnect backoff, from `min` doubling up to `max`.
    pub fn backoff(mut self, min: Duration, max: Duration) -> Self {
        self.backoff_min = min;
        self.backoff_max = max.max(min);
        self
    }
    /// Sets the wait when there is nothing to forward.
    pub fn idle_wait(mut self, wait: Duration) -> Self {
        self.idle_wait = wait;
        self
    }
    /// Sets the connect and acknowledgement timeout.
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }
    /// Sets the edge stream's storage.
    pub fn storage(mut self, storage: Storage) -> Self {
        self.storage = storage;
        self
    }
    /// Turns the enqueueing of replays from the fleet DLQ on or off.
    pub fn returns(mut self, on: bool) -> Self {
        self.returns = on;
        self
    }
    /// Sets the edge stream's duplicate window.
    pub fn duplicate_window(mut self, window: Duration) -> Self {
        self.duplicate_window = window;
        self
    }
}
