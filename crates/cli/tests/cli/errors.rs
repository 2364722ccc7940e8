//! Exit codes and refusals: a change to a store another process holds, when that process
//! serves no control socket, is refused naming it and left untouched (exit 1; reads work),
//! errors are JSON objects with `--json`, bad usage exits 2, and a directory that holds no store is an error, never a new
//! store.

use crate::fixture::{dir_snapshot, fixture};
use crate::run::{fails, json, ok, run, serial, stderr};

#[test]
fn a_store_held_without_a_control_socket_is_read_but_not_changed() {
    let _serial = serial();
    let f = fixture();
    let holder = f.open();
    let snapshot = dir_snapshot(f.dir.path());
    // Reads work on a snapshot.
    ok(&["stats", f.path()]);
    json(&["list", f.path(), "--json"]);
    // Changes need the holder, which serves no control socket: refused, naming it.
    let held_by = format!("held by process {}", std::process::id());
    for args in [
        vec!["replay", f.path(), "--all"],
        vec![
            "purge",
            f.path(),
            "--older-than",
            "1s",
            "--include-pending",
            "--yes",
        ],
        vec!["enqueue", f.path(), "--queue", "orders", "x"],
    ] {
        let err = fails(&args, 1, &held_by);
        assert_eq!(err.lines().count(), 1, "one line: {err:?}");
        assert!(err.contains(f.path()), "names the store: {err}");
        assert!(
            err.contains("control_socket"),
            "says what is missing: {err}"
        );
    }
    // With --json the error is a JSON object, with the same exit code.
    let o = run(&["--json", "delete", f.path(), "--all", "--yes"]);
    assert_eq!(o.status.code(), Some(1));
    let err: serde_json::Value = serde_json::from_str(stderr(&o).trim()).unwrap();
    assert_eq!(err["error"]["kind"], "locked");
    assert!(err["error"]["message"].as_str().unwrap().contains(&held_by));
    // verify reads without the lock.
    assert_eq!(json(&["verify", f.path(), "--json"])["clean"], true);
    assert_eq!(dir_snapshot(f.dir.path()), snapshot);
    drop(holder);
    json(&["stats", f.path(), "--json"]);
}

#[test]
fn bad_usage_exits_2() {
    let _serial = serial();
    let f = fixture();
    for args in [
        vec![],
        vec!["frobnicate"],
        vec!["stats"],
        vec!["list", f.path(), "--limit", "0"],
        vec!["list", f.path(), "--since", "yesterday"],
        vec!["show", f.path(), "not-a-number"],
        vec!["replay", f.path()],
        vec!["replay", f.path(), "--all", "--error-kind", "X"],
        vec!["replay", f.path(), "3", "--all"],
        vec!["delete", f.path()],
        vec!["purge", f.path()],
        vec!["purge", f.path(), "--older-than", "30x"],
        vec!["enqueue", f.path()],
        vec![
            "enqueue",
            f.path(),
            "--queue",
            "q",
            "--attr",
            "novalue",
            "p",
        ],
        vec!["serve", f.path(), "--bind", "not-an-address"],
        vec!["stats", f.path(), "--status", "weird"],
    ] {
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(!stderr(&o).is_empty(), "{args:?} explains itself");
    }
    // Help is not an error.
    assert!(ok(&["--help"]).contains("replay"));
    assert!(ok(&["list", "--help"]).contains("--error-kind"));
}

#[test]
fn a_missing_store_is_an_error_not_a_new_store() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    let m = missing.to_str().unwrap();
    for cmd in ["stats", "list", "analyze", "verify"] {
        let err = fails(&[cmd, m], 1, "is not a deadletter store");
        assert_eq!(err.lines().count(), 1);
    }
    assert!(!missing.exists(), "nothing was created");
    let empty = dir.path();
    fails(
        &["stats", empty.to_str().unwrap()],
        1,
        "holds no segment file",
    );
}
