//! `replay` with new payloads: `--transform EXPR` (a jq expression over each JSON payload),
//! `--payload-file FILE` and `--edit` (with `EDITOR` set to a script that edits the file).
//!
//! The first test runs a real owner process (this test binary run again) with a worker
//! pool on `orders`, which prints every payload its handler receives: the dry run prints a
//! diff per entry and changes nothing; the replay, carried out by the owner through its
//! control socket, hands the handler the transformed payloads and leaves the entries the
//! expression failed on in the DLQ with the reason printed. The second runs on a store the
//! tool takes itself.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Output, Stdio};
use std::time::{Duration, Instant};

use deadletter::queue::FailureReport;
use deadletter::{Config, Failure, Filter, Message, Page, Store, WorkerPool};
use serde_json::Value;

use crate::fixture::small_config;
use crate::run::{fails, ids_of, json, run, serial, stderr, stdout, BIN};

const EXPR: &str = ".orderId |= ascii_upcase";

/// The payloads the tests dead-letter in `orders`, in order: two to upper-case, one not
/// JSON, one on which the expression fails, one it leaves as it is.
const PAYLOADS: [&str; 5] = [
    r#"{"orderId":"ord-1","total":10.50}"#,
    r#"{"orderId":"ord-2"}"#,
    "orderId=ord;3",
    r#"{"orderId":4}"#,
    r#"{ "orderId": "ORD-5" }"#,
];

/// Writes a store whose `orders` DLQ holds [`PAYLOADS`], with `config`; returns their ids.
fn dead_letters(dir: &Path, config: Config) -> Vec<u64> {
    let store = Store::open(dir, config).unwrap();
    let orders = store.queue("orders").unwrap();
    orders.enqueue_batch(&PAYLOADS).unwrap();
    let bug = Failure::permanent("BadOrderId", "order ids must be upper case");
    let mut ids = Vec::new();
    for m in orders.lease(PAYLOADS.len()).unwrap() {
        orders.dead_letter(&m, &FailureReport::new(&bug)).unwrap();
        ids.push(m.id());
    }
    store.close().unwrap();
    ids
}

/// The owner: runs only when the parent sets `DEADLETTER_TEST_TRANSFORM_OWNER` (the store
/// directory). It holds the store with its control socket and a pool on `orders` whose
/// handler prints `handled <payload>` for each message, prints `ready`, and stops when
/// its standard input closes.
#[test]
#[ignore = "the owner process of transform::a_transform_reaches_the_owners_handler"]
fn transform_owner_process() {
    let Ok(dir) = std::env::var("DEADLETTER_TEST_TRANSFORM_OWNER") else {
        return;
    };
    let config = small_config().preallocate(false).control_socket(true);
    let store = Store::open(&dir, config).expect("owner opens the store");
    let orders = store.queue("orders").unwrap();
    let pool = WorkerPool::new(&orders)
        .workers(1)
        .start(|m: &Message| {
            println!("handled {}", String::from_utf8_lossy(m.payload()));
            Ok::<(), Failure>(())
        })
        .unwrap();
    println!("ready");
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
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
                "transform::transform_owner_process",
                "--ignored",
                "--nocapture",
                "-q",
            ])
            .env("DEADLETTER_TEST_TRANSFORM_OWNER", dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the owner process");
        let out = BufReader::new(child.stdout.take().unwrap());
        let mut owner = Owner { child, out };
        owner.next_line_starting("ready");
        owner
    }

    /// The owner's next output line starting with `prefix`, without the prefix.
    fn next_line_starting(&mut self, prefix: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut line = String::new();
        while Instant::now() < deadline {
            line.clear();
            if self.out.read_line(&mut line).unwrap() == 0 {
                panic!("the owner exited before printing {prefix:?}");
            }
            if let Some(rest) = line.strip_prefix(prefix) {
                return rest.trim().to_string();
            }
        }
        panic!("the owner printed no {prefix:?}");
    }

    fn stop(mut self) {
        self.child.stdin.take().unwrap().write_all(b"\n").unwrap();
        self.next_line_starting("stopped");
        assert!(self.child.wait().unwrap().success(), "the owner failed");
    }
}

/// The DLQ entries of `orders`, by id, with their payloads (read on a snapshot).
fn dlq_payloads(d: &str) -> Vec<(u64, String)> {
    let list = json(&["--json", "list", d, "--queue", "orders"]);
    ids_of(&list)
        .into_iter()
        .zip(list["entries"].as_array().unwrap())
        .map(|(id, e)| (id, e["payload_text"].as_str().unwrap_or("").to_string()))
        .collect()
}

/// Runs the tool, expecting exit `code`; returns what it printed on stdout.
fn exits(args: &[&str], code: i32) -> String {
    let o = run(args);
    assert_eq!(
        o.status.code(),
        Some(code),
        "{args:?}: {}\n{}",
        stderr(&o),
        stdout(&o)
    );
    stdout(&o)
}

#[test]
fn a_transform_reaches_the_owners_handler() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("store");
    let ids = dead_letters(&dir, small_config().preallocate(false));
    let d = dir.to_str().unwrap();
    let mut owner = Owner::start(&dir);
    let before = dlq_payloads(d);
    assert_eq!(before.len(), 5);

    // The dry run: a diff per entry, the summary, the reasons; nothing changes (exit 1:
    // some entries would fail).
    let dry = exits(
        &[
            "replay",
            d,
            "--all",
            "--queue",
            "orders",
            "--transform",
            EXPR,
            "--dry-run",
        ],
        1,
    );
    assert!(
        dry.contains(&format!("--- entry {} (now)\n", ids[0])),
        "{dry}"
    );
    assert!(
        dry.contains("-  \"orderId\": \"ord-1\",\n+  \"orderId\": \"ORD-1\",\n"),
        "{dry}"
    );
    assert!(dry.contains("   \"total\": 10.50\n"), "{dry}");
    assert!(
        dry.contains("-  \"orderId\": \"ord-2\"\n+  \"orderId\": \"ORD-2\"\n"),
        "{dry}"
    );
    assert!(
        dry.contains(&format!("entry {}: payload unchanged\n", ids[4])),
        "{dry}"
    );
    assert!(
        dry.contains(&format!(
            "would replay 3 of 5 selected entries to orders (jq: {EXPR}): 2 transformed, \
             1 unchanged, 2 failed\n"
        )),
        "{dry}"
    );
    assert!(
        dry.contains(&format!("failed {}: the payload is not JSON", ids[2])),
        "{dry}"
    );
    assert!(
        dry.contains(&format!(
            "failed {}: the expression failed: cannot use 4 as string",
            ids[3]
        )),
        "{dry}"
    );
    assert!(dry.contains("dry run: nothing was changed"), "{dry}");
    assert_eq!(dlq_payloads(d), before);
    // Its JSON form has each payload before and after.
    let o = run(&[
        "--json",
        "replay",
        d,
        "--all",
        "--queue",
        "orders",
        "--transform",
        EXPR,
        "--dry-run",
    ]);
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["payloads"]["expression"], EXPR);
    assert_eq!(doc["transformed"], 2);
    assert_eq!(
        doc["changes"][0]["after"]["text"],
        r#"{"orderId":"ORD-1","total":10.50}"#
    );
    assert_eq!(doc["failed"].as_array().unwrap().len(), 2);

    // For real, through the owner: the handler receives the transformed payloads, and the
    // unchanged one as it was; the two failures stay in the DLQ, reasons printed.
    let done = exits(
        &[
            "replay",
            d,
            "--all",
            "--queue",
            "orders",
            "--transform",
            EXPR,
        ],
        1,
    );
    assert!(
        done.contains("replayed 3 of 5 selected entries to orders (jq: "),
        "{done}"
    );
    assert!(
        done.contains(&format!("failed {}: the payload is not JSON", ids[2])),
        "{done}"
    );
    let mut handled: Vec<String> = (0..3)
        .map(|_| owner.next_line_starting("handled "))
        .collect();
    handled.sort();
    assert_eq!(
        handled,
        [
            r#"{ "orderId": "ORD-5" }"#,
            r#"{"orderId":"ORD-1","total":10.50}"#,
            r#"{"orderId":"ORD-2"}"#,
        ]
    );
    let left: Vec<u64> = dlq_payloads(d).into_iter().map(|(id, _)| id).collect();
    assert_eq!(left, [ids[2], ids[3]]);
    // The audit trail records the expression with the replay, as `trace` shows.
    let life = json(&["--json", "trace", d, &ids[0].to_string()]);
    let replayed = life["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["event"] == "replayed")
        .unwrap_or_else(|| panic!("no replay step: {life}"))
        .clone();
    assert_eq!(replayed["detail"], format!("jq: {EXPR}"), "{life}");
    let text = run(&["trace", d, &ids[0].to_string()]);
    assert!(
        stdout(&text).contains(&format!("(corrected payload): jq: {EXPR}")),
        "{}",
        stdout(&text)
    );
    owner.stop();
}

/// Runs the tool with `EDITOR` set to `editor` (and `VISUAL` unset), stdin not a terminal.
fn run_editing(args: &[&str], editor: &str) -> Output {
    Command::new(BIN)
        .args(args)
        .env("EDITOR", editor)
        .env_remove("VISUAL")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn payload_file_edit_and_refusals_on_a_store_the_tool_takes() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("store");
    let ids = dead_letters(&dir, small_config().preallocate(false));
    let d = dir.to_str().unwrap();
    let before = dlq_payloads(d);

    // An invalid expression is refused before anything is read: exit 2, typed.
    fails(
        &["replay", d, "--all", "--transform", ".orderId |="],
        2,
        "invalid jq expression",
    );
    let o = run(&["--json", "replay", d, "--all", "--transform", "nosuch(1)"]);
    assert_eq!(o.status.code(), Some(2));
    let err: Value = serde_json::from_slice(&o.stderr).unwrap();
    assert_eq!(err["error"]["kind"], "bad_expression");
    assert_eq!(err["error"]["problems"][0], "undefined filter `nosuch`");
    assert_eq!(dlq_payloads(d), before);

    // --payload-file: the file's bytes, as they are.
    let file = tmp.path().join("fixed.txt");
    std::fs::write(&file, b"orderId=ORD-3\n").unwrap();
    let id3 = ids[2].to_string();
    let out = exits(
        &["replay", d, &id3, "--payload-file", file.to_str().unwrap()],
        0,
    );
    assert!(
        out.contains("replayed 1 of 1 selected entry to orders (payload from file"),
        "{out}"
    );

    // --edit: refused without a terminal unless --yes; with it, the script's edit is
    // replayed, its diff shown first.
    let id2 = ids[1].to_string();
    let script = tmp.path().join("edit.sh");
    std::fs::write(&script, "#!/bin/sh\nsed -i 's/ord-2/ORD-2/' \"$1\"\n").unwrap();
    let editor = format!("sh {}", script.display());
    let refused = run_editing(&["replay", d, &id2, "--edit"], &editor);
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("not a terminal"),
        "{}",
        stderr(&refused)
    );
    let o = run_editing(&["replay", d, &id2, "--edit", "--yes"], &editor);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains("-  \"orderId\": \"ord-2\"\n+  \"orderId\": \"ORD-2\"\n"),
        "{out}"
    );
    assert!(
        out.contains("replayed 1 of 1 selected entry to orders (edited)"),
        "{out}"
    );
    // An editor that changes nothing replays nothing.
    let id1 = ids[0].to_string();
    let o = run_editing(&["replay", d, &id1, "--edit", "--yes"], "true");
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("left as it was: nothing was replayed"),
        "{}",
        stderr(&o)
    );

    // The consumer gets the two new payloads, in the order they were replayed; three
    // entries are left.
    let store = Store::open(&dir, small_config()).unwrap();
    let orders = store.existing_queue("orders").unwrap();
    let got: Vec<(u64, Vec<u8>)> = orders
        .lease(10)
        .unwrap()
        .iter()
        .map(|m| (m.id(), m.payload().to_vec()))
        .collect();
    assert_eq!(
        got,
        [
            (ids[2], b"orderId=ORD-3\n".to_vec()),
            (ids[1], br#"{"orderId":"ORD-2"}"#.to_vec())
        ]
    );
    let left = orders.dlq().list(&Filter::all(), Page::first(10)).unwrap();
    assert_eq!(
        left.iter().map(|e| e.id()).collect::<Vec<_>>(),
        [ids[0], ids[3], ids[4]]
    );
    // The audit trail says where each new payload came from.
    let details: Vec<Option<String>> = store
        .audit_trail(10)
        .into_iter()
        .map(|e| e.detail)
        .collect();
    assert_eq!(
        details,
        [
            Some(format!("payload from file {}", file.display())),
            Some("edited".to_string())
        ]
    );
}
