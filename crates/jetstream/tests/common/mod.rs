//! What the JetStream tests share: the server's address, fresh namespaces, and a NATS
//! server of a test's own (on a free loopback port, with a temporary store directory)
//! for the tests that stop or kill it.

#![allow(dead_code)]

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use deadletter_jetstream::{JetStream, JetStreamOptions};

/// The machine's server, or `DEADLETTER_NATS_URL`.
pub fn server_url() -> String {
    std::env::var("DEADLETTER_NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".into())
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

/// A nats-server process of the test's own.
pub struct OwnServer {
    child: Option<Child>,
    pub port: u16,
    pub store: tempfile::TempDir,
}

impl OwnServer {
    /// Starts `nats-server -js` on a free loopback port with a fresh store directory.
    pub fn start() -> OwnServer {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let store = tempfile::tempdir().unwrap();
        let mut server = OwnServer {
            child: None,
            port,
            store,
        };
        server.restart();
        server
    }

    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Starts the server (again), on the same port and store, and waits for its port.
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "already running");
        let child = spawn_server(self.port, self.store.path());
        self.child = Some(child);
        wait_for_port(self.port);
    }

    /// Stops the server the way a crash does (SIGKILL) and waits for it to be gone.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for OwnServer {
    fn drop(&mut self) {
        self.kill();
    }
}

fn spawn_server(port: u16, store: &Path) -> Child {
    Command::new("nats-server")
        .args(["-a", "127.0.0.1", "-p", &port.to_string(), "-js", "-sd"])
        .arg(store)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start nats-server (is the Debian package nats-server installed?)")
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
