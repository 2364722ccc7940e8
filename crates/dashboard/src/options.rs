//! How the dashboard is served: the address, the token, the request threads, the log of
//! changes and the extra text of `/metrics`, set with builder methods.

use std::net::SocketAddr;
use std::sync::Arc;

/// How the dashboard is served: [`DashboardOptions::default`], then the builder methods
/// (new options can be added without breaking a caller).
///
/// ```
/// use deadletter_dashboard::DashboardOptions;
/// let options = DashboardOptions::default()
///     .bind(([127, 0, 0, 1], 0).into()) // a free port
///     .token("s3cret")
///     .log_actions(false);
/// assert_eq!(options.threads, 4);
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct DashboardOptions {
    /// Address to listen on (default 127.0.0.1:8080; port 0 picks a free port).
    pub bind: SocketAddr,
    /// The token mutating requests must carry (`None`: 16 random bytes from the operating
    /// system, hex-encoded).
    pub token: Option<String>,
    /// Threads handling requests.
    pub threads: usize,
    /// Log each mutating request to stderr.
    pub log_actions: bool,
    /// More Prometheus text appended to `/metrics` (such as a forwarder's metrics, from
    /// the process that serves the store).
    pub extra_metrics: Option<ExtraMetrics>,
}

/// A source of Prometheus text appended to `/metrics` ([`DashboardOptions::extra_metrics`]),
/// called at each request.
#[derive(Clone)]
pub struct ExtraMetrics(pub Arc<dyn Fn() -> String + Send + Sync>);

impl std::fmt::Debug for ExtraMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ExtraMetrics(..)")
    }
}

impl Default for DashboardOptions {
    fn default() -> Self {
        DashboardOptions {
            bind: SocketAddr::from(([127, 0, 0, 1], 8080)),
            token: None,
            threads: 4,
            log_actions: true,
            extra_metrics: None,
        }
    }
}

impl DashboardOptions {
    /// Listens on `addr` (port 0 picks a free port; [`Dashboard::local_addr`](crate::Dashboard::local_addr) tells which).
    pub fn bind(mut self, addr: SocketAddr) -> Self {
        self.bind = addr;
        self
    }

    /// Mutating requests must carry `token` (1 to 200 visible ASCII characters, no quotes)
    /// instead of a random one.
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// Handles requests on `n` threads (at least 1).
    pub fn threads(mut self, n: usize) -> Self {
        self.threads = n;
        self
    }

    /// Appends the text `metrics` returns (Prometheus families of its own) to each
    /// `/metrics` answer.
    pub fn extra_metrics(mut self, metrics: impl Fn() -> String + Send + Sync + 'static) -> Self {
        self.extra_metrics = Some(ExtraMetrics(Arc::new(metrics)));
        self
    }

    /// Whether to log each mutating request, done or refused, to stderr.
    pub fn log_actions(mut self, on: bool) -> Self {
        self.log_actions = on;
        self
    }
}
