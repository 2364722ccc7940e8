//! `serve`: the dashboard starts on the address it prints and answers its API.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};

use serde_json::Value;

use crate::fixture::fixture;
use crate::http;
use crate::run::{serial, BIN};

/// Starts `deadletter serve TARGET` on a free loopback port with token `t0k3n`; returns
/// the process (to kill) and the address it printed.
pub fn start(target: &str) -> (Child, SocketAddr) {
    start_with(target, &[])
}

/// [`start`] with more arguments.
fn start_with(target: &str, extra: &[&str]) -> (Child, SocketAddr) {
    let mut child = Command::new(BIN)
        .args([
            "serve",
            target,
            "--bind",
            "127.0.0.1:0",
            "--token",
            "t0k3n",
            "--json",
        ])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let info: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(info["token"], "t0k3n");
    let addr: SocketAddr = info["addr"].as_str().unwrap().parse().unwrap();
    (child, addr)
}

#[test]
fn serve_starts_and_answers() {
    let _serial = serial();
    let f = fixture();
    let (mut child, addr) = start(f.path());
    let reply = http::request(addr, "GET", "/api/stats", &[], "");
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(reply.status, 200, "{}", reply.body);
    let v: Value = serde_json::from_str(&reply.body).unwrap();
    assert_eq!(v["queues"][0]["dlq_size"], 4);
}

/// The dashboard's changes are recorded in the audit trail as made by its token's name.
#[test]
fn the_dashboard_changes_as_its_token_name() {
    let _serial = serial();
    let f = fixture();
    let id = f.entries()["ORD-4"].id();
    let (mut child, addr) = start_with(f.path(), &["--token-name", "ops-token"]);
    let body = format!(r#"{{"dlq":"orders-dlq","ids":[{id}]}}"#);
    let headers = [
        ("X-Deadletter-Token", "t0k3n"),
        ("Content-Type", "application/json"),
    ];
    let reply = http::request(addr, "POST", "/api/delete", &headers, &body);
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(reply.status, 200, "{}", reply.body);
    let store = f.open();
    let h = store.history(id).unwrap();
    let last = h.steps.last().unwrap();
    assert_eq!(last.actor.as_deref(), Some("ops-token"), "{h:?}");
}
