//! `export` and `import`: newline-delimited JSON that carries payload bytes exactly into
//! another store.

use std::collections::BTreeMap;

use deadletter::{Filter, Page, Store};
use serde_json::Value;

use crate::fixture::{empty_store, fixture, small_config};
use crate::run::{fails, json, run, run_stdin, serial, stderr};

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
        json(&["import", t, all.to_str().unwrap(), "--create", "--json"])
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
    let o = run_stdin(
        &[
            "import",
            t,
            "--queue",
            "quarantine",
            "--create",
            "--json",
            "--ids",
        ],
        &data,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["imported"], 2);
    assert_eq!(v["entries"][0]["dlq"], "quarantine-dlq");

    // The same again adds nothing: quarantine-dlq holds both.
    let o = run_stdin(&["import", t, "--queue", "quarantine", "--json"], &data);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (v["imported"].as_u64(), v["skipped"].as_u64()),
        (Some(0), Some(2))
    );

    // A bad line stops the import and names the line; the line before it is one the store
    // holds already, so nothing is added.
    let bad = f.dir.path().join("bad.ndjson");
    std::fs::write(&bad, format!("{}\n{{\"payload\":\"%%%\"}}\n", lines[0])).unwrap();
    let dlq_entries = || {
        let store = Store::open(target.path(), small_config()).unwrap();
        let metrics = store.metrics_snapshot();
        metrics.queues.iter().map(|q| q.dlq_size).sum::<u64>()
    };
    let before = dlq_entries();
    fails(&["import", t, bad.to_str().unwrap()], 1, "line 2");
    assert_eq!(dlq_entries(), before);
}
