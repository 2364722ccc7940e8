//! [`JetStreamOptions`]: the namespace, the server-side settings of the streams this
//! package creates, and what the envelopes record.

use std::time::Duration;

use deadletter::queue::QueueOptions;

/// Where the streams keep their messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Storage {
    /// On disk (the default): see the durability section of the package documentation.
    File,
    /// In the server's memory: lost when the server stops.
    Memory,
}

/// Settings of a connection to a namespace (see [`crate::JetStream::connect_with`]).
///
/// ```
/// use std::time::Duration;
/// use deadletter_jetstream::JetStreamOptions;
///
/// let options = JetStreamOptions::new("shop")
///     .replicas(3)
///     .retention(Some(Duration::from_secs(7 * 24 * 3600)))
///     .environment("production");
/// assert_eq!(options.namespace, "shop");
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct JetStreamOptions {
    /// The namespace: the prefix of every stream and subject (letters, digits, `_`).
    pub namespace: String,
    /// Stream storage.
    pub storage: Storage,
    /// Replicas of each stream (1 on a single server; 3 in a cluster of three or more).
    pub replicas: usize,
    /// How long an idempotency key (and the deduplication id of a DLQ move or a replay)
    /// is remembered by the server.
    pub duplicate_window: Duration,
    /// How long DLQ entries are kept (`None`: until deleted). Default 30 days.
    pub retention: Option<Duration>,
    /// Failed attempts kept per message (older ones are counted, not kept).
    pub max_history: usize,
    /// Environment name recorded with failures.
    pub environment: Option<String>,
    /// Code version recorded with failures.
    pub code_version: Option<String>,
    /// DLQ naming pattern: `{queue_name}` and `{environment}` are replaced.
    pub dlq_name_pattern: String,
    /// How long a request to the server may take before it fails.
    pub request_timeout: Duration,
    /// How long a move to the DLQ keeps retrying while the server cannot be reached,
    /// before it gives up with an error (the message then stays leased, and its next
    /// delivery finishes the move).
    pub move_patience: Duration,
    /// Settings of queues opened with [`crate::JetStream::queue`].
    pub queue_defaults: QueueOptions,
}

impl JetStreamOptions {
    /// The defaults in namespace `namespace`.
    pub fn new(namespace: impl Into<String>) -> Self {
        JetStreamOptions {
            namespace: namespace.into(),
            storage: Storage::File,
            replicas: 1,
            duplicate_window: Duration::from_secs(3600),
            retention: Some(Duration::from_secs(30 * 24 * 3600)),
            max_history: 10,
            environment: None,
            code_version: None,
            dlq_name_pattern: "{queue_name}-dlq".into(),
            request_timeout: Duration::from_secs(5),
            move_patience: Duration::from_secs(60),
            queue_defaults: QueueOptions::default(),
        }
    }
    /// Sets the stream storage.
    pub fn storage(mut self, storage: Storage) -> Self {
        self.storage = storage;
        self
    }
    /// Sets the replicas of each stream.
    pub fn replicas(mut self, n: usize) -> Self {
        self.replicas = n.max(1);
        self
    }
    /// Sets how long deduplication ids are remembered.
    pub fn duplicate_window(mut self, window: Duration) -> Self {
        self.duplicate_window = window;
        self
    }
    /// Sets how long DLQ entries are kept.
    pub fn retention(mut self, retention: Option<Duration>) -> Self {
        self.retention = retention;
        self
    }
    /// Sets the failed attempts kept per message.
    pub fn max_history(mut self, n: usize) -> Self {
        self.max_history = n.max(1);
        self
    }
    /// Sets the environment name recorded with failures.
    pub fn environment(mut self, name: impl Into<String>) -> Self {
        self.environment = Some(name.into());
        self
    }
    /// Sets the code version recorded with failures.
    pub fn code_version(mut self, version: impl Into<String>) -> Self {
        self.code_version = Some(version.into());
        self
    }
    /// Sets the DLQ naming pattern.
    pub fn dlq_name_pattern(mut self, pattern: impl Into<String>) -> Self {
        self.dlq_name_pattern = pattern.into();
        self
    }
    /// Sets the request timeout.
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }
    /// Sets how long a DLQ move retries while the server is unreachable.
    pub fn move_patience(mut self, patience: Duration) -> Self {
        self.move_patience = patience;
        self
    }
    /// Sets the settings of queues opened with [`crate::JetStream::queue`].
    pub fn queue_defaults(mut self, options: QueueOptions) -> Self {
        self.queue_defaults = options;
        self
    }
}
