//! `replay --guarded`, `--progress`, `--pause`, `--resume`, `--stop`: on a store the tool
//! takes itself (it releases the canary; the next holder drives the rest), and on a store a
//! running owner holds (the owner starts and drives it, asked through its control socket).

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use deadletter::audit::AuditAction;
use deadletter::pool::Retry;
use deadletter::queue::FailureReport;
use deadletter::{Config, Failure, Message, Store, WorkerPool};
use serde_json::Value;

use crate::fixture::small_config;
use crate::run::{fails, json, ok, serial};

/// `n` entries in orders-dlq.
fn dead_letters(dir: &Path, config: Config, n: usize) {
    let store = Store::open(dir, config).unwrap();
    let orders = store.queue("orders").unwrap();
    let payloads: Vec<String> = (0..n).map(|i| format!("ORD-{i}")).collect();
    orders.enqueue_batch(&payloads).unwrap();
    let bug = Failure::permanent("ParseError", "the parser had a bug");
    for m in orders.lease(n).unwrap() {
        orders.dead_letter(&m, &FailureReport::new(&bug)).unwrap();
    }
    store.close().unwrap();
}

fn replays(v: &Value) -> Vec<Value> {
    v["guarded_replays"]
        .as_array()
        .expect("guarded_replays")
        .clone()
}

#[test]
fn a_guarded_replay_started_by_the_tool_is_driven_by_the_next_holder() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    dead_letters(dir, small_config(), 30);
    let d = dir.to_str().unwrap();

    // The options need --guarded; bad numbers are refused before anything is written.
    fails(&["replay", d, "--all", "--canary", "5"], 2, "--guarded");
    fails(
        &[
            "replay",
            d,
            "--guarded",
            "--all",
            "--max-failure-ratio",
            "2",
        ],
        1,
        "maximum failure ratio",
    );
    assert!(replays(&json(&["--json", "replay", d, "--progress"])).is_empty());

    let started = json(&[
        "--json",
        "replay",
        d,
        "--guarded",
        "--all",
        "--canary",
        "5",
        "--growth",
        "3",
        "--max-failure-ratio",
        "0.2",
        "--reset-attempts",
    ]);
    let r = &replays(&started)[0];
    assert_eq!(
        (
            r["id"].as_u64(),
            r["state"].as_str(),
            r["replayed"].as_u64(),
            r["left"].as_u64()
        ),
        (Some(1), Some("running"), Some(5), Some(25)),
        "{r}"
    );
    assert_eq!(
        (r["selection"].as_str(), r["growth"].as_f64()),
        (Some("--all"), Some(3.0))
    );
    // Started by the tool's user: its releases are their replays in the audit trail.
    assert_eq!(r["started_by"], crate::trace::tool_actor(), "{r}");
    // One active guarded replay per DLQ.
    fails(
        &["replay", d, "--guarded", "--all"],
        1,
        "active guarded replay",
    );
    // No process holds the store, so nothing can say what consumes its target: the
    // progress says so, and how to attach a pool.
    let text = ok(&["replay", d, "--progress", "1"]);
    assert!(
        text.contains("whether a worker pool consumes orders cannot be seen")
            && text.contains(r#"start a WorkerPool on queue "orders""#),
        "{text}"
    );
    let waiting = &replays(&json(&["--json", "replay", d, "--progress", "1"]))[0];
    assert_eq!(waiting["consumer"]["queue"], "orders", "{waiting}");
    assert_eq!(waiting["consumer"]["known"], false, "{waiting}");

    // The application opens the store: its pool and the store drive the rest.
    {
        let store = Store::open(dir, small_config()).unwrap();
        let orders = store.queue("orders").unwrap();
        let pool = WorkerPool::new(&orders)
            .workers(2)
            .start(|_m: &Message| Ok(()))
            .unwrap();
        pool.run_until_idle().unwrap();
        drop(pool);
        store.close().unwrap();
    }
    let text = ok(&["replay", d, "--progress", "1"]);
    assert!(
        text.contains("completed") && text.contains("30 of 30 selected"),
        "{text}"
    );
    let done = &replays(&json(&["--json", "replay", d, "--progress"]))[0];
    assert_eq!(
        (
            done["succeeded"].as_u64(),
            done["failed_again"].as_u64(),
            done["wave"].as_u64()
        ),
        (Some(30), Some(0), Some(2)),
        "waves of 5, 15, then the 10 left: {done}"
    );
    // A finished replay cannot be stopped; an unknown one is named.
    fails(&["replay", d, "--stop", "1"], 1, "it is completed");
    fails(&["replay", d, "--pause", "7"], 1, "no guarded replay 7");
}

/// The owner of the live test: holds the store with its control socket and a pool whose
/// handler still fails (each failure straight back to the DLQ); prints `ready`, stops when
/// its standard input closes.
#[test]
#[ignore = "the owner process of guarded::a_running_owner_starts_and_drives_a_guarded_replay"]
fn guarded_owner_process() {
    let Ok(dir) = std::env::var("DEADLETTER_TEST_GUARDED_OWNER") else {
        return;
    };
    let store = Store::open(&dir, small_config().control_socket(true)).expect("owner opens");
    let orders = store.queue("orders").unwrap();
    let pool = WorkerPool::new(&orders)
        .workers(2)
        .retry(Retry::exponential(Duration::from_millis(1)).max_attempts(1))
        .start(|_m: &Message| Err(Failure::permanent("ParseError", "still broken")))
        .unwrap();
    println!("ready");
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
    pool.run_until_idle().unwrap();
    pool.shutdown(Duration::from_secs(10)).unwrap();
    println!("stopped");
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
                "guarded::guarded_owner_process",
                "--ignored",
                "--nocapture",
                "-q",
            ])
            .env("DEADLETTER_TEST_GUARDED_OWNER", dir)
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

    fn wait_for(&mut self, word: &str) {
        let mut line = String::new();
        loop {
            line.clear();
            assert!(
                self.out.read_line(&mut line).unwrap() > 0,
                "the owner exited before {word:?}"
            );
            if line.trim() == word {
                return;
            }
        }
    }

    fn stop(mut self) {
        self.child.stdin.take().unwrap().write_all(b"\n").unwrap();
        self.wait_for("stopped");
        assert!(self.child.wait().unwrap().success());
    }
}

#[test]
fn a_running_owner_starts_and_drives_a_guarded_replay() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("store");
    dead_letters(&dir, small_config(), 40);
    let owner = Owner::start(&dir);
    let d = dir.to_str().unwrap();

    let started = json(&[
        "--json",
        "replay",
        d,
        "--guarded",
        "--all",
        "--queue",
        "orders",
        "--canary",
        "4",
        "--max-failure-ratio",
        "0.5",
    ]);
    let id = replays(&started)[0]["id"].as_u64().unwrap().to_string();
    // The owner's pool consumes the target: nothing to warn of.
    let consumer = &replays(&started)[0]["consumer"];
    assert_eq!(
        (consumer["known"].as_bool(), consumer["pools"].as_u64()),
        (Some(true), Some(1))
    );
    assert!(consumer["hint"].is_null(), "{consumer}");
    // The owner's pool handles the canary, which fails again: the replay stops by itself.
    let give_up = Instant::now() + Duration::from_secs(60);
    let report = loop {
        let r = replays(&json(&["--json", "replay", d, "--progress", &id]))[0].clone();
        if r["state"] == "stopped" {
            break r;
        }
        assert!(Instant::now() < give_up, "never stopped: {r}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(
        (
            report["stopped"]["wave"].as_u64(),
            report["stopped"]["failed"].as_u64()
        ),
        (Some(0), Some(4)),
        "{report}"
    );
    assert_eq!(
        (report["replayed"].as_u64(), report["left"].as_u64()),
        (Some(4), Some(36))
    );
    assert!(report["state_text"]
        .as_str()
        .unwrap()
        .contains("4 of 4 in the canary"));
    // Stopped is final: the owner refuses to resume it.
    fails(&["replay", d, "--resume", &id], 1, "it is stopped");

    // A second one, cancelled through the owner.
    // (A ratio of 1 never stops it; the rate keeps its second wave from going out at once.)
    let second = json(&[
        "--json",
        "replay",
        d,
        "--guarded",
        "--all",
        "--queue",
        "orders",
        "--canary",
        "1",
        "--rate",
        "1",
        "--max-failure-ratio",
        "1",
    ]);
    let id2 = replays(&second)[0]["id"].as_u64().unwrap().to_string();
    let cancelled = json(&["--json", "replay", d, "--stop", &id2]);
    assert_eq!(replays(&cancelled)[0]["state"], "cancelled");
    owner.stop();

    let store = Store::open(&dir, small_config()).unwrap();
    assert_eq!(store.dlq("orders-dlq").unwrap().len(), 40);
    assert_eq!(store.guarded_replays().len(), 2);
    // The owner recorded the canary's release as the tool user's replay (protocol 4 on 3).
    let replays: Vec<_> = store
        .audit_trail(1000)
        .into_iter()
        .filter(|e| e.action == AuditAction::Replay)
        .collect();
    assert!(!replays.is_empty());
    for e in &replays {
        assert_eq!(e.actor, crate::trace::tool_actor(), "{e:?}");
    }
    assert_eq!(replays[0].ids.len(), 4);
}
