//! Starting and stopping the dashboard: the listening socket, the token, and the request
//! threads, each of which answers requests through [`crate::routes`] until the dashboard is
//! shut down.

use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use data_encoding::HEXLOWER;
use deadletter::Store;
use tiny_http::Server;

use crate::options::DashboardOptions;
use crate::routes::{self, Ctx};
use crate::source::Source;

/// Why the dashboard could not start.
#[derive(Debug)]
#[non_exhaustive]
pub enum DashboardError {
    /// The address could not be bound.
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The error.
        source: std::io::Error,
    },
    /// No random token could be made (the operating system's random generator failed).
    Token(std::io::Error),
    /// A given token is empty or holds characters a header cannot carry.
    InvalidToken,
    /// The HTTP server or one of its threads could not start.
    Start(String),
}

impl std::fmt::Display for DashboardError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DashboardError::Bind { addr, source } => write!(f, "cannot listen on {addr}: {source}"),
            DashboardError::Token(e) => write!(f, "cannot make a random token: {e}"),
            DashboardError::InvalidToken => f.write_str(
                "the token must be 1 to 200 visible ASCII characters (no spaces or quotes)",
            ),
            DashboardError::Start(e) => write!(f, "cannot start the HTTP server: {e}"),
        }
    }
}

impl std::error::Error for DashboardError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            DashboardError::Bind { source, .. } => Some(source),
            DashboardError::Token(e) => Some(e),
            _ => None,
        }
    }
}

/// A running dashboard (see [`serve`]). Dropping it does not stop it; call
/// [`Dashboard::shutdown`], or [`Dashboard::wait`] in a program that only serves.
///
/// ```no_run
/// use deadletter::{Config, Store};
/// use deadletter_dashboard::DashboardOptions;
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// // What `deadletter serve ./data` does: serve the store until the process is stopped.
/// let store = Store::open("./data", Config::for_existing_store("./data"))?;
/// let server = deadletter_dashboard::serve(store, DashboardOptions::default())?;
/// eprintln!("serving {}", server.url_with_token()); // http://127.0.0.1:8080/#token=...
/// server.wait(); // never returns
/// # Ok(())
/// # }
/// ```
pub struct Dashboard {
    addr: SocketAddr,
    token: String,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for Dashboard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dashboard")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl Dashboard {
    /// The address it listens on (with the real port when port 0 was asked for).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The token mutating requests must carry.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// The page's address.
    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    /// The page's address with the token in the fragment: the page reads it from there
    /// (a fragment is never sent to a server, so it stays out of logs).
    pub fn url_with_token(&self) -> String {
        format!("http://{}/#token={}", self.addr, self.token)
    }

    /// Stops serving and waits for the request threads to finish.
    pub fn shutdown(mut self) {
        self.stop.store(true, Ordering::Release);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }

    /// Blocks for as long as the server runs, that is until the process ends: for a
    /// program whose only job is to serve.
    pub fn wait(mut self) {
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Starts the dashboard on `options.bind`, serving `store`, in background threads, and
/// returns at once; the crate documentation has an example. Fails with
/// [`DashboardError::Bind`] when the address is taken and
/// [`DashboardError::InvalidToken`] when a given token cannot be sent in a header.
pub fn serve(store: Store, options: DashboardOptions) -> Result<Dashboard, DashboardError> {
    serve_source(store, options)
}

/// Starts the dashboard of any [`Source`] of queues and DLQs (a [`Store`] is one; see
/// [`crate::source`]), as [`serve`] does for a store.
pub fn serve_source<S: Source>(
    store: S,
    options: DashboardOptions,
) -> Result<Dashboard, DashboardError> {
    let token = match options.token {
        Some(t) => {
            if t.is_empty()
                || t.len() > 200
                || !t
                    .bytes()
                    .all(|b| b.is_ascii_graphic() && b != b'"' && b != b'\'')
            {
                return Err(DashboardError::InvalidToken);
            }
            t
        }
        None => random_token().map_err(DashboardError::Token)?,
    };
    let listener = TcpListener::bind(options.bind).map_err(|source| DashboardError::Bind {
        addr: options.bind,
        source,
    })?;
    let addr = listener
        .local_addr()
        .map_err(|source| DashboardError::Bind {
            addr: options.bind,
            source,
        })?;
    let server = Arc::new(
        Server::from_listener(listener, None).map_err(|e| DashboardError::Start(e.to_string()))?,
    );
    let ip = addr.ip();
    let hosts = if ip.is_unspecified() {
        None
    } else {
        let port = addr.port();
        let mut hosts = vec![addr.to_string()];
        if ip.is_loopback() {
            hosts.extend([
                format!("localhost:{port}"),
                format!("127.0.0.1:{port}"),
                format!("[::1]:{port}"),
            ]);
        }
        Some(hosts)
    };
    let ctx = Arc::new(Ctx {
        store,
        token: token.clone(),
        hosts,
        reads_need_token: !ip.is_loopback(),
        log_actions: options.log_actions,
        extra_metrics: options.extra_metrics.clone(),
    });
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    for i in 0..options.threads.max(1) {
        let (server, ctx, flag) = (Arc::clone(&server), Arc::clone(&ctx), Arc::clone(&stop));
        let handle = std::thread::Builder::new()
            .name(format!("deadletter-http-{i}"))
            .spawn(move || worker(&server, &ctx, &flag))
            .map_err(|e| {
                stop.store(true, Ordering::Release);
                DashboardError::Start(e.to_string())
            })?;
        threads.push(handle);
    }
    Ok(Dashboard {
        addr,
        token,
        stop,
        threads,
    })
}

fn worker<S: Source>(server: &Server, ctx: &Ctx<S>, stop: &AtomicBool) {
    while !stop.load(Ordering::Acquire) {
        match server.recv_timeout(Duration::from_millis(200)) {
            Ok(Some(request)) => routes::handle(ctx, request),
            Ok(None) => {}
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// 16 random bytes from the operating system's generator, hex-encoded.
fn random_token() -> std::io::Result<String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)?;
    Ok(HEXLOWER.encode(&bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_tokens_differ() {
        let a = random_token().unwrap();
        let b = random_token().unwrap();
        assert_eq!(a.len(), 32);
        assert_ne!(a, b);
    }
}
