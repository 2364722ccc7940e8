//! A store held by a running application: a real owner process (this test binary run
//! again as a child) keeps enqueuing and working while the real `deadletter` binary runs
//! every read command against the same directory, and every change, which the owner
//! carries out through its control socket. Afterwards nothing is lost or doubled. A second
//! test runs the reads on a read-only copy, checking nothing in it changed.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use deadletter::pool::Retry;
use deadletter::{Config, Failure, Message, Store, WorkerPool};

use crate::fixture::{dir_snapshot, fixture};
use crate::run::{fails, ids_of, json, ok, run, serial, stdout};

/// The owner's configuration: durable, small unpreallocated segments, the control socket.
fn owner_config() -> Config {
    Config::default()
        .segment_size(1 << 20)
        .max_message_size(64 << 10)
        .preallocate(false)
        .control_socket(true)
}

/// The owner process: runs only when the parent sets `DEADLETTER_TEST_OWNER` (the store
/// directory). It holds the store, enqueues `ORD-n` on `orders` every few milliseconds
/// (every fifth one `bad-ORD-n`, which its worker pool dead-letters), prints `ready` once
/// the DLQ holds a few entries, and stops when its standard input closes: it drains the
/// queue and prints `enqueued N`.
#[test]
#[ignore = "the owner process of live::a_running_owner_serves_every_command"]
fn owner_process() {
    let Ok(dir) = std::env::var("DEADLETTER_TEST_OWNER") else {
        return;
    };
    let store = Store::open(&dir, owner_config()).expect("owner opens the store");
    let orders = store.queue("orders").unwrap();
    store.queue("held").unwrap();
    let pool = WorkerPool::new(&orders)
        .workers(2)
        .name("owner-worker")
        .retry(Retry::exponential(Duration::from_millis(1)).max_attempts(1))
        .start(|m: &Message| {
            if m.payload().starts_with(b"bad") {
                Err(Failure::permanent("BadOrder", "rejected by the owner"))
            } else {
                Ok(())
            }
        })
        .unwrap();
    let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = std::io::stdin().read_line(&mut line);
        let _ = stop_tx.send(());
    });
    let mut n = 0u64;
    let mut said_ready = false;
    loop {
        let payload = if n.is_multiple_of(5) {
            format!("bad-ORD-{n}")
        } else {
            format!("ORD-{n}")
        };
        orders.enqueue(payload).unwrap();
        n += 1;
        if !said_ready && orders.dlq().len() >= 6 {
            println!("ready");
            said_ready = true;
        }
        if stop_rx.recv_timeout(Duration::from_millis(3)).is_ok() {
            break;
        }
    }
    pool.run_until_idle().unwrap();
    pool.shutdown(Duration::from_secs(10)).unwrap();
    println!("enqueued {n}");
}

/// An owner process: this test binary run again as a child, running the ignored test
/// `owner_test` (which holds the store in `DEADLETTER_TEST_OWNER`, prints `ready`, and
/// stops when its standard input closes, printing `enqueued N`).
pub(crate) struct Owner {
    child: Child,
    out: BufReader<ChildStdout>,
}

impl Owner {
    fn start(dir: &Path) -> Owner {
        Owner::start_test(dir, "live::owner_process")
    }

    /// Starts the owner test `owner_test` on `dir` and waits for its `ready`.
    pub(crate) fn start_test(dir: &Path, owner_test: &str) -> Owner {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", owner_test, "--ignored", "--nocapture", "-q"])
            .env("DEADLETTER_TEST_OWNER", dir)
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

    /// Reads the owner's output until a line starting with `prefix`; returns that line.
    fn wait_for(&mut self, prefix: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut line = String::new();
        while Instant::now() < deadline {
            line.clear();
            if self.out.read_line(&mut line).unwrap() == 0 {
                panic!("the owner exited before printing {prefix:?}");
            }
            if line.starts_with(prefix) {
                return line.trim().to_string();
            }
        }
        panic!("the owner printed no {prefix:?}");
    }

    /// Stops the owner (closes its standard input); returns how many it enqueued.
    pub(crate) fn stop(mut self) -> u64 {
        self.child.stdin.take().unwrap().write_all(b"\n").unwrap();
        let line = self.wait_for("enqueued ");
        assert!(self.child.wait().unwrap().success(), "the owner failed");
        line["enqueued ".len()..].parse().unwrap()
    }
}

#[test]
fn a_running_owner_serves_every_command() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("store");
    let owner = Owner::start(&dir);
    let d = dir.to_str().unwrap();

    // Every read command works while the owner runs, and sees its data.
    let stats = json(&["--json", "stats", d]);
    let orders = stats["queues"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["queue"] == "orders")
        .expect("stats lists orders")
        .clone();
    assert!(orders["dlq_size"].as_u64().unwrap() >= 6, "{orders}");
    ok(&["stats", d]);
    let list = json(&["--json", "list", d, "--queue", "orders", "--limit", "100"]);
    let ids = ids_of(&list);
    assert!(ids.len() >= 6);
    let shown = json(&["--json", "show", d, &ids[0].to_string()]);
    assert_eq!(shown["failure"]["error_kind"], "BadOrder");
    let analysis = json(&["--json", "analyze", d, "--queue", "orders"]);
    assert!(analysis["dlqs"][0]["analysis"]["total"].as_u64().unwrap() >= 6);
    let export = tmp.path().join("orders.ndjson");
    ok(&[
        "export",
        d,
        "--queue",
        "orders",
        "--out",
        export.to_str().unwrap(),
    ]);
    let exported = std::fs::read_to_string(&export).unwrap().lines().count();
    assert!(exported >= 6);
    ok(&["verify", d]);

    // Every change is carried out by the owner.
    let (a, b, c, e) = (ids[0], ids[1], ids[2], ids[3]);
    let replayed = json(&["--json", "replay", d, &a.to_string(), "--to", "held"]);
    assert_eq!(replayed["replayed"][0]["id"], a);
    // A swapped pair of letters is one slip: the refusal suggests the queue meant.
    let refused = fails(
        &["replay", d, &b.to_string(), "--to", "hled"],
        1,
        "--create",
    );
    assert!(refused.contains(r#"did you mean "held"?"#), "{refused}");
    json(&["--json", "delete", d, &b.to_string()]);
    json(&[
        "--json",
        "mark-reprocessed",
        d,
        &c.to_string(),
        &e.to_string(),
        "--ok",
    ]);
    let purged = json(&[
        "--json",
        "purge",
        d,
        "--older-than",
        "0s",
        "--queue",
        "orders",
        "--yes",
    ]);
    assert_eq!(
        purged["deleted"], 2,
        "the two entries marked reprocessed: {purged}"
    );
    json(&[
        "--json", "enqueue", d, "--queue", "held", "hello", "--create",
    ]);
    let imported = json(&[
        "--json",
        "import",
        d,
        export.to_str().unwrap(),
        "--queue",
        "archive",
        "--create",
    ]);
    assert_eq!(imported["imported"].as_u64().unwrap() as usize, exported);

    // A fresh snapshot sees the owner's changes.
    let after = ids_of(&json(&[
        "--json", "list", d, "--queue", "orders", "--limit", "100000",
    ]));
    for gone in [a, b, c, e] {
        assert!(!after.contains(&gone), "{gone} is still in orders-dlq");
    }
    // The owner recorded who asked (control protocol 3): the tool's user@host.
    let traced = json(&["--json", "trace", d, &a.to_string()]);
    let replay = traced["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["event"] == "replayed")
        .cloned()
        .expect("a replay step");
    assert_eq!(replay["actor"], crate::trace::tool_actor(), "{traced}");

    let enqueued = owner.stop();
    // Nothing lost or doubled: every order was acked or dead-lettered once, every
    // dead-lettered one is in the DLQ or was replayed, deleted or purged exactly once.
    let store = Store::open(&dir, Config::for_existing_store(&dir)).unwrap();
    let orders = store.existing_queue("orders").unwrap().stats();
    assert_eq!(orders.counts.enqueued, enqueued);
    assert_eq!(
        orders.counts.acked + orders.counts.dead_lettered,
        enqueued,
        "{orders:?}"
    );
    assert_eq!(orders.counts.dead_lettered, enqueued.div_ceil(5));
    let dlq = store.dlq("orders-dlq").unwrap().stats();
    assert_eq!((dlq.replayed, dlq.deleted), (1, 3), "{dlq:?}");
    assert_eq!(dlq.total + 4, orders.counts.dead_lettered, "{dlq:?}");
    let held = store.existing_queue("held").unwrap();
    let msgs = held.lease(10).unwrap();
    let mut payloads: Vec<Vec<u8>> = msgs.iter().map(|m| m.payload().to_vec()).collect();
    payloads.sort();
    assert_eq!(
        payloads.len(),
        2,
        "the replayed entry and the enqueued message"
    );
    assert!(payloads.contains(&b"hello".to_vec()));
    assert_eq!(store.dlq("archive-dlq").unwrap().len() as usize, exported);
    // Replay, delete, two marks, purge, import: each in the trail, as the tool's user.
    let trail = store.audit_trail(100);
    assert_eq!(trail.len(), 6, "{trail:?}");
    assert!(trail.iter().all(|e| e.actor == crate::trace::tool_actor()));
    assert!(!dir.join(deadletter::control::SOCKET_NAME).exists());
}

#[test]
fn the_reads_work_on_a_read_only_copy_and_change_nothing() {
    let _serial = serial();
    let f = fixture();
    let copy = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(f.path()).unwrap().flatten() {
        std::fs::copy(entry.path(), copy.path().join(entry.file_name())).unwrap();
    }
    let d = copy.path().to_str().unwrap();
    let chmod = |mode: &str| {
        let status = Command::new("chmod")
            .args(["-R", mode, d])
            .status()
            .unwrap();
        assert!(status.success());
    };
    chmod("a-w");
    let before = dir_snapshot(copy.path());
    let mtimes = |dir: &Path| -> Vec<(String, std::time::SystemTime)> {
        let mut v: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                (name, e.metadata().unwrap().modified().unwrap())
            })
            .collect();
        v.sort();
        v
    };
    let times = mtimes(copy.path());
    let names_before: Vec<String> = times.iter().map(|(n, _)| n.clone()).collect();

    let expected = f.entries();
    let stats = json(&["--json", "stats", d]);
    assert!(!stats["queues"].as_array().unwrap().is_empty());
    let list = json(&["--json", "list", d, "--limit", "1000"]);
    assert_eq!(ids_of(&list).len(), expected.len());
    let (name, entry) = expected.iter().next().unwrap();
    let shown = json(&["--json", "show", d, &entry.id().to_string()]);
    assert_eq!(shown["id"].as_u64(), Some(entry.id()), "{name}");
    json(&["--json", "analyze", d]);
    let exported = stdout(&run(&["export", d]));
    assert_eq!(exported.lines().count(), expected.len());
    ok(&["verify", d]);
    // Tests run as root, whom `a-w` does not stop: the contents, times and names of the
    // files show that no read opened one to write.
    chmod("u+w");
    assert_eq!(
        dir_snapshot(copy.path()),
        before,
        "a read changed the store"
    );
    assert_eq!(mtimes(copy.path()), times, "a read touched a file");
    let names_after: Vec<String> = mtimes(copy.path()).into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        names_after, names_before,
        "a read created or removed a file"
    );
}
