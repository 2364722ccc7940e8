//! A dashboard bound beyond loopback: every read (the API and `/metrics`, which names queues
//! and error kinds) needs the token, in `X-Deadletter-Token` or as `Authorization: Bearer`
//! (a Prometheus scrape's form); a change still needs the header. On loopback `/metrics`
//! stays open, for a local scraper.
//!
//! The server listens on 0.0.0.0 (the unspecified address: not loopback) and the test
//! talks to it through 127.0.0.1 only.

use std::net::SocketAddr;

mod common;

use common::http::request;
use common::store::small_store;
use deadletter_dashboard::{self as dashboard, Dashboard, DashboardOptions};

const T0: u64 = 1_800_000_000_000;
const TOKEN: &str = "s3cret-token";

/// A server on `ip` (port 0) over a store with one queue, and the loopback address to
/// reach it at.
fn serve_on(ip: [u8; 4]) -> (tempfile::TempDir, Dashboard, SocketAddr) {
    let dir = tempfile::tempdir().unwrap();
    let (store, _clock) = small_store(dir.path(), T0);
    store.queue("orders").unwrap().enqueue(b"ORD-1").unwrap();
    let server = dashboard::serve(
        store,
        DashboardOptions::default()
            .bind(SocketAddr::from((ip, 0)))
            .token(TOKEN)
            .log_actions(false),
    )
    .unwrap();
    let reach = SocketAddr::from(([127, 0, 0, 1], server.local_addr().port()));
    (dir, server, reach)
}

#[test]
fn metrics_need_the_token_beyond_loopback() {
    let (_dir, server, addr) = serve_on([0, 0, 0, 0]);
    assert!(!server.local_addr().ip().is_loopback());
    let bearer = format!("Bearer {TOKEN}");
    for (headers, want) in [
        (vec![], 403),
        (vec![("X-Deadletter-Token", "wrong")], 403),
        (vec![("Authorization", "Bearer wrong")], 403),
        (vec![("Authorization", TOKEN)], 403), // no scheme
        (vec![("X-Deadletter-Token", TOKEN)], 200),
        (vec![("Authorization", bearer.as_str())], 200),
    ] {
        let reply = request(addr, "GET", "/metrics", &headers, "");
        assert_eq!(reply.status, want, "{headers:?}: {}", reply.body);
        if want == 200 {
            let kind = reply.header("content-type").unwrap_or("");
            assert!(kind.starts_with("text/plain; version=0.0.4"), "{kind}");
            assert!(reply
                .body
                .contains("deadletter_queue_depth{queue=\"orders\"} 1\n"));
        } else {
            assert!(!reply.body.contains("orders"), "{}", reply.body);
            assert!(
                reply.body.contains("Authorization: Bearer"),
                "{}",
                reply.body
            );
        }
    }
    // The API's reads take the bearer form too.
    assert_eq!(request(addr, "GET", "/api/stats", &[], "").status, 403);
    let auth = [("Authorization", bearer.as_str())];
    assert_eq!(request(addr, "GET", "/api/stats", &auth, "").status, 200);
    // A change needs the header: the bearer form is for reads.
    let body = r#"{"dlq":"orders-dlq","ids":[1]}"#;
    let json = ("Content-Type", "application/json");
    let refused = request(addr, "POST", "/api/delete", &[auth[0], json], body);
    assert_eq!(refused.status, 403, "{}", refused.body);
    // Liveness stays open: it says nothing about the store.
    assert_eq!(request(addr, "GET", "/healthz", &[], "").status, 200);
    server.shutdown();
}

#[test]
fn metrics_stay_open_on_loopback() {
    let (_dir, server, addr) = serve_on([127, 0, 0, 1]);
    let reply = request(addr, "GET", "/metrics", &[], "");
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(reply
        .body
        .contains("deadletter_queue_depth{queue=\"orders\"} 1\n"));
    server.shutdown();
}
