//! The HTTP dashboard of a deadletter store, served from your own process: one page showing
//! every queue and its DLQ, failure charts, the DLQ list with filters, an entry's whole
//! envelope, and replay / delete buttons; a JSON API behind it; and a Prometheus `/metrics`
//! endpoint. The `deadletter serve` command runs it over a store directory; a program that
//! owns its store serves it the same way, beside its own work:
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use deadletter::{Config, Store};
//! use deadletter_dashboard::DashboardOptions;
//!
//! let store = Store::open("./data", Config::default())?;
//! let server = deadletter_dashboard::serve(store.clone(), DashboardOptions::default())?;
//! println!("dashboard: {}", server.url_with_token()); // 127.0.0.1:8080
//! // ... the program's own work with `store` ...
//! server.shutdown();
//! # Ok(()) }
//! ```
//!
//! The crate also holds the JSON form of DLQ envelopes ([`export`]), which the
//! `deadletter` command uses for `--json`, `export` and `import`.
//!
//! Routes: `GET /` (the page; its script and style are compiled into the binary, nothing is
//! fetched from elsewhere), `GET /api/stats`, `GET /api/dlq/{name}?filters`,
//! `GET /api/entry/{id}`, `GET /api/timeline/{name}?hours=N`, `POST /api/replay`,
//! `POST /api/delete`, `GET /metrics`. See [`api`] for the JSON shapes.
//!
//! Security model:
//! - it binds to 127.0.0.1 by default;
//! - every request must name an expected `Host` (the bound address, or `localhost` on a
//!   loopback bind), which defeats DNS rebinding;
//! - a mutating request must be a `POST` with a JSON body, carry the token in the
//!   `X-Deadletter-Token` header (a cross-site form cannot set a custom header, and a
//!   cross-site script cannot without a CORS preflight this server never grants), and, when
//!   the browser sends `Origin` (or `Referer`), come from the dashboard's own origin;
//! - the page is served with a strict content security policy and may not be framed
//!   (no click-jacking of its buttons);
//! - when bound to a non-loopback address, reads of the API need the token too (payloads may
//!   hold private data); `/metrics` stays open (counts only);
//! - every mutating request, done or refused, is logged as one line on stderr.

pub mod api;
pub mod export;
pub mod time;

use std::io::Read;
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use data_encoding::HEXLOWER;
use deadletter::Store;
use tiny_http::{Header, Method, Request, Response, Server};

const INDEX_HTML: &str = include_str!("assets/index.html");
const APP_JS: &str = include_str!("assets/app.js");
const STYLE_CSS: &str = include_str!("assets/style.css");

/// The header that carries the token on mutating requests.
pub const TOKEN_HEADER: &str = "X-Deadletter-Token";

/// Largest request body accepted.
const MAX_BODY: u64 = 1 << 20;

/// How the dashboard is served.
#[derive(Debug, Clone)]
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
}

impl Default for DashboardOptions {
    fn default() -> Self {
        DashboardOptions {
            bind: SocketAddr::from(([127, 0, 0, 1], 8080)),
            token: None,
            threads: 4,
            log_actions: true,
        }
    }
}

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
            DashboardError::Token(e) => {
                write!(
                    f,
                    "cannot get random bytes for a token from the system: {e}"
                )
            }
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

/// A running dashboard. Dropping it does not stop it; call [`Dashboard::shutdown`].
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

    /// Blocks until the server stops (it runs until the process ends or
    /// [`Dashboard::shutdown`] is called from elsewhere).
    pub fn wait(mut self) {
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Shared by the request threads.
struct Ctx {
    store: Store,
    token: String,
    /// `Host` header values accepted (`None`: any, for an unspecified bind address).
    hosts: Option<Vec<String>>,
    reads_need_token: bool,
    log_actions: bool,
}

/// Starts the dashboard on `options.bind`, serving `store`, in background threads.
pub fn serve(store: Store, options: DashboardOptions) -> Result<Dashboard, DashboardError> {
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

fn worker(server: &Server, ctx: &Ctx, stop: &AtomicBool) {
    while !stop.load(Ordering::Acquire) {
        match server.recv_timeout(Duration::from_millis(200)) {
            Ok(Some(request)) => handle(ctx, request),
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

/// Equality whose time does not depend on where the strings differ. Hand-written rather
/// than a crate (such as `subtle`): one comparison of a short token per request, with no
/// early exit, where a request costs milliseconds of network time; the length, which it
/// does reveal, is the same for every random token.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A response: status, content type, body.
pub(crate) struct Reply {
    pub(crate) status: u16,
    pub(crate) content_type: &'static str,
    pub(crate) body: String,
}

impl Reply {
    pub(crate) fn json(status: u16, value: &serde_json::Value) -> Reply {
        Reply {
            status,
            content_type: "application/json",
            body: value.to_string(),
        }
    }

    pub(crate) fn error(status: u16, message: impl Into<String>) -> Reply {
        Reply::json(status, &serde_json::json!({ "error": message.into() }))
    }

    fn text(status: u16, content_type: &'static str, body: impl Into<String>) -> Reply {
        Reply {
            status,
            content_type,
            body: body.into(),
        }
    }
}

fn header(name: &str, value: &str) -> Option<Header> {
    Header::from_bytes(name.as_bytes(), value.as_bytes()).ok()
}

fn header_value<'r>(request: &'r Request, name: &'static str) -> Option<&'r str> {
    request
        .headers()
        .iter()
        .find(|h| h.field.equiv(name))
        .map(|h| h.value.as_str())
}

fn handle(ctx: &Ctx, mut request: Request) {
    let reply = route(ctx, &mut request);
    let mut response = Response::from_string(reply.body).with_status_code(reply.status);
    let headers = [
        ("Content-Type", reply.content_type),
        ("Cache-Control", "no-store"),
        ("X-Content-Type-Options", "nosniff"),
        ("X-Frame-Options", "DENY"),
        ("Referrer-Policy", "same-origin"),
        (
            "Content-Security-Policy",
            "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; \
             connect-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
        ),
    ];
    for (name, value) in headers {
        if let Some(h) = header(name, value) {
            response.add_header(h);
        }
    }
    // The client may have gone away: nothing to do about it.
    let _ = request.respond(response);
}

fn route(ctx: &Ctx, request: &mut Request) -> Reply {
    if let Some(hosts) = &ctx.hosts {
        let host = header_value(request, "Host").unwrap_or("");
        if !hosts.iter().any(|h| h.eq_ignore_ascii_case(host)) {
            return Reply::error(
                421,
                format!("unexpected Host header {host:?}: use the address the dashboard printed"),
            );
        }
    }
    let url = request.url().to_string();
    let (path, query) = url.split_once('?').unwrap_or((&url, ""));
    let method = request.method().clone();
    match (&method, path) {
        (Method::Get, "/") | (Method::Get, "/index.html") => {
            Reply::text(200, "text/html; charset=utf-8", INDEX_HTML)
        }
        (Method::Get, "/app.js") => Reply::text(200, "text/javascript; charset=utf-8", APP_JS),
        (Method::Get, "/style.css") => Reply::text(200, "text/css; charset=utf-8", STYLE_CSS),
        (Method::Get, "/metrics") => Reply::text(
            200,
            "text/plain; version=0.0.4; charset=utf-8",
            ctx.store.metrics_snapshot().to_prometheus(),
        ),
        (Method::Get, "/healthz") => Reply::text(200, "text/plain; charset=utf-8", "ok\n"),
        (Method::Get, "/api/replay") | (Method::Get, "/api/delete") => {
            Reply::error(405, "this endpoint takes POST only")
        }
        (Method::Get, p) if p.starts_with("/api/") => {
            if ctx.reads_need_token && !token_ok(ctx, request) {
                return Reply::error(403, format!("missing or wrong {TOKEN_HEADER} header"));
            }
            api::get(&ctx.store, p, query)
        }
        (Method::Post, "/api/replay") | (Method::Post, "/api/delete") => {
            let action = if path == "/api/replay" {
                api::Action::Replay
            } else {
                api::Action::Delete
            };
            mutate(ctx, request, action)
        }
        (Method::Get, _) => Reply::error(404, format!("no such page {path:?}")),
        _ => Reply::error(405, "method not allowed"),
    }
}

fn token_ok(ctx: &Ctx, request: &Request) -> bool {
    header_value(request, TOKEN_HEADER)
        .is_some_and(|t| constant_time_eq(t.trim().as_bytes(), ctx.token.as_bytes()))
}

/// Checks that a browser's `Origin` (or, without it, `Referer`) names this dashboard.
fn same_origin(request: &Request) -> Result<(), String> {
    let host = header_value(request, "Host").unwrap_or("");
    let own = format!("http://{host}");
    if let Some(origin) = header_value(request, "Origin") {
        if !origin.eq_ignore_ascii_case(&own) {
            return Err(format!("cross-site request refused (Origin {origin})"));
        }
    } else if let Some(referer) = header_value(request, "Referer") {
        let ok = referer
            .get(..own.len())
            .is_some_and(|p| p.eq_ignore_ascii_case(&own))
            && matches!(referer.as_bytes().get(own.len()), None | Some(b'/'));
        if !ok {
            return Err(format!("cross-site request refused (Referer {referer})"));
        }
    }
    Ok(())
}

fn mutate(ctx: &Ctx, request: &mut Request, action: api::Action) -> Reply {
    let remote = request
        .remote_addr()
        .map(|a| a.to_string())
        .unwrap_or_else(|| "-".into());
    let what = action.path();
    let refuse = |status: u16, why: String| {
        if ctx.log_actions {
            eprintln!(
                "{} dashboard: refused POST {what} from {remote}: {why}",
                time::format_utc(ctx.store.config().clock.now_ms())
            );
        }
        Reply::error(status, why)
    };
    if !token_ok(ctx, request) {
        return refuse(403, format!("missing or wrong {TOKEN_HEADER} header"));
    }
    if let Err(why) = same_origin(request) {
        return refuse(403, why);
    }
    let json = header_value(request, "Content-Type").is_some_and(|c| {
        c.trim()
            .to_ascii_lowercase()
            .starts_with("application/json")
    });
    if !json {
        return refuse(
            415,
            "the body must be JSON (Content-Type: application/json)".into(),
        );
    }
    let mut body = Vec::new();
    if let Err(e) = request
        .as_reader()
        .take(MAX_BODY + 1)
        .read_to_end(&mut body)
    {
        return refuse(400, format!("cannot read the body: {e}"));
    }
    if body.len() as u64 > MAX_BODY {
        return refuse(413, format!("the body is larger than {MAX_BODY} bytes"));
    }
    let (reply, summary) = api::mutate(&ctx.store, action, &body);
    if ctx.log_actions {
        eprintln!(
            "{} dashboard: POST {what} from {remote}: {summary}",
            time::format_utc(ctx.store.config().clock.now_ms())
        );
    }
    reply
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_time_eq_compares() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
    }

    #[test]
    fn random_tokens_differ() {
        let a = random_token().unwrap();
        let b = random_token().unwrap();
        assert_eq!(a.len(), 32);
        assert_ne!(a, b);
    }
}
