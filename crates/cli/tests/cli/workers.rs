//! `workers`: a real owner process (this test binary run again as a child) runs a worker
//! pool whose handler fails, with its control socket on, and `deadletter workers` shows the
//! pool (queue, workers, name) and a failure rate above zero; once the owner stops its
//! pool, `workers` shows none, and once the owner is gone it says the pools cannot be
//! seen. An owner of the previous protocol (a fake one on the socket) gets a clear refusal.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use deadletter::pool::Retry;
use deadletter::{Config, Failure, Message, Store, WorkerPool};
use serde_json::Value;

use crate::run::{fails, json, ok, serial};

/// The owner process: runs only when the parent sets `DEADLETTER_TEST_WORKERS_OWNER` (the
/// store directory). It holds the store with its control socket, runs a pool of three
/// workers named `payments` on `orders` whose handler always fails (retried every 20 ms),
/// prints `ready` once it has failed a few times, stops the pool on the line `stop-pool`
/// (printing `pool stopped`), and exits when its standard input closes.
#[test]
#[ignore = "the owner process of workers::the_pools_of_a_running_owner_are_listed"]
fn workers_owner_process() {
    let Ok(dir) = std::env::var("DEADLETTER_TEST_WORKERS_OWNER") else {
        return;
    };
    let config = Config::default()
        .segment_size(1 << 20)
        .max_message_size(64 << 10)
        .preallocate(false)
        .control_socket(true);
    let store = Store::open(&dir, config).expect("owner opens the store");
    let orders = store.queue("orders").unwrap();
    store.queue("idle").unwrap();
    let pool = WorkerPool::new(&orders)
        .workers(3)
        .name("payments")
        .retry(Retry::fixed(Duration::from_millis(20)).max_attempts(1_000))
        .start(|_: &Message| Err(Failure::transient("GatewayTimeout", "no answer")))
        .unwrap();
    for i in 0..4 {
        orders.enqueue(format!("PAY-{i}")).unwrap();
    }
    while pool.counters().retried < 8 {
        std::thread::sleep(Duration::from_millis(5));
    }
    println!("ready");
    let mut stdin = std::io::stdin().lock();
    let mut line = String::new();
    while stdin.read_line(&mut line).unwrap_or(0) > 0 {
        if line.trim() == "stop-pool" {
            break;
        }
        line.clear();
    }
    pool.shutdown(Duration::from_secs(10)).unwrap();
    println!("pool stopped");
    line.clear();
    let _ = stdin.read_line(&mut line);
}

struct Owner {
    child: Child,
    out: BufReader<ChildStdout>,
}

impl Owner {
    fn start(dir: &Path) -> Owner {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "workers::workers_owner_process",
                "--ignored",
                "--nocapture",
                "-q",
            ])
            .env("DEADLETTER_TEST_WORKERS_OWNER", dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the owner process");
        let out = BufReader::new(child.stdout.take().unwrap());
        let mut owner = Owner { child, out };
        owner.wait_for("ready");
        owner
    }

    fn wait_for(&mut self, prefix: &str) {
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut line = String::new();
        while Instant::now() < deadline {
            line.clear();
            if self.out.read_line(&mut line).unwrap() == 0 {
                panic!("the owner exited before printing {prefix:?}");
            }
            if line.starts_with(prefix) {
                return;
            }
        }
        panic!("the owner printed no {prefix:?}");
    }

    fn say(&mut self, line: &str) {
        let stdin = self.child.stdin.as_mut().unwrap();
        stdin.write_all(format!("{line}\n").as_bytes()).unwrap();
        stdin.flush().unwrap();
    }

    fn stop(mut self) {
        drop(self.child.stdin.take());
        assert!(self.child.wait().unwrap().success(), "the owner failed");
    }
}

fn queue<'a>(doc: &'a Value, name: &str) -> &'a Value {
    doc["queues"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["queue"] == name)
        .unwrap_or_else(|| panic!("no queue {name} in {doc}"))
}

#[test]
fn the_pools_of_a_running_owner_are_listed() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("store");
    let mut owner = Owner::start(&dir);
    let d = dir.to_str().unwrap();

    let doc = json(&["--json", "workers", d]);
    assert!(doc["owner_pid"].as_u64().is_some(), "{doc}");
    assert!(doc["note"].is_null(), "{doc}");
    let orders = queue(&doc, "orders");
    let pool = &orders["pools"][0];
    assert_eq!(pool["queue"], "orders");
    assert_eq!(pool["name"], "payments");
    assert_eq!(pool["kind"], "Threads");
    assert_eq!(pool["workers"], 3);
    assert_eq!(pool["pid"], doc["owner_pid"]);
    let minute = &orders["rates"]["last_minute"];
    assert!(minute["retried"].as_u64().unwrap() >= 8, "{minute}");
    assert!(
        minute["per_second"]["failed"].as_f64().unwrap() > 0.0,
        "{minute}"
    );
    assert_eq!(minute["enqueued"], 4);
    assert_eq!(minute["acked"], 0);
    assert!(queue(&doc, "idle")["pools"].as_array().unwrap().is_empty());

    let text = ok(&["workers", d]);
    assert!(text.contains("payments"), "{text}");
    assert!(text.contains("idle: no pool attached"), "{text}");
    assert!(!text.contains("orders: no pool attached"), "{text}");
    // One queue only; a typo is refused with the nearest name.
    let only = json(&["--json", "workers", d, "--queue", "orders"]);
    assert_eq!(only["queues"].as_array().unwrap().len(), 1);
    let refused = fails(&["workers", d, "--queue", "ordres"], 1, "unknown queue");
    assert!(refused.contains(r#"did you mean "orders"?"#), "{refused}");
    // `stats` shows the rates too, asked of the same owner.
    let stats = json(&["--json", "stats", d]);
    let in_stats = queue(&stats, "orders");
    assert_eq!(in_stats["pools"].as_array().unwrap().len(), 1, "{in_stats}");
    assert!(
        in_stats["rates"]["last_minute"]["retried"]
            .as_u64()
            .unwrap()
            >= 8
    );

    // The dashboard beside the owner (read-only snapshots) asks it too: its workers panel,
    // and the pool gauges of its /metrics.
    let (mut served, addr) = serve_read_only(d);
    let reply = crate::http::request(addr, "GET", "/api/workers", &[], "");
    let panel: Value = serde_json::from_str(&reply.body).unwrap();
    assert_eq!(panel["available"], true, "{panel}");
    assert_eq!(
        queue(&panel, "orders")["pools"][0]["name"],
        "payments",
        "{panel}"
    );
    let metrics = crate::http::request(addr, "GET", "/metrics", &[], "").body;
    assert!(
        metrics.contains("deadletter_pool_workers{queue=\"orders\"} 3"),
        "{metrics}"
    );
    served.kill().unwrap();
    served.wait().unwrap();

    // The owner stops its pool: none is listed, and the queue says so.
    owner.say("stop-pool");
    owner.wait_for("pool stopped");
    let doc = json(&["--json", "workers", d]);
    assert!(
        queue(&doc, "orders")["pools"]
            .as_array()
            .unwrap()
            .is_empty(),
        "{doc}"
    );
    let text = ok(&["workers", d]);
    assert!(text.contains("orders: no pool attached"), "{text}");

    // The owner is gone: nobody to ask, and the command says so.
    owner.stop();
    let doc = json(&["--json", "workers", d]);
    assert!(doc["owner_pid"].is_null(), "{doc}");
    assert!(
        doc["note"].as_str().unwrap().contains("control socket"),
        "{doc}"
    );
    assert!(queue(&doc, "orders")["rates"].is_null(), "{doc}");
    let text = ok(&["workers", d]);
    assert!(text.contains("orders: no pool attached"), "{text}");
    assert!(text.contains("note: "), "{text}");
}

/// Starts `deadletter serve DIR --read-only` on a free loopback port; returns the process
/// and the address it printed.
fn serve_read_only(dir: &str) -> (Child, std::net::SocketAddr) {
    let mut child = Command::new(crate::run::BIN)
        .args([
            "serve",
            dir,
            "--read-only",
            "--bind",
            "127.0.0.1:0",
            "--json",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let info: Value = serde_json::from_str(&line).unwrap();
    (child, info["addr"].as_str().unwrap().parse().unwrap())
}

/// A frame of control protocol 5 holding `body` (bincode, as that release encodes it).
fn frame_v5(body: &[u8]) -> Vec<u8> {
    let mut frame = ((body.len() + 2) as u32).to_le_bytes().to_vec();
    frame.extend_from_slice(&5u16.to_le_bytes());
    frame.extend_from_slice(body);
    frame
}

#[test]
fn an_owner_of_the_previous_protocol_is_refused_clearly() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("store");
    Store::open(&dir, Config::fast())
        .unwrap()
        .queue("orders")
        .unwrap();
    // An owner that speaks protocol 5 only: `Hello` in 5 is answered (pid 4242), any other
    // version refused with `Unsupported { supported: 5 }`, in version 5.
    let listener = UnixListener::bind(dir.join("control.sock")).unwrap();
    let server = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        let mut versions = Vec::new();
        loop {
            let mut head = [0u8; 4];
            if conn.read_exact(&mut head).is_err() {
                return versions;
            }
            let mut rest = vec![0u8; u32::from_le_bytes(head) as usize];
            conn.read_exact(&mut rest).unwrap();
            let version = u16::from_le_bytes([rest[0], rest[1]]);
            versions.push(version);
            let reply: &[u8] = if version == 5 {
                // Reply::Hello { protocol: 5, pid: 4242 }
                &[0, 5, 0xFB, 0x92, 0x10]
            } else {
                // Reply::Failed(RemoteError::Unsupported { version: 8, supported: 5 })
                &[8, 7, 8, 5]
            };
            conn.write_all(&frame_v5(reply)).unwrap();
        }
    });
    let d = dir.to_str().unwrap();
    let message = fails(&["workers", d], 1, "older deadletter");
    assert!(message.contains("pid 4242"), "{message}");
    assert!(message.contains("upgrade"), "{message}");
    // Greeted in this build's version, then in 5; the worker list was never asked for.
    assert_eq!(
        server.join().unwrap(),
        [deadletter::control::PROTOCOL_VERSION, 5]
    );
}
