//! A queue's own messages through the binary: `messages` by state, `message`, and the
//! operator's `retry-now`, `delay`, `dead-letter` and `delete-message`. The acceptance test
//! runs a real owner process whose worker pool fails every job (a retry five minutes later) and
//! holds one slow job: the tool lists the retrying messages with their next attempt time
//! and last error, and the in-flight one with the worker holding it, retries one now
//! through the owner's control socket, and sees its next attempt happen. A second test
//! works on a store the tool takes itself, bulk changes included.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use deadletter::pool::Retry;
use deadletter::queue::{EnqueueOptions, QueuedState};
use deadletter::{Config, Failure, Message, Store, WorkerPool};
use serde_json::Value;

use crate::live::Owner;
use crate::run::{fails, json, ok, serial};

/// The owner's configuration: durable, small unpreallocated segments, the control socket.
fn owner_config() -> Config {
    Config::default()
        .segment_size(1 << 20)
        .max_message_size(64 << 10)
        .preallocate(false)
        .control_socket(true)
}

/// Set when the owner is told to stop: the slow job's handler returns then.
static STOPPING: AtomicBool = AtomicBool::new(false);

/// The owner process: runs only when the parent sets `DEADLETTER_TEST_OWNER`. Its pool
/// (`jobs-worker`, two workers) fails every `job-N` with `Upstream503` and retries it five
/// minutes later; once three are retrying it enqueues `slow`, whose handler runs until the
/// owner stops, and prints `ready` when that one is in flight.
#[test]
#[ignore = "the owner process of messages::a_running_pool_s_retries_are_listed_and_retried_now"]
fn failing_pool_owner() {
    let Ok(dir) = std::env::var("DEADLETTER_TEST_OWNER") else {
        return;
    };
    let store = Store::open(&dir, owner_config()).expect("owner opens the store");
    let jobs = store.queue("jobs").unwrap();
    for i in 1..=3 {
        jobs.enqueue(format!("job-{i}")).unwrap();
    }
    let pool = WorkerPool::new(&jobs)
        .workers(2)
        .name("jobs-worker")
        .retry(
            Retry::fixed(Duration::from_secs(3600))
                .no_jitter()
                .max_attempts(10),
        )
        .start(|m: &Message| {
            if m.payload() == b"slow" {
                while !STOPPING.load(Ordering::Acquire) {
                    std::thread::sleep(Duration::from_millis(5));
                }
                return Ok(());
            }
            let text = m.text().unwrap_or("?").to_string();
            Err(Failure::transient(
                "Upstream503",
                format!("the upstream refused {text}"),
            ))
        })
        .unwrap();
    let wait_for = |what: &str, done: &dyn Fn() -> bool| {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !done() {
            assert!(
                Instant::now() < deadline,
                "the owner waited in vain for {what}"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    wait_for("three retrying jobs", &|| {
        jobs.message_counts().retrying == 3
    });
    jobs.enqueue(b"slow").unwrap();
    wait_for("the slow job in flight", &|| {
        jobs.message_counts().in_flight == 1
    });
    println!("ready");
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
    STOPPING.store(true, Ordering::Release);
    let report = pool.shutdown(Duration::from_secs(10)).unwrap();
    assert!(report.drained);
    println!("enqueued 4");
}

/// The messages of a `messages --json` output.
fn messages_of(v: &Value) -> Vec<Value> {
    v["messages"].as_array().expect("messages").clone()
}

/// The pool's delay before a next attempt: `Retry::fixed(1 h)` capped by the policy's
/// default maximum delay (five minutes).
const BACKOFF_MS: u64 = 300_000;

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

#[test]
fn a_running_pool_s_retries_are_listed_and_retried_now() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("store");
    let owner = Owner::start_test(&dir, "messages::failing_pool_owner");
    let d = dir.to_str().unwrap();

    // The retrying messages, with their next attempt time and last error.
    let retrying = json(&["--json", "messages", d, "jobs", "--state", "retrying"]);
    let retrying = messages_of(&retrying);
    assert_eq!(retrying.len(), 3, "{retrying:?}");
    for m in &retrying {
        assert_eq!(m["state"], "retrying");
        assert_eq!(m["attempts"], 1);
        let next = m["next_attempt_at_ms"]
            .as_u64()
            .expect("a next attempt time");
        let failed_at = m["last_error"]["at_ms"].as_u64().unwrap();
        // The pool's backoff (an hour, capped by its policy's maximum of five minutes).
        assert_eq!(next, failed_at + BACKOFF_MS, "{m}");
        assert!(next > now_ms(), "{m}");
        assert_eq!(m["last_error"]["error_kind"], "Upstream503");
        let text = m["payload_text"].as_str().unwrap();
        assert_eq!(
            m["last_error"]["error_message"],
            format!("the upstream refused {text}")
        );
        assert!(m["last_error"]["worker"]
            .as_str()
            .unwrap()
            .starts_with("jobs-worker-"));
    }
    let all = json(&["--json", "messages", d, "jobs"]);
    assert_eq!(all["counts"]["retrying"], 3);
    assert_eq!(all["counts"]["in_flight"], 1);
    assert_eq!(all["counts"]["ready"], 0);
    let table = ok(&["messages", d, "jobs"]);
    assert!(
        table.contains("0 ready, 0 delayed, 3 retrying, 1 in flight"),
        "{table}"
    );
    assert!(
        table.contains("retrying") && table.contains("Upstream503: the upstream"),
        "{table}"
    );
    // The slow one is in flight, held by a worker of the owner's pool.
    let in_flight = messages_of(&json(&[
        "--json",
        "messages",
        d,
        "jobs",
        "--state",
        "in-flight",
    ]));
    assert_eq!(in_flight.len(), 1);
    let slow = in_flight[0]["id"].as_u64().unwrap();
    let holder = in_flight[0]["holder"]
        .as_str()
        .expect("the holder is named");
    assert!(holder.starts_with("jobs-worker-"), "{holder}");
    assert!(in_flight[0]["lease_expires_at_ms"].as_u64().is_some());

    // Retry one now: its next attempt happens, and fails again (retried five minutes on).
    let id = retrying[0]["id"].as_u64().unwrap().to_string();
    let done = json(&["--json", "retry-now", d, "jobs", &id]);
    assert_eq!(done["applied"][0].as_u64().unwrap().to_string(), id);
    let deadline = Instant::now() + Duration::from_secs(60);
    let again = loop {
        let m = json(&["--json", "message", d, "jobs", &id]);
        if m["attempts"] == 2 && m["state"] == "retrying" {
            break m;
        }
        assert!(Instant::now() < deadline, "no second attempt: {m}");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(again["failures"].as_array().unwrap().len(), 2);
    let failed_at = again["last_error"]["at_ms"].as_u64().unwrap();
    assert_eq!(
        again["next_attempt_at_ms"].as_u64(),
        Some(failed_at + BACKOFF_MS)
    );
    let listed = messages_of(&json(&[
        "--json", "messages", d, "jobs", "--state", "retrying",
    ]));
    let shown = listed
        .iter()
        .find(|m| m["id"].as_u64().unwrap().to_string() == id);
    assert_eq!(shown.unwrap()["attempts"], 2);
    // The owner's audit trail says who retried it now: this tool's user@host.
    let life = ok(&["trace", d, &id]);
    let line = life
        .lines()
        .find(|l| l.contains("RetryNow"))
        .expect("audited");
    assert!(line.contains("audited") && line.contains('@'), "{life}");

    // What makes no sense is refused: the in-flight one is its consumer's.
    fails(&["retry-now", d, "jobs", &slow.to_string()], 1, "in flight");
    fails(&["retry-now", d, "jobs", "999999"], 1, "999999");
    // The others: delayed, moved to the DLQ with the reason, deleted.
    let (b, c) = (
        retrying[1]["id"].as_u64().unwrap().to_string(),
        retrying[2]["id"].as_u64().unwrap().to_string(),
    );
    ok(&["delay", d, "jobs", &b, "--for", "3h"]);
    let delayed = json(&["--json", "message", d, "jobs", &b]);
    assert_eq!(delayed["state"], "retrying", "it failed before");
    assert!(delayed["visible_at_ms"].as_u64().unwrap() > now_ms() + 2 * 3_600_000);
    ok(&[
        "dead-letter",
        d,
        "jobs",
        &c,
        "--reason",
        "the upstream is gone",
    ]);
    let life = ok(&["trace", d, &b]);
    assert!(life.contains("Delay: until"), "{life}");
    let entry = json(&["--json", "show", d, &c]);
    assert_eq!(entry["failure"]["error_kind"], "moved_by_operator");
    assert!(entry["failure"]["error_message"]
        .as_str()
        .unwrap()
        .contains("the upstream is gone"));
    ok(&["delete-message", d, "jobs", &b]);
    fails(&["message", d, "jobs", &b], 1, "not found");
    owner.stop();
}

#[test]
fn on_a_store_the_tool_takes_bulk_changes_need_yes() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().to_str().unwrap();
    {
        let store = Store::open(tmp.path(), owner_config().control_socket(false)).unwrap();
        let q = store.queue("later").unwrap();
        let hour = EnqueueOptions::new().delay(Duration::from_secs(3600));
        for i in 0..1001 {
            q.enqueue_with(format!("m-{i}"), &hour).unwrap();
        }
        q.enqueue(b"now").unwrap();
    }
    let delayed = json(&[
        "--json", "messages", d, "later", "--state", "delayed", "--limit", "5",
    ]);
    assert_eq!(messages_of(&delayed).len(), 5);
    assert!(delayed["next_cursor"].as_u64().is_some());
    let ready = messages_of(&json(&[
        "--json", "messages", d, "later", "--state", "ready",
    ]));
    let now_id = ready[0]["id"].as_u64().unwrap().to_string();
    let first = delayed["messages"][0]["id"].as_u64().unwrap();
    // Over the threshold: refused without --yes, nothing changed.
    fails(&["retry-now", d, "later", "--state", "delayed"], 2, "--yes");
    let store = Store::open_read_only(tmp.path(), Config::for_existing_store(tmp.path())).unwrap();
    let q = store.existing_queue("later").unwrap();
    assert_eq!(q.message_counts().delayed, 1001);
    drop((q, store));
    let dry = json(&[
        "--json",
        "retry-now",
        d,
        "later",
        "--state",
        "delayed",
        "--dry-run",
    ]);
    assert_eq!(dry["applied"].as_array().unwrap().len(), 1001);
    let done = json(&[
        "--json",
        "retry-now",
        d,
        "later",
        "--state",
        "delayed",
        "--yes",
    ]);
    assert_eq!(done["applied"].as_array().unwrap().len(), 1001);
    let store = Store::open_read_only(tmp.path(), Config::for_existing_store(tmp.path())).unwrap();
    let q = store.existing_queue("later").unwrap();
    let counts = q.message_counts();
    assert_eq!((counts.ready, counts.delayed), (1002, 0));
    assert_eq!(q.message(first).unwrap().state, QueuedState::Ready);
    drop((q, store));
    // The ready one cannot be retried now; an unknown queue is named.
    fails(&["retry-now", d, "later", &now_id], 1, "visible already");
    fails(&["messages", d, "latr"], 1, "latr");
    let text = ok(&["message", d, "later", &now_id]);
    assert!(
        text.contains("state:        ready") && text.contains("now"),
        "{text}"
    );
}
