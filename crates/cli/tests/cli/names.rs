//! Names and paths the store refuses, through `deadletter enqueue` as an operator types
//! them: each bad queue name gets its own `--json` error kind and changes nothing (with
//! the tool holding the store, and through the control socket of a process that holds
//! it); a queue/DLQ name clash is `name_clash`; a store path that is a regular file is
//! `not_a_directory`, naming it.

use std::path::Path;

use deadletter::Store;
use serde_json::Value;

use crate::fixture::{empty_store, fixture, small_config};
use crate::run::{json, run, serial, stderr};

/// Runs `args` with `--json`, expecting exit 1 and a JSON error; returns its kind and
/// message.
fn json_error(args: &[&str]) -> (String, String) {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let o = run(&all);
    assert_eq!(o.status.code(), Some(1), "{args:?}: {}", stderr(&o));
    let err = stderr(&o);
    let v: Value = serde_json::from_str(err.trim())
        .unwrap_or_else(|e| panic!("{args:?}: stderr is no JSON ({e}): {err}"));
    let kind = v["error"]["kind"].as_str().expect("kind").to_string();
    let message = v["error"]["message"].as_str().expect("message").to_string();
    (kind, message)
}

/// Each refused name, the kind the tool reports and a word of its message.
const BAD_NAMES: [(&str, &str, &str); 11] = [
    ("", "queue_name_empty", "is empty"),
    (" ", "queue_name_blank", "only whitespace"),
    ("\t \t", "queue_name_control_character", "U+0009"),
    (" orders", "queue_name_edge_whitespace", "starts or ends"),
    ("orders ", "queue_name_edge_whitespace", "starts or ends"),
    ("../x", "queue_name_path_separator", "'/'"),
    ("a/b", "queue_name_path_separator", "'/'"),
    ("a\\b", "queue_name_path_separator", "'\\\\'"),
    ("..", "queue_name_dot", "path component"),
    ("a\u{7}b", "queue_name_control_character", "U+0007"),
    (
        "pay\u{200B}ments",
        "queue_name_invisible_character",
        "U+200B",
    ),
];

/// The store's queues and the log position its records end at: what a refused name must
/// leave as it was.
fn contents(dir: &Path) -> (Vec<String>, u64) {
    let store = Store::open(dir, small_config()).unwrap();
    let end = store.storage_stats().end_position;
    (store.queue_names(), end)
}

/// Every bad name is refused by `enqueue` on `dir` with its kind; nothing in `dir` changes.
fn refuses_every_bad_name(dir: &Path, how: &str) {
    let path = dir.to_str().unwrap();
    let before = contents(dir);
    for (name, kind, word) in BAD_NAMES {
        let (got, message) = json_error(&["enqueue", path, "--queue", name, "payload"]);
        assert_eq!(got, kind, "{how}: {name:?}: {message}");
        assert!(
            message.contains(&format!("{name:?}")) && message.contains(word),
            "{how}: {name:?}: the message names it and what is wrong: {message}"
        );
        assert!(
            message.contains("1 to 200 bytes"),
            "{how}: says what is allowed: {message}"
        );
    }
    let long = "q".repeat(201);
    let (kind, _) = json_error(&["enqueue", path, "--queue", &long, "payload"]);
    assert_eq!(kind, "queue_name_too_long", "{how}");
    assert_eq!(contents(dir), before, "{how}: a refused name wrote nothing");
}

#[test]
fn bad_queue_names_are_refused_each_with_its_kind() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    empty_store(dir.path());
    refuses_every_bad_name(dir.path(), "the tool holds the store");
    let path = dir.path().to_str().unwrap();
    json(&[
        "--json",
        "enqueue",
        path,
        "--queue",
        "eu orders.v2",
        "ok",
        "--create",
    ]);
    let store = Store::open(dir.path(), small_config()).unwrap();
    assert_eq!(store.queue_names(), ["eu orders.v2"]);
}

#[test]
fn bad_queue_names_are_refused_through_the_owner() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    empty_store(dir.path());
    let owner = Store::open(dir.path(), small_config().control_socket(true)).unwrap();
    // The owner refuses; the tool reports the same kinds it would holding the store.
    let path = dir.path().to_str().unwrap();
    for (name, kind, _) in BAD_NAMES {
        let (got, message) = json_error(&["enqueue", path, "--queue", name, "payload"]);
        assert_eq!(got, kind, "through the owner: {name:?}: {message}");
    }
    assert!(owner.queue_names().is_empty());
    owner.queue("orders").unwrap();
    let (kind, message) = json_error(&["enqueue", path, "--queue", "orders-dlq", "p"]);
    assert_eq!(kind, "name_clash", "through the owner: {message}");
    assert_eq!(owner.queue_names(), ["orders"]);
}

#[test]
fn a_queue_dlq_name_clash_is_name_clash() {
    let _serial = serial();
    let f = fixture();
    let before = contents(f.dir.path());
    // `orders` and `emails` exist: their DLQs' names are taken.
    for name in ["orders-dlq", "emails-dlq"] {
        let (kind, message) = json_error(&["enqueue", f.path(), "--queue", name, "p"]);
        assert_eq!(kind, "name_clash", "{name}: {message}");
        assert!(message.contains("clashes"), "{message}");
    }
    assert_eq!(contents(f.dir.path()), before, "a clash wrote nothing");
}

#[test]
fn a_store_path_that_is_a_file_is_not_a_directory() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("store");
    std::fs::write(&file, b"not a store").unwrap();
    let path = file.to_str().unwrap();
    let under = file.join("sub");
    let under = under.to_str().unwrap();
    for (store, args) in [
        (path, vec!["enqueue", path, "--queue", "q", "p"]),
        (under, vec!["enqueue", under, "--queue", "q", "p"]),
        (path, vec!["import", path, "/dev/null"]),
    ] {
        let (kind, message) = json_error(&args);
        assert_eq!(kind, "not_a_directory", "{args:?}: {message}");
        assert!(
            message.contains(store) && message.contains("not a directory"),
            "{args:?}: names the path: {message}"
        );
        assert!(!message.contains("File exists"), "{message}");
    }
    assert_eq!(std::fs::read(&file).unwrap(), b"not a store");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}
