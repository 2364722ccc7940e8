//! [`JetStream`]: a connection to one namespace on a NATS server, the JetStream analogue of
//! a `deadletter::Store`. It creates the namespace's shared streams, registers queues
//! (each gets a number, part of its message ids) and opens their streams and consumers;
//! the queue and DLQ handles are opened above it (`handles`), the alert hooks it holds
//! are checked in `counts`.
//!
//! Invariants:
//! - a queue's number never changes: it is the sequence of its registration message,
//!   written once (a publish that expects the subject to be empty);
//! - every handle of this connection shares one client and one runtime.

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream;
use async_nats::jetstream::consumer::{pull, AckPolicy, DeliverPolicy, PullConsumer};
use async_nats::jetstream::context::{GetStreamErrorKind, PublishErrorKind};
use async_nats::jetstream::stream::{self, RetentionPolicy, StorageType};
use async_nats::jetstream::ErrorCode;
use deadletter::dlq::DlqAlert;
use deadletter::queue::QueueOptions;
use deadletter::Result;
use parking_lot::Mutex;

use crate::client::{backend, Conn};
use crate::holds::Holds;
use crate::names::{self, Names, CONSUMER};
use crate::options::{JetStreamOptions, Storage};

/// A connection to a namespace of queues and DLQs on a NATS JetStream server. Cheap to
/// clone; usable from any number of threads.
///
/// ```no_run
/// use deadletter::{DeadLetterQueue, MessageQueue};
/// use deadletter_jetstream::JetStream;
///
/// # fn main() -> deadletter::Result<()> {
/// let js = JetStream::connect("nats://127.0.0.1:4222", "shop")?;
/// let orders = js.queue("orders")?; // its DLQ: "orders-dlq"
/// orders.enqueue(br#"{"orderId":"ORD-1"}"#)?; // returns once the server stored it
/// println!("{:?}", orders.dlq().stats()?);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct JetStream {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) conn: Conn,
    pub(crate) names: Names,
    pub(crate) options: JetStreamOptions,
    queues: Mutex<HashMap<String, Arc<QueueInfo>>>,
    pub(crate) alerts: Mutex<Vec<Hook>>,
}

/// What a queue handle needs of the server: its number, stream and consumer.
pub(crate) struct QueueInfo {
    pub(crate) name: Arc<str>,
    pub(crate) number: u64,
    pub(crate) subject: String,
    pub(crate) stream: String,
    pub(crate) consumer: PullConsumer,
    /// When an idle lease last repaired the queue (see `repair`).
    pub(crate) last_repair: std::sync::Mutex<Option<std::time::Instant>>,
    /// The first stream sequence whose first delivery can be trusted: a message stored
    /// after this connection last (re)connected to the server, so no server restart
    /// since can have made it forget deliveries, acknowledgements or a move to the DLQ
    /// (see `queue`'s `admit`). Only grows.
    pub(crate) trust_from: AtomicU64,
    /// The connection's count of (re)connections when `trust_from` was last set.
    pub(crate) trusted_epoch: AtomicU64,
    /// The highest stream sequence this process has seen the stream give: a new message
    /// below it means the stream went backwards (see `queue`).
    pub(crate) seen_sequence: AtomicU64,
    /// Messages (id, generation) whose handler succeeded in this process but whose ack
    /// the server did not confirm: their next delivery here is acked again, not handed to
    /// a handler a second time nor dead-lettered as a lost lease (see `pool`).
    pub(crate) unconfirmed: Mutex<std::collections::HashSet<(u64, u32)>>,
    /// The messages a worker of this process holds, and those whose handler succeeded
    /// here (see `holds`).
    pub(crate) holds: Holds,
}

/// An alert hook on a queue's DLQ (see `counts`).
pub(crate) struct Hook {
    pub(crate) queue: String,
    pub(crate) threshold: u64,
    pub(crate) above: bool,
    pub(crate) callback: Arc<dyn Fn(&DlqAlert) + Send + Sync>,
}

impl std::fmt::Debug for JetStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JetStream")
            .field("namespace", &self.inner.names.namespace())
            .finish()
    }
}

impl JetStream {
    /// Connects to the server at `url` (`nats://host:port`) and opens namespace
    /// `namespace` with the default options.
    pub fn connect(url: &str, namespace: &str) -> Result<JetStream> {
        Self::connect_with(url, JetStreamOptions::new(namespace))
    }

    /// Connects with `options`, creating the namespace's shared streams if they are new.
    pub fn connect_with(url: &str, options: JetStreamOptions) -> Result<JetStream> {
        let names = Names::new(&options.namespace)?;
        let conn = Conn::connect(url, options.request_timeout)?;
        let js = JetStream {
            inner: Arc::new(Inner {
                conn,
                names,
                options,
                queues: Mutex::new(HashMap::new()),
                alerts: Mutex::new(Vec::new()),
            }),
        };
        js.inner.conn.run(js.create_shared_streams())?;
        Ok(js)
    }

    /// The namespace.
    pub fn namespace(&self) -> &str {
        self.inner.names.namespace()
    }

    /// The options.
    pub fn options(&self) -> &JetStreamOptions {
        &self.inner.options
    }

    /// The names of all queues of the namespace, in creation order.
    pub fn queue_names(&self) -> Result<Vec<String>> {
        self.inner.conn.run(async {
            let names = &self.inner.names;
            let stream = self.stream(&names.registry_stream()).await?;
            let last = stream
                .get_info()
                .await
                .map_err(|e| backend("read the queue registry", e))?
                .state
                .last_sequence;
            let mut out = Vec::new();
            let mut seq = 1;
            while seq <= last {
                let msg = match stream
                    .raw_message_builder()
                    .sequence(seq)
                    .next_by_subject(names.registry_subjects())
                    .send()
                    .await
                {
                    Ok(m) => m,
                    Err(_) => break,
                };
                if let Some(q) = names.queue_of_registry(&msg.subject) {
                    out.push(q.to_string());
                }
                seq = msg.sequence + 1;
            }
            Ok(out)
        })
    }

    /// The DLQ name of queue `queue` under the configured pattern.
    pub fn dlq_name(&self, queue: &str) -> String {
        let o = &self.inner.options;
        o.dlq_name_pattern
            .replace("{queue_name}", queue)
            .replace("{environment}", o.environment.as_deref().unwrap_or(""))
    }

    /// Deletes every stream of the namespace: its queues, DLQ, histories, counters,
    /// registry and what forwarders sent (the edge stream). For tests and tools; nothing
    /// of the namespace is left.
    pub fn delete_namespace(&self) -> Result<()> {
        let names = &self.inner.names;
        let queues = self.queue_names()?;
        self.inner.conn.run(async {
            let js = &self.inner.conn.js;
            let mut streams: Vec<String> = queues.iter().map(|q| names.queue_stream(q)).collect();
            streams.extend([
                names.dlq_stream(),
                names.history_stream(),
                names.events_stream(),
                names.registry_stream(),
                names.edge_stream(),
                names.edge_returns_stream(),
            ]);
            for s in streams {
                match js.delete_stream(&s).await {
                    Ok(_) => {}
                    Err(e)
                        if matches!(e.kind(), GetStreamErrorKind::JetStream(ref j)
                            if j.error_code() == ErrorCode::STREAM_NOT_FOUND) => {}
                    Err(e) => return Err(backend("delete a stream", e)),
                }
            }
            Ok(())
        })?;
        self.inner.queues.lock().clear();
        Ok(())
    }

    /// A handle on stream `name` (no request: the streams of a namespace are created at
    /// connect or at a queue's first open).
    pub(crate) async fn stream(&self, name: &str) -> Result<jetstream::stream::Stream<()>> {
        self.inner
            .conn
            .js
            .get_stream_no_info(name)
            .await
            .map_err(|e| backend("open a stream", e))
    }

    fn stream_config(&self, name: String, subjects: String) -> stream::Config {
        let o = &self.inner.options;
        stream::Config {
            name,
            subjects: vec![subjects],
            storage: match o.storage {
                Storage::File => StorageType::File,
                Storage::Memory => StorageType::Memory,
            },
            num_replicas: o.replicas,
            duplicate_window: o.duplicate_window,
            ..Default::default()
        }
    }

    async fn create_shared_streams(&self) -> Result<()> {
        let n = &self.inner.names;
        let o = &self.inner.options;
        let mut dlq = self.stream_config(n.dlq_stream(), n.dlq_subjects());
        // Limits retention: entries stay until deleted or expired, so they can be browsed.
        dlq.max_messages_per_subject = 1;
        dlq.max_age = o.retention.unwrap_or(Duration::ZERO);
        let mut history = self.stream_config(n.history_stream(), n.history_subjects());
        history.max_messages_per_subject = 1;
        let events = self.stream_config(n.events_stream(), n.events_subjects());
        let mut registry = self.stream_config(n.registry_stream(), n.registry_subjects());
        registry.max_messages_per_subject = 1;
        for config in [dlq, history, events, registry] {
            self.inner
                .conn
                .js
                .get_or_create_stream(config)
                .await
                .map_err(|e| backend("create a stream", e))?;
        }
        Ok(())
    }

    /// The queue's number, stream and consumer, created if new, and cached. With
    /// `set_lease`, the consumer's ack wait becomes `options.visibility_timeout`; without,
    /// an existing consumer keeps its own.
    pub(crate) async fn open_queue(
        &self,
        name: &str,
        options: &QueueOptions,
        set_lease: bool,
    ) -> Result<Arc<QueueInfo>> {
        names::validate_queue(name)?;
        let cached = self.inner.queues.lock().get(name).cloned();
        if let Some(info) = cached {
            if set_lease {
                self.set_ack_wait(&info, options.visibility_timeout).await?;
            }
            return Ok(info);
        }
        let n = &self.inner.names;
        let js = &self.inner.conn.js;
        let number = self.register(name).await?;
        let mut config = self.stream_config(n.queue_stream(name), n.queue_subject(name));
        // Work-queue retention: an acknowledged (or terminated) message is removed.
        config.retention = RetentionPolicy::WorkQueue;
        let stream = js
            .get_or_create_stream(config)
            .await
            .map_err(|e| backend("create a queue stream", e))?;
        // Read before anything is delivered: every message stored so far is checked.
        let epoch = self.inner.conn.epoch();
        let trust_from = stream.cached_info().state.last_sequence + 1;
        let consumer_config = consumer_config(n.queue_subject(name), options.visibility_timeout);
        let consumer: PullConsumer = stream
            .get_or_create_consumer(CONSUMER, consumer_config)
            .await
            .map_err(|e| backend("create the queue's consumer", e))?;
        let info = Arc::new(QueueInfo {
            name: name.into(),
            number,
            subject: n.queue_subject(name),
            stream: n.queue_stream(name),
            consumer,
            last_repair: std::sync::Mutex::new(None),
            trust_from: AtomicU64::new(trust_from),
            trusted_epoch: AtomicU64::new(epoch),
            seen_sequence: AtomicU64::new(trust_from - 1),
            unconfirmed: Mutex::new(std::collections::HashSet::new()),
            holds: Holds::default(),
        });
        if set_lease {
            self.set_ack_wait(&info, options.visibility_timeout).await?;
        }
        self.inner
            .queues
            .lock()
            .insert(name.to_string(), Arc::clone(&info));
        Ok(info)
    }

    /// Makes the consumer's ack wait `lease` if it is not (a create of the same durable
    /// consumer with another ack wait updates it).
    async fn set_ack_wait(&self, info: &QueueInfo, lease: Duration) -> Result<()> {
        let config = consumer_config(info.subject.clone(), lease);
        let mut consumer = info.consumer.clone();
        let current = consumer
            .info()
            .await
            .map_err(|e| backend("read the queue's consumer", e))?
            .config
            .ack_wait;
        if current == config.ack_wait {
            return Ok(());
        }
        let stream = self.stream(&info.stream).await?;
        stream
            .create_consumer(config)
            .await
            .map(|_: PullConsumer| ())
            .map_err(|e| backend("change the queue's lease length", e))
    }

    /// The queue's number: the sequence of its registration message, written once.
    async fn register(&self, name: &str) -> Result<u64> {
        let n = &self.inner.names;
        let js = &self.inner.conn.js;
        let subject = n.registry(name);
        let publish = jetstream::message::PublishMessage::build()
            .payload(name.to_string().into())
            .expected_last_subject_sequence(0);
        // Just after the registry stream was created in a cluster, the server this
        // client is connected to may not know yet where the stream is, and nothing
        // answers the publish (`StreamNotFound`: nothing was stored). Sent again for up
        // to the request timeout.
        let give_up = std::time::Instant::now() + self.inner.options.request_timeout;
        let answer = loop {
            let sent = js
                .send_publish(subject.clone(), publish.clone())
                .await
                .map_err(|e| backend("register a queue", e))?;
            match sent.await {
                Err(e)
                    if e.kind() == PublishErrorKind::StreamNotFound
                        && std::time::Instant::now() < give_up =>
                {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                answer => break answer,
            }
        };
        match answer {
            Ok(ack) => Ok(ack.sequence),
            Err(e) if e.kind() == PublishErrorKind::WrongLastSequence => {
                let stream = self.stream(&n.registry_stream()).await?;
                let msg = stream
                    .get_last_raw_message_by_subject(&subject)
                    .await
                    .map_err(|e| backend("read a queue's registration", e))?;
                Ok(msg.sequence)
            }
            Err(e) => Err(backend("register a queue", e)),
        }
    }
}

/// The configuration of a queue's durable pull consumer.
fn consumer_config(subject: String, lease: Duration) -> pull::Config {
    pull::Config {
        durable_name: Some(CONSUMER.to_string()),
        ack_policy: AckPolicy::Explicit,
        ack_wait: lease.max(Duration::from_millis(100)),
        // Unlimited: the last attempt is enforced by this package, which moves the message
        // to the DLQ with its envelope rather than let the server drop it.
        max_deliver: -1,
        deliver_policy: DeliverPolicy::All,
        filter_subject: subject,
        max_ack_pending: 100_000,
        ..Default::default()
    }
}
