//! The `deadletter` binary, run for real against store directories written by the library:
//! every command, its `--json` output parsed and checked against the library, exit codes
//! (2 for bad usage, 1 for a failed operation or a locked store), and export/import
//! round-tripping payload bytes exactly.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use deadletter::{
    Clock, Config, DeadLetter, EnqueueOptions, Failure, FailureReport, Filter, ManualClock, Page,
    QueueOptions, Store, SystemClock,
};
use deadletter_dashboard::time::format_utc;
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_deadletter");

/// Bytes before a segment's first record: the header docs/FORMAT.md documents (the tests
/// damage segment files at known places, as a user's disk could).
const SEGMENT_HEADER_LEN: usize = 32;
const MIN: u64 = 60_000;

/// Tests run one at a time: a child spawned by one test inherits, until it calls exec, the
/// descriptors another test's thread has open, including a store's lock file; a test that
/// drops its store and runs the tool at that moment would find the store still locked.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn run(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run deadletter")
}

fn run_stdin(args: &[&str], input: &[u8]) -> Output {
    let mut child = Command::new(BIN)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn deadletter");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input)
        .expect("write stdin");
    child.wait_with_output().expect("wait")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs and expects exit 0 and JSON on stdout.
fn json(args: &[&str]) -> Value {
    let o = run(args);
    assert!(
        o.status.success(),
        "{args:?} failed: {}\n{}",
        stderr(&o),
        stdout(&o)
    );
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{args:?} printed no JSON ({e}): {}", stdout(&o)))
}

fn ok(args: &[&str]) -> String {
    let o = run(args);
    assert!(
        o.status.success(),
        "{args:?} failed: {}\n{}",
        stderr(&o),
        stdout(&o)
    );
    stdout(&o)
}

/// Expects exit `code` and one line on stderr containing `needle`.
fn fails(args: &[&str], code: i32, needle: &str) -> String {
    let o = run(args);
    assert_eq!(
        o.status.code(),
        Some(code),
        "{args:?}: stdout {} stderr {}",
        stdout(&o),
        stderr(&o)
    );
    let err = stderr(&o);
    assert!(
        err.contains(needle),
        "{args:?}: stderr {err:?} lacks {needle:?}"
    );
    err
}

/// A store with known DLQ contents, written by the library with a clock that starts three
/// hours ago, then closed.
///
/// `orders` (2 attempts): ORD-1 acked; ORD-2 not JSON (InvalidPayload, permanent);
/// ORD-3 not UTF-8 (InvalidPayload, permanent); ORD-4 card declined (PaymentDeclined,
/// permanent); ORD-5 times out twice (Timeout, dead-lettered on attempt 2); ORD-6 waits.
/// `emails`: one SmtpError (permanent), one acked.
struct Fixture {
    dir: tempfile::TempDir,
    /// Payloads by their orderId / name.
    payloads: BTreeMap<&'static str, Vec<u8>>,
}

impl Fixture {
    fn path(&self) -> &str {
        self.dir.path().to_str().expect("utf-8 temp path")
    }

    fn open(&self) -> Store {
        Store::open(self.dir.path(), small_config()).expect("reopen")
    }

    /// DLQ entries by payload name, read with the library.
    fn entries(&self) -> BTreeMap<String, DeadLetter> {
        let store = self.open();
        let mut out = BTreeMap::new();
        for q in store.queue_names() {
            let dlq = store.existing_queue(&q).unwrap().dlq();
            for e in dlq.list(&Filter::all(), Page::first(1000)).unwrap() {
                let name = self
                    .payloads
                    .iter()
                    .find(|(_, p)| **p == e.payload)
                    .map(|(n, _)| n.to_string())
                    .expect("known payload");
                out.insert(name, e);
            }
        }
        out
    }
}

/// 1 MiB segments: the tool opens a store with the segment size its files show, so each
/// open of the debug-built binary scans 1 MiB, not the default 64 MiB.
fn small_config() -> Config {
    Config::default()
        .segment_size(1 << 20)
        .max_message_size(256 << 10)
}

/// Creates an empty store with small segments.
fn empty_store(dir: &Path) {
    let store = Store::open(dir, small_config()).unwrap();
    store.close().unwrap();
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let start = SystemClock.now_ms() - 3 * 60 * MIN;
    let clock = ManualClock::new(start);
    let config = small_config();
    let store = Store::open(dir.path(), config.clock(clock.clone())).unwrap();
    let opts = QueueOptions::default().max_attempts(2);
    let orders = store.queue_with("orders", opts.clone()).unwrap();
    let emails = store.queue_with("emails", opts).unwrap();
    let mut payloads: BTreeMap<&'static str, Vec<u8>> = BTreeMap::new();
    payloads.insert("ORD-1", br#"{"orderId":"ORD-1"}"#.to_vec());
    payloads.insert("ORD-2", b"orderId=ORD-2;;;".to_vec());
    payloads.insert("ORD-3", vec![0x00, 0x9f, 0x92, 0x96, 0xff, b'\n', 0xc3]);
    payloads.insert(
        "ORD-4",
        br#"{"orderId":"ORD-4","card":"declined"}"#.to_vec(),
    );
    payloads.insert("ORD-5", br#"{"orderId":"ORD-5","slow":true}"#.to_vec());
    payloads.insert("ORD-6", br#"{"orderId":"ORD-6"}"#.to_vec());
    payloads.insert("MAIL-1", br#"{"to":"bad@"}"#.to_vec());
    payloads.insert("MAIL-2", br#"{"to":"ok@mail.example"}"#.to_vec());
    for name in ["ORD-1", "ORD-2", "ORD-3", "ORD-4", "ORD-5"] {
        let o = EnqueueOptions::new().attribute("orderId", name);
        orders.enqueue_with(&payloads[name], &o).unwrap();
    }
    for name in ["MAIL-1", "MAIL-2"] {
        emails.enqueue(&payloads[name]).unwrap();
    }
    let handle = |p: &[u8]| -> Result<(), Failure> {
        let Ok(text) = std::str::from_utf8(p) else {
            return Err(Failure::permanent("InvalidPayload", "payload is not UTF-8"));
        };
        if text.contains("\"to\":\"bad@\"") {
            return Err(Failure::permanent("SmtpError", "550 no such mailbox"));
        }
        if !text.starts_with('{') {
            return Err(
                Failure::permanent("InvalidPayload", "payload is not valid JSON")
                    .with_context("step", "parse"),
            );
        }
        if text.contains("declined") {
            return Err(Failure::permanent("PaymentDeclined", "card declined"));
        }
        if text.contains("slow") {
            return Err(Failure::transient("Timeout", "upstream timed out"));
        }
        Ok(())
    };
    for queue in [&orders, &emails] {
        loop {
            let batch = queue.lease(1).unwrap();
            let Some(msg) = batch.into_iter().next() else {
                if queue.is_empty() {
                    break;
                }
                clock.advance(MIN);
                continue;
            };
            clock.advance(10 * MIN);
            match handle(msg.payload()) {
                Ok(()) => queue.ack(&msg).unwrap(),
                Err(f) => {
                    let report = FailureReport::new(&f).worker("w1");
                    queue.retry(&msg, &report, clock.now_ms()).unwrap();
                }
            }
        }
    }
    orders.enqueue(&payloads["ORD-6"]).unwrap();
    store.close().unwrap();
    Fixture { dir, payloads }
}

fn ids_of(v: &Value) -> Vec<u64> {
    v["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| e["id"].as_u64().expect("id"))
        .collect()
}

#[test]
fn stats_matches_the_library() {
    let _serial = serial();
    let f = fixture();
    let v = json(&["stats", f.path(), "--json"]);
    let m = f.open().metrics_snapshot();
    let queues = v["queues"].as_array().unwrap();
    assert_eq!(queues.len(), 2);
    for (j, q) in queues.iter().zip(&m.queues) {
        assert_eq!(j["queue"], q.queue.as_str());
        assert_eq!(j["dlq"], q.dlq.as_str());
        for (field, want) in [
            ("depth", q.depth),
            ("in_flight", q.in_flight),
            ("enqueued", q.enqueued),
            ("acked", q.acked),
            ("retried", q.retried),
            ("dead_lettered", q.dead_lettered),
            ("expired", q.expired),
            ("dlq_size", q.dlq_size),
            ("dlq_pending", q.dlq_pending),
        ] {
            assert_eq!(j[field].as_u64(), Some(want), "{} {field}", q.queue);
        }
    }
    assert_eq!(queues[0]["dlq_size"], 4);
    assert_eq!(queues[0]["depth"], 1);
    assert_eq!(queues[0]["dlq_stats"]["by_error_kind"]["InvalidPayload"], 2);
    assert_eq!(queues[1]["dlq_stats"]["by_error_kind"]["SmtpError"], 1);
    // The human form is an aligned table with the same numbers.
    let text = ok(&["stats", f.path()]);
    let header = text.lines().next().unwrap();
    assert!(header.starts_with("QUEUE") && header.contains("DEAD-LETTERED"));
    let orders_line = text.lines().find(|l| l.starts_with("orders ")).unwrap();
    assert!(orders_line.contains("orders-dlq"), "{orders_line}");
    assert!(text.contains("PaymentDeclined"));
}

#[test]
fn list_filters_and_pages() {
    let _serial = serial();
    let f = fixture();
    let entries = f.entries();
    let all = json(&["list", f.path(), "--json"]);
    assert_eq!(ids_of(&all).len(), 5);
    assert!(all["next_cursor"].is_null());

    // Paging: two at a time across both DLQs, the cursor printed by each page.
    let mut seen = Vec::new();
    let mut cursor: Option<u64> = None;
    loop {
        let after = cursor.map(|c| c.to_string());
        let mut args = vec!["list", f.path(), "--json", "--limit", "2"];
        if let Some(a) = &after {
            args.extend(["--after", a.as_str()]);
        }
        let page = json(&args);
        seen.extend(ids_of(&page));
        match page["next_cursor"].as_u64() {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    assert_eq!(seen, ids_of(&all));

    let kind = json(&["list", f.path(), "--json", "--error-kind", "InvalidPayload"]);
    let mut got = ids_of(&kind);
    got.sort();
    let mut want = vec![entries["ORD-2"].id(), entries["ORD-3"].id()];
    want.sort();
    assert_eq!(got, want);

    let msg = json(&["list", f.path(), "--json", "--message", "declined"]);
    assert_eq!(ids_of(&msg), vec![entries["ORD-4"].id()]);

    let attempts = json(&["list", f.path(), "--json", "--min-attempts", "2"]);
    assert_eq!(ids_of(&attempts), vec![entries["ORD-5"].id()]);

    let queue = json(&["list", f.path(), "--json", "--queue", "emails"]);
    assert_eq!(ids_of(&queue), vec![entries["MAIL-1"].id()]);

    // Time range: [dead-lettered time of ORD-3, that of ORD-5).
    let since = entries["ORD-3"].dlq.dead_lettered_at_ms.to_string();
    let until = entries["ORD-5"].dlq.dead_lettered_at_ms.to_string();
    let range = json(&[
        "list",
        f.path(),
        "--json",
        "--queue",
        "orders",
        "--since",
        &since,
        "--until",
        &until,
    ]);
    assert_eq!(
        ids_of(&range),
        vec![entries["ORD-3"].id(), entries["ORD-4"].id()]
    );
    // Relative times: everything was dead-lettered within the last 4 hours.
    assert_eq!(
        ids_of(&json(&["list", f.path(), "--json", "--since", "4h"])).len(),
        5
    );
    assert_eq!(
        ids_of(&json(&["list", f.path(), "--json", "--until", "4h"])).len(),
        0
    );

    // Each listed envelope is complete: payload bytes exactly, failure kept.
    let e3 = all["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["id"] == entries["ORD-3"].id())
        .unwrap();
    let back = deadletter_dashboard::export::envelope_from_json(e3).unwrap();
    assert_eq!(back, entries["ORD-3"]);
    assert!(
        e3.get("payload_text").is_none(),
        "binary payload has no text"
    );

    let text = ok(&["list", f.path(), "--limit", "2"]);
    assert!(text.starts_with("ID") || text.trim_start().starts_with("ID"));
    assert!(text.contains("next page: --after"), "{text}");
}

#[test]
fn show_prints_the_whole_envelope() {
    let _serial = serial();
    let f = fixture();
    let entries = f.entries();
    let e2 = &entries["ORD-2"];
    let id = e2.id().to_string();
    let v = json(&["show", f.path(), &id, "--json"]);
    assert_eq!(v["id"], e2.id());
    assert_eq!(v["payload_text"], "orderId=ORD-2;;;");
    assert_eq!(v["payload_encoding"], "base64");
    assert_eq!(v["failure"]["error_kind"], "InvalidPayload");
    assert_eq!(v["failure"]["context"]["step"], "parse");
    assert_eq!(v["metadata"]["attributes"]["orderId"], "ORD-2");
    assert_eq!(
        deadletter_dashboard::export::envelope_from_json(&v).unwrap(),
        *e2
    );

    let text = ok(&["show", f.path(), &id]);
    assert!(text.contains("InvalidPayload: payload is not valid JSON"));
    assert!(text.contains("UTF-8 text"));
    assert!(text.contains("orderId=ORD-2;;;"));
    // Times in the front ends' one form (RFC 3339, UTC), which --since reads back.
    let dead_lettered = format_utc(e2.dlq.dead_lettered_at_ms);
    assert!(
        text.lines()
            .any(|l| l.starts_with("dead-lettered") && l.ends_with(&dead_lettered)),
        "{text}"
    );
    assert_eq!(dead_lettered.len(), "2026-11-29T18:53:00Z".len());
    assert!(dead_lettered.ends_with('Z') && dead_lettered.as_bytes()[10] == b'T');
    let since = json(&["list", f.path(), "--since", &dead_lettered, "--json"]);
    assert!(ids_of(&since).contains(&e2.id()), "{since}");

    let hex = ok(&["show", f.path(), &id, "--hex"]);
    assert!(hex.contains("6f 72 64 65 72 49 64"), "{hex}");
    let vhex = json(&["show", f.path(), &id, "--hex", "--json"]);
    assert_eq!(vhex["payload_encoding"], "hex");
    // "orderId=ORD-2;;;" in lower-case hex.
    assert_eq!(vhex["payload"], "6f7264657249643d4f52442d323b3b3b");

    let binary = entries["ORD-3"].id().to_string();
    let text = ok(&["show", f.path(), &binary]);
    assert!(
        text.contains("hex") && text.contains("00 9f 92 96 ff 0a c3"),
        "{text}"
    );

    fails(
        &["show", f.path(), "999999"],
        1,
        "no DLQ entry with id 999999",
    );
}

#[test]
fn analyze_reports_patterns() {
    let _serial = serial();
    let f = fixture();
    let v = json(&["analyze", f.path(), "--json"]);
    let dlqs = v["dlqs"].as_array().unwrap();
    assert_eq!(dlqs.len(), 2);
    let orders = &dlqs[0];
    assert_eq!(orders["dlq"], "orders-dlq");
    let a = &orders["analysis"];
    assert_eq!(a["total"], 4);
    assert_eq!(a["by_error_kind"]["InvalidPayload"], 2);
    assert_eq!(a["by_hour_of_day"].as_array().unwrap().len(), 24);
    let lib = f
        .open()
        .dlq("orders-dlq")
        .unwrap()
        .analyze(&Filter::all())
        .unwrap();
    assert_eq!(a["average_attempts"].as_f64(), Some(lib.average_attempts));
    let one = json(&["analyze", f.path(), "--json", "--queue", "emails"]);
    assert_eq!(one["dlqs"][0]["analysis"]["total"], 1);
    let text = ok(&["analyze", f.path(), "--queue", "orders"]);
    assert!(text.contains("orders-dlq: 4 entries"), "{text}");
    assert!(text.contains("InvalidPayload"));
}

#[test]
fn replay_one_filter_all_and_dry_run() {
    let _serial = serial();
    let f = fixture();
    let entries = f.entries();
    let before = f.open().metrics_snapshot();

    // A dry run names what would move and changes nothing.
    let dry = json(&[
        "replay",
        f.path(),
        "--error-kind",
        "InvalidPayload",
        "--dry-run",
        "--json",
    ]);
    assert_eq!(dry["dry_run"], true);
    assert_eq!(dry["replayed"].as_array().unwrap().len(), 2);
    assert_eq!(dry["replayed"][0]["to"], "orders");
    let text = ok(&[
        "replay",
        f.path(),
        "--error-kind",
        "InvalidPayload",
        "--dry-run",
    ]);
    assert!(text.contains("would replay 2") && text.contains("nothing was changed"));
    let after = f.open().metrics_snapshot();
    assert_eq!(after, same_but_time(&before, &after));

    // One id, attempts reset, to the original queue.
    let id = entries["ORD-5"].id().to_string();
    let one = json(&["replay", f.path(), &id, "--reset-attempts", "--json"]);
    assert_eq!(
        one["replayed"][0]["id"].as_u64(),
        Some(entries["ORD-5"].id())
    );
    let store = f.open();
    let orders = store.existing_queue("orders").unwrap();
    assert_eq!(orders.len(), 2);
    assert_eq!(orders.dlq().len(), 3);
    drop((orders, store));

    // The same id again: it is no longer in a DLQ.
    fails(
        &["replay", f.path(), &id],
        1,
        &format!("no DLQ entry with id {id}"),
    );

    // A filter, to another queue (created on the fly).
    let moved = json(&[
        "replay",
        f.path(),
        "--error-kind",
        "PaymentDeclined",
        "--to",
        "orders-manual",
        "--json",
    ]);
    assert_eq!(moved["replayed"][0]["to"], "orders-manual");
    let store = f.open();
    assert_eq!(store.existing_queue("orders-manual").unwrap().len(), 1);
    drop(store);

    // --all of one DLQ.
    let all = json(&["replay", f.path(), "--all", "--queue", "emails", "--json"]);
    assert_eq!(all["replayed"].as_array().unwrap().len(), 1);
    let store = f.open();
    assert!(store.dlq("emails-dlq").unwrap().is_empty());
    assert_eq!(store.dlq("orders-dlq").unwrap().len(), 2);
}

/// `before` with the time-dependent fields of `now` (what a dry run may not change is the
/// rest).
fn same_but_time(before: &deadletter::Metrics, now: &deadletter::Metrics) -> deadletter::Metrics {
    let mut b = before.clone();
    b.at_ms = now.at_ms;
    for (q, n) in b.queues.iter_mut().zip(&now.queues) {
        q.oldest_message_age_ms = n.oldest_message_age_ms;
        q.dlq_oldest_age_ms = n.dlq_oldest_age_ms;
    }
    b
}

#[test]
fn delete_and_purge() {
    let _serial = serial();
    let f = fixture();
    let entries = f.entries();
    let id = entries["ORD-4"].id().to_string();
    let dry = json(&["delete", f.path(), &id, "--dry-run", "--json"]);
    assert_eq!(dry["deleted"], 1);
    assert_eq!(f.open().dlq("orders-dlq").unwrap().len(), 4);
    let del = json(&["delete", f.path(), &id, "--json"]);
    assert_eq!(del["deleted"], 1);
    assert_eq!(f.open().dlq("orders-dlq").unwrap().len(), 3);
    let by_kind = ok(&["delete", f.path(), "--error-kind", "InvalidPayload"]);
    assert!(by_kind.contains("deleted 2 entries"), "{by_kind}");
    assert_eq!(f.open().dlq("orders-dlq").unwrap().len(), 1);

    // Purge keeps pending entries unless asked: nothing is reprocessed here.
    let dry = json(&[
        "purge",
        f.path(),
        "--older-than",
        "1m",
        "--dry-run",
        "--json",
    ]);
    assert_eq!(dry["deleted"], 0);
    assert_eq!(dry["kept_pending"], 2);
    let none = json(&[
        "purge",
        f.path(),
        "--older-than",
        "30d",
        "--include-pending",
        "--json",
    ]);
    assert_eq!(none["deleted"], 0, "nothing is 30 days old");
    let text = ok(&[
        "purge",
        f.path(),
        "--older-than",
        "90m",
        "--include-pending",
    ]);
    assert!(text.contains("deleted 2 entries"), "{text}");
    let store = f.open();
    assert!(store.dlq("orders-dlq").unwrap().is_empty());
    assert!(store.dlq("emails-dlq").unwrap().is_empty());
}

#[test]
fn export_then_import_round_trips_bytes() {
    let _serial = serial();
    let f = fixture();
    let entries = f.entries();
    // To stdout, all DLQs.
    let o = run(&["export", f.path()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let lines: Vec<&str> = std::str::from_utf8(&o.stdout).unwrap().lines().collect();
    assert_eq!(lines.len(), 5);
    assert!(stderr(&o).contains("exported 5 entries to stdout"));
    // No progress bar in a pipe: no carriage returns on stderr.
    assert!(!o.stderr.contains(&b'\r'));
    for line in &lines {
        let e = deadletter_dashboard::export::parse_line(line).unwrap();
        let name = f.payloads.iter().find(|(_, p)| **p == e.payload).unwrap().0;
        assert_eq!(e, entries[*name], "{name} survives the JSON form");
    }

    // To a file, with a filter.
    let out = f.dir.path().join("orders.ndjson");
    let out_s = out.to_str().unwrap();
    let v = json(&[
        "export",
        f.path(),
        "--queue",
        "orders",
        "--error-kind",
        "InvalidPayload",
        "--out",
        out_s,
        "--json",
    ]);
    assert_eq!(v["exported"], 2);
    assert_eq!(std::fs::read_to_string(&out).unwrap().lines().count(), 2);

    // Import everything into a new store; then the file into a chosen queue.
    let target = tempfile::tempdir().unwrap();
    empty_store(target.path());
    let t = target.path().to_str().unwrap();
    let imported = {
        let all = f.dir.path().join("all.ndjson");
        std::fs::write(&all, &o.stdout).unwrap();
        json(&["import", t, all.to_str().unwrap(), "--json"])
    };
    assert_eq!(imported["imported"], 5);
    let store = Store::open(target.path(), small_config()).unwrap();
    let mut got = BTreeMap::new();
    for q in store.queue_names() {
        for e in store
            .dlq(&q)
            .unwrap()
            .list(&Filter::all(), Page::first(100))
            .unwrap()
        {
            let name = f.payloads.iter().find(|(_, p)| **p == e.payload).unwrap().0;
            got.insert(name.to_string(), e);
        }
    }
    assert_eq!(got.len(), 5);
    for (name, e) in &got {
        let orig = &entries[name];
        assert_eq!(e.payload, orig.payload, "{name}: payload bytes");
        assert_eq!(e.failure, orig.failure, "{name}: failure");
        assert_eq!(e.metadata.attributes, orig.metadata.attributes);
        assert_eq!(e.metadata.delivery_count, orig.metadata.delivery_count);
        assert_eq!(e.dlq_name, orig.dlq_name);
    }
    assert_eq!(
        got["ORD-3"].payload,
        vec![0x00, 0x9f, 0x92, 0x96, 0xff, b'\n', 0xc3]
    );
    drop(store);

    // From stdin into a named queue.
    let data = std::fs::read(&out).unwrap();
    let o = run_stdin(&["import", t, "--queue", "quarantine", "--json"], &data);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["imported"], 2);
    assert_eq!(v["entries"][0]["dlq"], "quarantine-dlq");

    // A bad line imports nothing and names the line.
    let bad = f.dir.path().join("bad.ndjson");
    std::fs::write(&bad, format!("{}\n{{\"payload\":\"%%%\"}}\n", lines[0])).unwrap();
    let before = Store::open(target.path(), small_config())
        .unwrap()
        .metrics_snapshot()
        .queues
        .iter()
        .map(|q| q.dlq_size)
        .sum::<u64>();
    fails(&["import", t, bad.to_str().unwrap()], 1, "line 2");
    let after = Store::open(target.path(), small_config())
        .unwrap()
        .metrics_snapshot()
        .queues
        .iter()
        .map(|q| q.dlq_size)
        .sum::<u64>();
    assert_eq!(before, after);
}

#[test]
fn enqueue_from_argument_and_stdin() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    // `enqueue` creates a store (with the default 64 MiB segment)...
    let fresh = dir.path().join("fresh");
    let v = json(&[
        "enqueue",
        fresh.to_str().unwrap(),
        "-q",
        "jobs",
        "first",
        "--json",
    ]);
    assert_eq!(v["id"], 0);
    assert_eq!(deadletter::verify(&fresh).unwrap().segments.len(), 1);
    // ... and adds to an existing one.
    let store_dir = dir.path().join("store");
    empty_store(&store_dir);
    let d = store_dir.to_str().unwrap();
    let v = json(&[
        "enqueue",
        d,
        "--queue",
        "orders",
        r#"{"orderId":"X"}"#,
        "--attr",
        "source=cli",
        "--json",
    ]);
    let first = v["id"].as_u64().unwrap();
    assert_eq!(v["queue"], "orders");
    let binary = [0u8, 255, 10, 13, 128, 7];
    let o = run_stdin(&["enqueue", d, "--queue", "orders", "--json"], &binary);
    assert!(o.status.success(), "{}", stderr(&o));
    let second: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(second["bytes"], 6);
    let text = ok(&["enqueue", d, "-q", "orders", "plain"]);
    assert!(text.starts_with("enqueued message"), "{text}");

    let store = Store::open(&store_dir, small_config()).unwrap();
    let q = store.existing_queue("orders").unwrap();
    let msgs = q.lease(10).unwrap();
    assert_eq!(msgs.len(), 3);
    assert_eq!(msgs[0].id(), first);
    assert_eq!(msgs[0].payload(), br#"{"orderId":"X"}"#);
    assert_eq!(
        msgs[0].attributes().get("source").map(String::as_str),
        Some("cli")
    );
    assert_eq!(msgs[1].payload(), binary);
    assert_eq!(msgs[2].payload(), b"plain");
}

#[test]
fn verify_reports_without_changing_anything() {
    let _serial = serial();
    let f = fixture();
    let v = json(&["verify", f.path(), "--json"]);
    assert_eq!(v["clean"], true);
    assert_eq!(v["problems"], 0);
    let lib = deadletter::verify(f.dir.path()).unwrap();
    assert_eq!(v["records"].as_u64(), Some(lib.records));
    assert!(lib.records > 10);
    assert!(ok(&["verify", f.path()]).contains("no damage found"));

    // Flip one byte inside an early record: damage, reported with its place, exit 1.
    let seg = f.dir.path().join(&lib.segments[0].file);
    let mut bytes = std::fs::read(&seg).unwrap();
    let at = SEGMENT_HEADER_LEN + 40;
    bytes[at] ^= 0x5a;
    std::fs::write(&seg, &bytes).unwrap();
    let snapshot = dir_snapshot(f.dir.path());
    let o = run(&["verify", f.path(), "--json"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["clean"], false);
    let damaged = &v["segments"][0]["damaged"];
    assert_eq!(damaged.as_array().unwrap().len(), 1, "{v}");
    assert!(damaged[0]["file_offset"].as_u64().unwrap() <= at as u64);
    assert!(stderr(&o).contains("verify found 1 problem"));
    let text = run(&["verify", f.path()]);
    assert!(stdout(&text).contains("DAMAGED at byte"));
    assert_eq!(
        dir_snapshot(f.dir.path()),
        snapshot,
        "verify changed nothing"
    );
}

#[test]
fn verify_reports_a_torn_tail_as_recoverable() {
    let _serial = serial();
    let f = fixture();
    let lib = deadletter::verify(f.dir.path()).unwrap();
    let seg = f.dir.path().join(&lib.segments[0].file);
    let end = lib.segments[0].end as usize + SEGMENT_HEADER_LEN;
    let mut bytes = std::fs::read(&seg).unwrap();
    bytes[end..end + 7].copy_from_slice(b"garbage");
    std::fs::write(&seg, &bytes).unwrap();
    let v = json(&["verify", f.path(), "--json"]);
    assert_eq!(v["clean"], true);
    assert_eq!(v["segments"][0]["torn_tail"]["bytes"], 7);
    assert!(ok(&["verify", f.path()]).contains("torn tail: 7 bytes"));
}

#[test]
fn verify_checks_checkpoints() {
    let _serial = serial();
    let f = fixture();
    {
        let store = f.open();
        let report = store.compact_now().unwrap();
        assert!(report.checkpoint_position.is_some());
        store.close().unwrap();
    }
    let v = json(&["verify", f.path(), "--json"]);
    let checkpoints = v["checkpoints"].as_array().unwrap();
    assert!(!checkpoints.is_empty(), "{v}");
    assert!(checkpoints[0]["position"].is_u64());
    let file = f.dir.path().join(checkpoints[0]["file"].as_str().unwrap());
    let mut bytes = std::fs::read(&file).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&file, &bytes).unwrap();
    let o = run(&["verify", f.path()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).contains("DAMAGED"), "{}", stdout(&o));
}

/// Every file's name and bytes.
fn dir_snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap_or_default(),
            )
        })
        .collect()
}

#[test]
fn a_locked_store_is_refused_and_left_untouched() {
    let _serial = serial();
    let f = fixture();
    let holder = f.open();
    let snapshot = dir_snapshot(f.dir.path());
    for args in [
        vec!["stats", f.path()],
        vec!["list", f.path(), "--json"],
        vec!["replay", f.path(), "--all"],
        vec!["purge", f.path(), "--older-than", "1s", "--include-pending"],
        vec!["enqueue", f.path(), "--queue", "orders", "x"],
    ] {
        let err = fails(&args, 1, "locked by another process");
        assert_eq!(err.lines().count(), 1, "one line: {err:?}");
        assert!(err.contains(f.path()), "names the store: {err}");
    }
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

#[test]
fn serve_starts_and_answers() {
    let _serial = serial();
    use std::io::{BufRead, BufReader, Read};
    use std::net::TcpStream;

    let f = fixture();
    let mut child = Command::new(BIN)
        .args([
            "serve",
            f.path(),
            "--bind",
            "127.0.0.1:0",
            "--token",
            "t0k3n",
            "--json",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let info: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(info["token"], "t0k3n");
    let addr = info["addr"].as_str().unwrap().to_string();
    let mut s = TcpStream::connect(&addr).unwrap();
    write!(
        s,
        "GET /api/stats HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
    let body = resp.split("\r\n\r\n").nth(1).unwrap();
    let v: Value = serde_json::from_str(body).unwrap();
    assert_eq!(v["queues"][0]["dlq_size"], 4);
}
