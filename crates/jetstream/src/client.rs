//! The connection: a NATS client and the Tokio runtime it runs on, behind blocking calls.
//!
//! The backend traits are synchronous (the worker pool is threads), so each operation is
//! an async block run to completion with [`Conn::run`] on the calling thread; the
//! runtime's own threads drive the connection (reading, writing, reconnecting). Calls from
//! many threads run concurrently and share one connection.
//!
//! Errors of the client become [`Error::Backend`](deadletter::Error::Backend) here, named
//! by the operation that failed.

use std::future::Future;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_nats::jetstream;
use bytes::Bytes;
use deadletter::{Error, Result};

/// The client, its JetStream context and the runtime behind them.
pub(crate) struct Conn {
    runtime: tokio::runtime::Runtime,
    pub(crate) client: async_nats::Client,
    pub(crate) js: jetstream::Context,
}

impl Conn {
    /// Connects to `url` (such as `nats://127.0.0.1:4222`), waiting at most `timeout` for
    /// the connection and for each request's answer.
    pub(crate) fn connect(url: &str, timeout: Duration) -> Result<Conn> {
        Self::connect_with(url, timeout, async_nats::ConnectOptions::new())
    }

    /// Connects like [`Conn::connect`], but the connection is never re-established: once
    /// it drops, every request fails, and what the client still held unsent is never sent
    /// (it dies with the runtime when the `Conn` is dropped). Over one such connection the
    /// server receives publishes in the order they were sent, with no gap: if one is lost,
    /// so is every later one. The forwarder relies on this to keep each queue's order.
    pub(crate) fn connect_once(url: &str, timeout: Duration) -> Result<Conn> {
        let calls = std::sync::atomic::AtomicUsize::new(0);
        let options = async_nats::ConnectOptions::new()
            // The client makes at least one attempt after a disconnect (0 means no
            // limit); it waits before it, and this delay outlives any `Conn`.
            .max_reconnects(1)
            .reconnect_delay_callback(move |_| {
                if calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed) == 0 {
                    Duration::ZERO
                } else {
                    Duration::from_secs(24 * 3600)
                }
            });
        Self::connect_with(url, timeout, options)
    }

    fn connect_with(
        url: &str,
        timeout: Duration,
        options: async_nats::ConnectOptions,
    ) -> Result<Conn> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("deadletter-nats")
            .enable_all()
            .build()
            .map_err(|e| backend("start the client runtime", e))?;
        let client = runtime
            .block_on(
                options
                    .connection_timeout(timeout)
                    .request_timeout(Some(timeout))
                    .connect(url),
            )
            .map_err(|e| backend("connect", e))?;
        // The context spawns its task for publish acknowledgements: inside the runtime.
        let js = runtime.block_on(async {
            jetstream::ContextBuilder::new()
                .timeout(timeout)
                .build(client.clone())
        });
        Ok(Conn {
            runtime,
            client,
            js,
        })
    }

    /// Runs `f` to completion on this thread.
    pub(crate) fn run<F: Future>(&self, f: F) -> F::Output {
        self.runtime.block_on(f)
    }

    /// Sends an acknowledgement (`+ACK`, `-NAK`, `+TERM`, `+WPI`) to a delivery's reply
    /// subject and waits for the server to confirm it.
    pub(crate) async fn ack_confirmed(&self, reply: &str, kind: Bytes) -> Result<()> {
        self.client
            .request(reply.to_string(), kind)
            .await
            .map(|_| ())
            .map_err(|e| backend("acknowledge", e))
    }
}

/// A client error as the crate's error, naming the operation.
pub(crate) fn backend(
    op: &'static str,
    e: impl Into<Box<dyn std::error::Error + Send + Sync>>,
) -> Error {
    Error::backend("jetstream", op, e)
}

/// Milliseconds since the Unix epoch, by this machine's clock.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// The acknowledgement bodies.
pub(crate) mod acks {
    use std::time::Duration;

    use bytes::Bytes;

    pub(crate) fn ack() -> Bytes {
        Bytes::from_static(b"+ACK")
    }
    pub(crate) fn term() -> Bytes {
        Bytes::from_static(b"+TERM")
    }
    pub(crate) fn progress() -> Bytes {
        Bytes::from_static(b"+WPI")
    }
    /// A negative acknowledgement: redeliver after `delay`.
    pub(crate) fn nak(delay: Duration) -> Bytes {
        format!("-NAK {{\"delay\":{}}}", delay.as_nanos()).into()
    }
}
