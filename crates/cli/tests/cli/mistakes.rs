//! Mistakes an operator makes at 3 a.m., caught instead of carried out: `enqueue` and
//! `import` create a store or a queue only with `--create` (nothing on disk without it,
//! and what was created said with it, also through an owner's control socket); unknown
//! queue names get the nearest known one; a `--error-kind` differing only in case says so
//! with the DLQ's kinds; replays and deletes of more than 1,000 entries need `--yes`.

use std::path::Path;

use deadletter::queue::FailureReport;
use deadletter::store::Durability;
use deadletter::{Failure, Store};
use serde_json::Value;

use crate::fixture::{empty_store, fixture, small_config};
use crate::run::{fails, json, ok, run, serial, stderr, stdout};

/// Runs `args` with `--json`, expecting exit `code` and a JSON error on stderr.
fn json_error(args: &[&str], code: i32) -> Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let o = run(&all);
    assert_eq!(o.status.code(), Some(code), "{args:?}: {}", stderr(&o));
    serde_json::from_str(stderr(&o).trim())
        .unwrap_or_else(|e| panic!("{args:?}: stderr is no JSON ({e}): {}", stderr(&o)))
}

/// The names in `dir`, sorted.
fn names_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// The store's queues and the log position its records end at.
fn contents(dir: &Path) -> (Vec<String>, u64) {
    let store = Store::open(dir, small_config()).unwrap();
    let end = store.storage_stats().end_position;
    (store.queue_names(), end)
}

#[test]
fn enqueue_and_import_create_nothing_without_create() {
    let _serial = serial();
    let base = tempfile::tempdir().unwrap();
    let f = fixture();
    let export = base.path().join("orders.ndjson");
    let e = export.to_str().unwrap();
    ok(&["export", f.path(), "--queue", "orders", "--out", e]);
    let before = names_in(base.path());

    // A mistyped directory: a typed error naming it and --create; nothing on disk.
    let typo = base.path().join("dtaa");
    let t = typo.to_str().unwrap();
    for args in [
        vec!["enqueue", t, "--queue", "orders", "x"],
        vec!["import", t, e],
    ] {
        let err = json_error(&args, 1);
        assert_eq!(err["error"]["kind"], "store_not_found", "{args:?}: {err}");
        assert_eq!(err["error"]["path"], t, "{err}");
        let message = err["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(t) && message.contains("--create"),
            "{message}"
        );
        // Without --json: one line, same exit code.
        let line = fails(&args, 1, "pass --create");
        assert_eq!(line.lines().count(), 1, "{line}");
    }
    assert!(!typo.exists(), "no store was created");
    assert_eq!(names_in(base.path()), before, "nothing else either");
    // An existing directory without a store stays empty.
    let empty = base.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let err = json_error(&["enqueue", empty.to_str().unwrap(), "-q", "q", "x"], 1);
    assert_eq!(err["error"]["kind"], "store_not_found", "{err}");
    assert!(names_in(&empty).is_empty(), "no segment was written");

    // An existing store and a mistyped queue: refused with the nearest name, nothing
    // written.
    let store_dir = base.path().join("store");
    empty_store(&store_dir);
    let d = store_dir.to_str().unwrap();
    ok(&["enqueue", d, "--queue", "orders", "first", "--create"]);
    let held = contents(&store_dir);
    let err = json_error(&["enqueue", d, "--queue", "ordrs", "x"], 1);
    assert_eq!(err["error"]["kind"], "unknown_queue", "{err}");
    assert_eq!(err["error"]["queue"], "ordrs");
    assert_eq!(err["error"]["suggestion"], "orders");
    assert_eq!(err["error"]["known"], serde_json::json!(["orders"]));
    fails(
        &["enqueue", d, "--queue", "ordrs", "x"],
        1,
        "did you mean \"orders\"?",
    );
    // An import into a queue the store lacks, by --queue or by the entries' own queue
    // (`orders`, which `other` lacks), is refused before anything is imported.
    let err = json_error(&["import", d, e, "--queue", "archiv"], 1);
    assert_eq!(err["error"]["kind"], "unknown_queue", "{err}");
    assert_eq!(err["error"]["queue"], "archiv", "{err}");
    assert_eq!(contents(&store_dir), held, "refusals wrote nothing");
    let other_dir = base.path().join("other");
    empty_store(&other_dir);
    let other = other_dir.to_str().unwrap();
    ok(&["enqueue", other, "--queue", "jobs", "x", "--create"]);
    let other_held = contents(&other_dir);
    let err = json_error(&["import", other, e], 1);
    assert_eq!(err["error"]["kind"], "unknown_queue", "{err}");
    assert_eq!(err["error"]["queue"], "orders", "{err}");
    assert_eq!(err["error"]["known"], serde_json::json!(["jobs"]), "{err}");
    let message = err["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("line 1: there is no queue \"orders\" to import into")
            && message.contains("the 0 entries before it were imported"),
        "{message}"
    );
    assert_eq!(contents(&other_dir), other_held, "nothing imported");

    // With --create: created, and said so (stderr; `created` in JSON).
    let fresh = base.path().join("fresh");
    let fr = fresh.to_str().unwrap();
    let o = run(&["enqueue", fr, "--queue", "jobs", "one", "--create"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        stderr(&o),
        format!("created store {fr}\ncreated queue jobs\n"),
        "says what it created"
    );
    assert!(
        stdout(&o).starts_with("enqueued message 0"),
        "{}",
        stdout(&o)
    );
    let v = json(&[
        "--json", "enqueue", fr, "--queue", "mail", "two", "--create",
    ]);
    assert_eq!(v["created"]["store"], Value::Null, "{v}");
    assert_eq!(v["created"]["queues"], serde_json::json!(["mail"]), "{v}");
    let v = json(&[
        "--json", "enqueue", fr, "--queue", "mail", "three", "--create",
    ]);
    assert_eq!(
        v["created"]["queues"],
        serde_json::json!([]),
        "nothing new: {v}"
    );
    let restored = base.path().join("restored");
    let r = restored.to_str().unwrap();
    let v = json(&["--json", "import", r, e, "--create"]);
    assert_eq!(v["imported"], 4, "{v}");
    assert_eq!(v["created"]["store"], r, "{v}");
    assert_eq!(v["created"]["queues"], serde_json::json!(["orders"]), "{v}");
    let o = run(&["import", r, e, "--queue", "archive", "--create"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stderr(&o), "created queue archive\n");
    let store = Store::open(&restored, small_config()).unwrap();
    assert_eq!(store.queue_names(), ["orders", "archive"]);
    assert_eq!(store.dlq("archive").unwrap().len(), 4);
}

#[test]
fn an_owner_creates_no_queue_without_create() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    empty_store(dir.path());
    let owner = Store::open(dir.path(), small_config().control_socket(true)).unwrap();
    owner.queue("orders").unwrap();
    let d = dir.path().to_str().unwrap();
    let err = json_error(&["enqueue", d, "--queue", "Orders", "x"], 1);
    assert_eq!(err["error"]["kind"], "unknown_queue", "{err}");
    assert_eq!(
        err["error"]["suggestion"], "orders",
        "case counts as nearest: {err}"
    );
    assert_eq!(owner.queue_names(), ["orders"], "the owner created nothing");
    let v = json(&["--json", "enqueue", d, "--queue", "audit", "x", "--create"]);
    assert_eq!(v["created"]["queues"], serde_json::json!(["audit"]), "{v}");
    assert_eq!(owner.queue_names(), ["orders", "audit"]);
    assert_eq!(owner.existing_queue("audit").unwrap().len(), 1);
}

#[test]
fn unknown_queue_names_suggest_the_nearest() {
    let _serial = serial();
    let f = fixture();
    let before = contents(f.dir.path());
    // A lookup by --queue: queue and DLQ names are both near candidates.
    for (typed, nearest) in [("ordrs", "orders"), ("emails-dql", "emails-dlq")] {
        for cmd in ["list", "analyze", "export"] {
            let err = json_error(&[cmd, f.path(), "--queue", typed], 1);
            assert_eq!(err["error"]["kind"], "unknown_queue", "{cmd}: {err}");
            assert_eq!(err["error"]["suggestion"], nearest, "{cmd}: {err}");
            assert_eq!(
                err["error"]["known"],
                serde_json::json!(["orders", "emails"]),
                "{err}"
            );
        }
        fails(
            &["list", f.path(), "--queue", typed],
            1,
            &format!("unknown queue {typed:?} (did you mean {nearest:?}?)"),
        );
    }
    for args in [
        vec!["replay", f.path(), "--all", "--to", "emals"],
        vec!["replay", f.path(), "--all", "--to", "emals", "--guarded"],
        vec!["delete", f.path(), "--all", "--queue", "emals", "--yes"],
        vec![
            "purge",
            f.path(),
            "--older-than",
            "1s",
            "-q",
            "emals",
            "--yes",
        ],
    ] {
        let err = json_error(&args, 1);
        assert_eq!(err["error"]["kind"], "unknown_queue", "{args:?}: {err}");
        assert_eq!(err["error"]["suggestion"], "emails", "{args:?}: {err}");
    }
    // Nothing near: no suggestion, and the few queues named.
    let err = json_error(&["list", f.path(), "--queue", "zzz"], 1);
    assert_eq!(err["error"]["suggestion"], Value::Null, "{err}");
    let message = err["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("the queues are: orders, emails"),
        "{message}"
    );
    assert_eq!(contents(f.dir.path()), before, "nothing was changed");
}

#[test]
fn an_error_kind_differing_only_in_case_says_so() {
    let _serial = serial();
    let f = fixture();
    let before = contents(f.dir.path());
    let text = ok(&["list", f.path(), "--error-kind", "timeout"]);
    assert!(
        text.contains("no matching DLQ entries")
            && text.contains("\"Timeout\" differs only in case")
            && text.contains(
                "the error kinds of orders-dlq: InvalidPayload (2), PaymentDeclined (1), \
                 Timeout (1)"
            ),
        "{text}"
    );
    assert!(
        !text.contains("emails-dlq"),
        "only the DLQ concerned: {text}"
    );
    let v = json(&["list", f.path(), "--error-kind", "timeout", "--json"]);
    assert_eq!(v["entries"], serde_json::json!([]));
    let hint = &v["error_kind_hint"];
    assert_eq!(hint["error_kind"], "timeout", "{v}");
    assert_eq!(hint["suggestion"], "Timeout", "{v}");
    assert_eq!(hint["known"]["orders-dlq"]["InvalidPayload"], 2, "{v}");
    // The changing commands select nothing, and say why.
    let v = json(&["replay", f.path(), "--error-kind", "TIMEOUT", "--json"]);
    assert_eq!(v["replayed"], serde_json::json!([]), "{v}");
    assert_eq!(v["error_kind_hint"]["suggestion"], "Timeout", "{v}");
    let text = ok(&["delete", f.path(), "--error-kind", "invalidpayload"]);
    assert!(
        text.contains("deleted 0 entries") && text.contains("\"InvalidPayload\" differs"),
        "{text}"
    );
    let text = ok(&[
        "analyze",
        f.path(),
        "--error-kind",
        "timeout",
        "-q",
        "orders",
    ]);
    assert!(text.contains("\"Timeout\" differs only in case"), "{text}");
    fails(
        &["replay", f.path(), "--guarded", "--error-kind", "timeout"],
        1,
        "\"Timeout\" differs only in case",
    );
    // A kind nobody has, in any case: the plain answer.
    let text = ok(&["list", f.path(), "--error-kind", "Nope"]);
    assert_eq!(text, "no matching DLQ entries\n");
    let v = json(&["list", f.path(), "--error-kind", "Nope", "--json"]);
    assert!(v.get("error_kind_hint").is_none(), "{v}");
    assert_eq!(contents(f.dir.path()), before, "nothing was changed");
}

/// A store whose `bulk` DLQ holds `n` entries of kind `Bad`, written fast.
fn bulk_store(dir: &Path, n: usize) {
    let store = Store::open(dir, small_config().durability(Durability::Never)).unwrap();
    let q = store.queue("bulk").unwrap();
    let payloads: Vec<String> = (0..n).map(|i| format!("job-{i}")).collect();
    q.enqueue_batch(&payloads).unwrap();
    let failure = Failure::permanent("Bad", "no");
    for msg in q.lease(n).unwrap() {
        q.dead_letter(&msg, &FailureReport::new(&failure)).unwrap();
    }
    store.close().unwrap();
}

#[test]
fn bulk_replays_and_deletes_need_yes() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    bulk_store(dir.path(), 1001);
    let d = dir.path().to_str().unwrap();
    let before = contents(dir.path());
    for args in [
        vec!["replay", d, "--all"],
        vec!["replay", d, "--error-kind", "Bad", "--to", "bulk"],
        vec!["delete", d, "--error-kind", "Bad"],
    ] {
        let err = fails(&args, 2, "--yes");
        assert!(
            err.contains("1001 entries of bulk-dlq"),
            "gives the count: {err}"
        );
        assert_eq!(err.lines().count(), 1, "{err}");
    }
    let err = json_error(&["replay", d, "--all"], 2);
    assert!(
        err["error"]["message"].as_str().unwrap().contains("1001"),
        "{err}"
    );
    assert_eq!(contents(dir.path()), before, "nothing was changed");
    // A dry run asks nothing; 1,000 entries are not more than 1,000.
    let dry = json(&["replay", d, "--all", "--dry-run", "--json"]);
    assert_eq!(dry["replayed"].as_array().unwrap().len(), 1001);
    let v = json(&["replay", d, "--all", "--limit", "1000", "--json"]);
    assert_eq!(v["replayed"].as_array().unwrap().len(), 1000);
    let store = Store::open(dir.path(), small_config()).unwrap();
    assert_eq!(store.dlq("bulk").unwrap().len(), 1);
    assert_eq!(store.existing_queue("bulk").unwrap().len(), 1000);
    drop(store);

    // With --yes the bulk change goes through.
    let again = tempfile::tempdir().unwrap();
    bulk_store(again.path(), 1001);
    let a = again.path().to_str().unwrap();
    let v = json(&["delete", a, "--error-kind", "Bad", "--yes", "--json"]);
    assert_eq!(v["deleted"], 1001, "{v}");
    let store = Store::open(again.path(), small_config()).unwrap();
    assert!(store.dlq("bulk").unwrap().is_empty());
    drop(store);
    // A purge says how many entries it would delete.
    bulk_store(again.path(), 3);
    fails(
        &["purge", a, "--older-than", "0s", "--include-pending"],
        2,
        "delete 3 entries dead-lettered before",
    );
}
