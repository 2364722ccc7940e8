//! What the JetStream tests share: the server's address, fresh namespaces, and a NATS
//! server of a test's own (on a free loopback port, with a temporary store directory)
//! for the tests that stop or kill it (`deadletter_jetstream::local_server`).

#![allow(dead_code)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use deadletter_jetstream::local_server::LocalServer;
use deadletter_jetstream::{JetStream, JetStreamOptions};

/// The shared server of the test run: `DEADLETTER_NATS_URL`, default the one `.ci/run`
/// starts (see [`deadletter_jetstream::local_server::DEFAULT_URL`]).
pub fn server_url() -> String {
    deadletter_jetstream::local_server::shared_url()
}

/// A namespace name no other test (in this process or another) uses.
pub fn unique_namespace(prefix: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!(
        "{prefix}_{}_{}_{nanos}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// A connection to a fresh namespace on `url`.
pub fn fresh_namespace(url: &str) -> JetStream {
    let options = JetStreamOptions::new(unique_namespace("t"));
    JetStream::connect_with(url, options).expect("connect to the NATS server")
}

/// A nats-server process of the test's own (JetStream, `sync_interval: always`, the
/// binary of `DEADLETTER_NATS_SERVER`), on a free loopback port with a temporary store.
pub struct OwnServer {
    server: LocalServer,
    pub port: u16,
    pub store: tempfile::TempDir,
}

impl OwnServer {
    /// Starts the server and waits for its port.
    pub fn start() -> OwnServer {
        let store = tempfile::tempdir().unwrap();
        let server =
            LocalServer::start(store.path()).expect("start a nats-server of the test's own");
        OwnServer {
            port: server.port(),
            server,
            store,
        }
    }

    pub fn url(&self) -> String {
        self.server.url()
    }

    /// Starts the server again, on the same port and store, and waits for its port.
    pub fn restart(&mut self) {
        assert!(!self.server.is_running(), "already running");
        self.server.restart().expect("restart the nats-server");
    }

    /// Stops the server the way a crash does (SIGKILL) and waits for it to be gone.
    pub fn kill(&mut self) {
        self.server.kill();
    }
}

/// Waits until something listens on `port` (up to 20 s).
pub fn wait_for_port(port: u16) {
    let give_up = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < give_up,
            "nats-server did not listen on {port}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub mod backend;
pub mod cluster;
pub mod workload;
