//! Failure fingerprints on the command line: `analyze` reports templates, and list,
//! replay, delete and purge select by `--fingerprint`, touching exactly those entries.

use std::collections::BTreeSet;

use deadletter::dlq::Fingerprint;
use deadletter::queue::FailureReport;
use deadletter::{Failure, Filter, Store};

use crate::fixture::small_config;
use crate::run::{fails, ids_of, json, ok, serial};

/// 12 entries of three templates in `orders-dlq`; returns the directory.
fn store() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), small_config()).unwrap();
    let q = store.queue("orders").unwrap();
    q.enqueue_batch(&(0..12).map(|i| format!("m{i}")).collect::<Vec<_>>())
        .unwrap();
    for (i, msg) in q.lease(12).unwrap().into_iter().enumerate() {
        let f = match i % 3 {
            0 => Failure::permanent("NotFound", format!("order ORD-{i} not found")),
            1 => Failure::permanent("Invalid", format!("field 'f{i}' is empty")),
            _ => Failure::permanent("Timeout", format!("no answer after {i}ms")),
        };
        q.dead_letter(&msg, &FailureReport::new(&f)).unwrap();
    }
    store.close().unwrap();
    dir
}

fn ids(dir: &str, fp: &str) -> BTreeSet<u64> {
    ids_of(&json(&["list", dir, "--fingerprint", fp, "--json"]))
        .into_iter()
        .collect()
}

fn library_ids(dir: &std::path::Path, fp: &str) -> BTreeSet<u64> {
    let store = Store::open(dir, small_config()).unwrap();
    let fp: Fingerprint = fp.parse().unwrap();
    let dlq = store.dlq("orders").unwrap();
    dlq.ids(&Filter::all().fingerprint(fp), None)
        .unwrap()
        .into_iter()
        .collect()
}

#[test]
fn analyze_reports_templates_and_commands_select_by_fingerprint() {
    let _serial = serial();
    let d = store();
    let dir = d.path().to_str().unwrap();

    let v = json(&["analyze", dir, "--json"]);
    let groups = v["dlqs"][0]["analysis"]["fingerprints"].as_array().unwrap();
    assert_eq!(groups.len(), 3);
    let fp_of = |template: &str| -> String {
        let g = groups.iter().find(|g| g["template"] == template).unwrap();
        assert_eq!(g["count"], 4, "{g}");
        g["fingerprint"].as_str().unwrap().to_string()
    };
    let not_found = fp_of("order ORD-<num> not found");
    let invalid = fp_of("field <str> is empty");
    let timeout = fp_of("no answer after <num>ms");
    let text = ok(&["analyze", dir]);
    assert!(
        text.contains("order ORD-<num> not found") && text.contains(&not_found),
        "{text}"
    );

    // list: exactly the entries the library selects.
    let nf_ids = ids(dir, &not_found);
    assert_eq!(nf_ids.len(), 4);
    assert_eq!(nf_ids, library_ids(d.path(), &not_found));
    let show = ok(&["show", dir, &nf_ids.iter().next().unwrap().to_string()]);
    assert!(show.contains(&not_found), "{show}");

    // replay: those entries leave the DLQ, the others stay.
    let timeout_ids = ids(dir, &timeout);
    let r = json(&["replay", dir, "--fingerprint", &timeout, "--json"]);
    let replayed: BTreeSet<u64> = r["replayed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_u64().unwrap())
        .collect();
    assert_eq!(replayed, timeout_ids);
    assert!(ids(dir, &timeout).is_empty());
    let left: BTreeSet<u64> = ids_of(&json(&["list", dir, "--json"]))
        .into_iter()
        .collect();
    assert_eq!(left.len(), 8);
    assert!(left.is_disjoint(&timeout_ids));

    // delete: exactly the invalid ones.
    ok(&["delete", dir, "--fingerprint", &invalid]);
    assert!(ids(dir, &invalid).is_empty());
    assert_eq!(ids(dir, &not_found), nf_ids);

    // purge (--yes: no terminal to ask): pending entries need --include-pending; the
    // fingerprint narrows it.
    ok(&[
        "purge",
        dir,
        "--older-than",
        "0s",
        "--fingerprint",
        &invalid,
        "--include-pending",
        "--yes",
    ]);
    assert_eq!(ids(dir, &not_found), nf_ids);
    ok(&[
        "purge",
        dir,
        "--older-than",
        "0s",
        "--fingerprint",
        &not_found,
        "--include-pending",
        "--yes",
    ]);
    assert!(ids(dir, &not_found).is_empty());

    fails(&["list", dir, "--fingerprint", "not-hex"], 2, "fingerprint");
}
