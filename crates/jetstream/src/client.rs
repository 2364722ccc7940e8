//! The connection: a NATS client and the Tokio runtime it runs on, behind blocking calls.
//!
//! The backend traits are synchronous (the worker pool is threads), so each operation is
//! an async block run to completion with [`Conn::run`] on the calling thread; the
//! runtime's own threads drive the connection (reading, writing, reconnecting). Calls from
//! many threads run concurrently and share one connection.
//!
//! Errors of the client become [`Error::Backend`](deadletter::Error::Backend) here, named
//! by the operation that failed.
//!
//! Invariant: a `Conn` exists only on a server of [`MINIMUM_SERVER`] or later (read from
//! the server's INFO at connect); an older one is refused with [`UnsupportedServer`].

use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_nats::jetstream;
use bytes::Bytes;
use deadletter::{Error, Result};

/// The client, its JetStream context and the runtime behind them.
pub(crate) struct Conn {
    runtime: tokio::runtime::Runtime,
    pub(crate) client: async_nats::Client,
    pub(crate) js: jetstream::Context,
    /// The client's counters; `connects` counts its (re)connections, a change of which
    /// means the server may have restarted in between (see `QueueInfo::trust_from`). It
    /// is counted before the new connection carries anything.
    stats: Arc<async_nats::Statistics>,
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
        check_version(&client.server_info().version)?;
        // The context spawns its task for publish acknowledgements: inside the runtime.
        let js = runtime.block_on(async {
            jetstream::ContextBuilder::new()
                .timeout(timeout)
                .build(client.clone())
        });
        let stats = client.statistics();
        Ok(Conn {
            runtime,
            client,
            js,
            stats,
        })
    }

    /// The count of (re)connections so far (see the field).
    pub(crate) fn epoch(&self) -> u64 {
        self.stats.connects.load(Ordering::Acquire)
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

/// The oldest nats-server the backend supports: 2.10.0, the first with
/// `sync_interval: always` (an fsync before every acknowledgement). On an older server
/// nothing it acknowledges is on disk until its next sync (every two minutes), and a
/// killed server comes back with its stream sequences and consumer state from then:
/// ids handed out again, acknowledgements and delivery counts forgotten. The backend's
/// "nothing acknowledged is lost" and "exactly once in the DLQ" cannot hold there.
pub const MINIMUM_SERVER: (u64, u64, u64) = (2, 10, 0);

/// A server older than [`MINIMUM_SERVER`], refused at connect (the source of the
/// `Error::Backend` that [`crate::JetStream::connect`] returns).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnsupportedServer {
    /// The version in the server's INFO, as it wrote it.
    pub version: String,
    /// The oldest version supported, [`MINIMUM_SERVER`].
    pub minimum: (u64, u64, u64),
}

impl std::fmt::Display for UnsupportedServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (a, b, c) = self.minimum;
        write!(
            f,
            "nats-server {} is not supported: deadletter-jetstream needs {a}.{b}.{c} or later \
             (with `sync_interval: always`), whose fsync per write keeps what it acknowledged",
            self.version
        )
    }
}

impl std::error::Error for UnsupportedServer {}

/// Refuses a server older than [`MINIMUM_SERVER`] (an unreadable version too).
fn check_version(version: &str) -> Result<()> {
    match parse_version(version) {
        Some(v) if v >= MINIMUM_SERVER => Ok(()),
        _ => Err(backend(
            "connect",
            UnsupportedServer {
                version: version.to_string(),
                minimum: MINIMUM_SERVER,
            },
        )),
    }
}

/// Reads `2.15.1`, `v2.9.10` or `2.12.0-RC.1` as (major, minor, patch).
pub(crate) fn parse_version(text: &str) -> Option<(u64, u64, u64)> {
    let core = text.trim().trim_start_matches('v');
    let core = core.split(['-', '+', ' ']).next()?;
    let mut parts = core.split('.').map(|p| p.parse::<u64>().ok());
    Some((
        parts.next()??,
        parts.next()??,
        parts.next().unwrap_or(Some(0))?,
    ))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_read_and_old_servers_refused() {
        assert_eq!(parse_version("2.15.1"), Some((2, 15, 1)));
        assert_eq!(parse_version("v2.9.10"), Some((2, 9, 10)));
        assert_eq!(parse_version("2.12.0-RC.1"), Some((2, 12, 0)));
        assert_eq!(parse_version("2.10"), Some((2, 10, 0)));
        assert_eq!(parse_version("x.y"), None);
        assert!(check_version("2.10.0").is_ok());
        assert!(check_version("2.15.1").is_ok());
        for old in ["2.9.10", "2.9.25", "1.4.0", "garbage"] {
            let err = check_version(old).unwrap_err();
            let source = std::error::Error::source(&err)
                .and_then(|s| s.downcast_ref::<UnsupportedServer>())
                .expect("an UnsupportedServer");
            assert_eq!(source.version, old);
            assert!(err.to_string().contains("2.10.0 or later"), "{err}");
        }
    }
}
