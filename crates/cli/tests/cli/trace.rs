//! `trace`: a message replayed twice with the tool and then deleted with it shows each
//! step, with the tool's actor (`$USER@host`), after compactions and a reopen, in the
//! human table and in JSON.

use std::time::Duration;

use deadletter::queue::{FailureReport, QueueOptions};
use deadletter::{Failure, Store};

use crate::fixture::small_config;
use crate::run::{fails, json, ok, serial};

/// The actor the tool records: `$USER` (or `$LOGNAME`), else the name `id -un` gives for
/// this process's user, at the host's name.
pub fn tool_actor() -> String {
    let user = std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .ok()
        .filter(|name| !name.is_empty())
        .unwrap_or_else(user_by_id);
    format!("{user}@{}", host())
}

fn host() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default();
    if host.is_empty() {
        "unknown".into()
    } else {
        host
    }
}

/// This process's user name as `id -un` (coreutils) prints it.
fn user_by_id() -> String {
    let out = std::process::Command::new("id")
        .arg("-un")
        .output()
        .unwrap();
    assert!(out.status.success(), "id -un: {out:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// A store in `dir` with one message in `orders`; its id.
fn enqueue_one(dir: &std::path::Path) -> u64 {
    let store = Store::open(dir, small_config()).unwrap();
    let id = store.queue("orders").unwrap().enqueue(b"ORD").unwrap();
    store.close().unwrap();
    id
}

fn fail_next(dir: &std::path::Path, generation: u32) {
    let store = Store::open(dir, small_config()).unwrap();
    let q = store
        .queue_with("orders", QueueOptions::default().max_attempts(1))
        .unwrap();
    let m = q.lease_for(1, Duration::from_secs(30)).unwrap().remove(0);
    let f = Failure::permanent("NotFound", format!("order ORD-{generation} not found"));
    q.dead_letter(&m, &FailureReport::new(&f)).unwrap();
    store.close().unwrap();
}

#[test]
fn trace_shows_each_step_after_compaction_and_reopen() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let id = enqueue_one(dir.path());
    let path = dir.path().to_str().unwrap();
    let sid = id.to_string();
    for generation in 0..3 {
        fail_next(dir.path(), generation);
        if generation < 2 {
            ok(&["replay", path, &sid]);
        }
    }
    ok(&["delete", path, &sid]);
    {
        // Fill and compact twice: the message's own records are reclaimed.
        let store = Store::open(dir.path(), small_config()).unwrap();
        let churn = store.queue("churn").unwrap();
        let mut deleted = 0;
        for _ in 0..2 {
            for _ in 0..300 {
                churn.enqueue(vec![1u8; 4000]).unwrap();
                let m = churn.lease(1).unwrap().remove(0);
                churn.ack(&m).unwrap();
            }
            deleted += store.compact_now().unwrap().segments_deleted;
        }
        assert!(deleted > 0);
        store.close().unwrap();
    }

    let actor = tool_actor();
    let v = json(&["trace", path, &sid, "--json"]);
    assert_eq!(v["id"], id);
    assert_eq!(v["state"]["state"], "removed");
    assert_eq!(v["state"]["how"], "deleted");
    assert_eq!(v["replays"], 2);
    let steps: Vec<(String, Option<String>)> = v["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["event"].as_str().unwrap().to_string(),
                s["actor"].as_str().map(str::to_string),
            )
        })
        .collect();
    let by = |e: &str| (e.to_string(), Some(actor.clone()));
    let plain = |e: &str| (e.to_string(), None);
    assert_eq!(
        steps,
        [
            plain("enqueued"),
            plain("dead_lettered"),
            by("replayed"),
            plain("dead_lettered"),
            by("replayed"),
            plain("dead_lettered"),
            by("removed"),
        ]
    );
    assert_eq!(v["steps"][5]["message"], "order ORD-2 not found");
    assert_eq!(v["steps"][5]["generation"], 2);

    let text = ok(&["trace", path, &sid]);
    assert!(
        text.contains(&format!("Message {id}: removed (Deleted)")),
        "{text}"
    );
    for needle in [
        "enqueued",
        "replayed",
        "generation 2",
        "ORD-1 not found",
        &actor,
    ] {
        assert!(text.contains(needle), "{needle}: {text}");
    }
    fails(
        &["trace", path, "999999"],
        1,
        "knows nothing of message 999999",
    );
}

/// Without `$USER` and `$LOGNAME` (a cron job, a container's init), a change is recorded
/// as the user the process runs as, not as `unknown`.
#[test]
fn without_user_in_the_environment_the_actor_is_the_process_user() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let id = enqueue_one(dir.path());
    fail_next(dir.path(), 0);
    let path = dir.path().to_str().unwrap();
    let replayed = std::process::Command::new(crate::run::BIN)
        .args(["replay", path, &id.to_string()])
        .env_remove("USER")
        .env_remove("LOGNAME")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(replayed.status.success(), "{replayed:?}");
    let v = json(&["trace", path, &id.to_string(), "--json"]);
    let actors: Vec<&str> = v["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["actor"].as_str())
        .collect();
    assert_eq!(actors, [format!("{}@{}", user_by_id(), host())], "{v}");
}
