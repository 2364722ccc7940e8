//! The HTTP dashboard of a deadletter store, served from your own process: one page showing
//! every queue and its DLQ, failure charts, the DLQ list with filters, an entry's whole
//! envelope, and replay / delete buttons; a JSON API behind it; and a Prometheus `/metrics`
//! endpoint. The `deadletter serve` command runs it over a store directory; a program that
//! owns its store serves it the same way, beside its own work:
//!
//! ```
//! use std::io::{Read, Write};
//! use std::net::TcpStream;
//! use deadletter::{Config, Store};
//! use deadletter_dashboard::DashboardOptions;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let dir = std::env::temp_dir().join(format!("deadletter-doc-dashboard-{}", std::process::id()));
//! # let _ = std::fs::remove_dir_all(&dir);
//! let store = Store::open(&dir, Config::fast())?;
//! let options = DashboardOptions::default().bind(([127, 0, 0, 1], 0).into()); // a free port
//! let server = deadletter_dashboard::serve(store.clone(), options)?;
//! println!("dashboard: {}", server.url_with_token()); // open it in a browser
//!
//! // ... the program's own work with `store` ...
//! store.queue("orders")?.enqueue(b"ORD-1")?;
//!
//! // What Prometheus would scrape.
//! let mut http = TcpStream::connect(server.local_addr())?;
//! let host = server.local_addr();
//! write!(http, "GET /metrics HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n")?;
//! let mut reply = String::new();
//! http.read_to_string(&mut reply)?;
//! assert!(reply.starts_with("HTTP/1.1 200"));
//! assert!(reply.contains(r#"deadletter_queue_depth{queue="orders"} 1"#));
//!
//! server.shutdown();
//! # drop(store);
//! # std::fs::remove_dir_all(&dir).ok();
//! # Ok(())
//! # }
//! ```
//!
//! It serves any [`Source`] of queues and DLQs ([`serve_source`]): a store, or another
//! backend through a small adapter (`deadletter serve nats://...` serves a JetStream
//! namespace).
//!
//! The crate also holds the JSON form of DLQ envelopes ([`export`]), which the
//! `deadletter` command uses for `--json`, `export` and `import`.
//!
//! Routes: `GET /` (the page; its script and style are compiled into the binary, nothing is
//! fetched from elsewhere), `GET /api/stats`, `GET /api/dlq/{name}?filters`,
//! `GET /api/entry/{id}`, `GET /api/timeline/{name}?hours=N`, `GET /api/workers` (the
//! pools attached and the rates: [`workers`]), `POST /api/replay`,
//! `POST /api/delete`, `POST /api/mark`, `GET /metrics`. See [`api`] for the JSON shapes.
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
//! - when bound to a non-loopback address, reads of the API and `/metrics` need the token
//!   too (payloads may hold private data; the metrics name queues and error kinds), in the
//!   header or as `Authorization: Bearer TOKEN` (what a Prometheus scrape configuration
//!   sends); on loopback `/metrics` stays open, for a local scraper;
//! - every mutating request, done or refused, is logged as one line on stderr.

#![warn(missing_docs)]

pub mod api;
mod change;
pub mod export;
pub mod guarded;
mod options;
mod query;
mod reply;
mod routes;
mod server;
pub mod source;
pub mod suggest;
pub mod time;
pub mod workers;

pub use options::{DashboardOptions, ExtraMetrics};
pub use routes::TOKEN_HEADER;
pub use server::{serve, serve_source, Dashboard, DashboardError};
pub use source::Source;
