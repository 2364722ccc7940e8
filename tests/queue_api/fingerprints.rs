//! Failure fingerprints at scale: 10,000 failures from 3 message templates with varying
//! ids give 3 fingerprints with the right counts; replay, delete and purge by fingerprint
//! touch exactly the entries of that fingerprint; fingerprints survive a checkpoint and a
//! reopen.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use deadletter::clock::ManualClock;
use deadletter::dlq::Fingerprint;
use deadletter::queue::FailureReport;
use deadletter::{Failure, Filter, Page, ReplayOptions, Store};

use crate::common;
use crate::helpers;

const TOTAL: usize = 10_000;

/// The failure of message `i`: one of three templates, with ids, quoted names, UUIDs and
/// e-mail addresses that differ from message to message.
fn failure(i: usize) -> (Failure, &'static str) {
    match i % 3 {
        0 => (
            Failure::permanent("NotFound", format!("order ORD-{} not found", 1000 + i * 7)),
            "order ORD-<num> not found",
        ),
        1 => (
            Failure::permanent(
                "Validation",
                format!(
                    "field \"email\" of user-{:08x}-1111-2222-3333-{:012x} rejected: u{i}@shop{}.example.com",
                    i * 31,
                    i as u64 * 977,
                    i % 50
                ),
            ),
            "field <str> of user-<uuid> rejected: <email>",
        ),
        _ => (
            Failure::permanent(
                "Timeout",
                format!("GET https://api.example.com/stock/{i} timed out after {}ms", i % 900),
            ),
            "GET <url> timed out after <num>ms",
        ),
    }
}

/// Dead-letters `TOTAL` messages, one minute apart in groups of 100; returns each id's
/// expected template.
fn fill(store: &Store, clock: &ManualClock) -> BTreeMap<u64, &'static str> {
    let q = store.queue("orders").unwrap();
    let payloads: Vec<String> = (0..TOTAL).map(|i| format!("msg-{i}")).collect();
    let ids = q.enqueue_batch(&payloads).unwrap();
    let mut expected = BTreeMap::new();
    for (i, msg) in q.lease(TOTAL).unwrap().into_iter().enumerate() {
        let (f, template) = failure(i);
        q.dead_letter(&msg, &FailureReport::new(&f)).unwrap();
        expected.insert(ids[i], template);
        if i % 100 == 99 {
            clock.advance(60_000);
        }
    }
    expected
}

fn by_template(store: &Store) -> BTreeMap<String, (Fingerprint, u64)> {
    store
        .dlq("orders")
        .unwrap()
        .fingerprints()
        .into_iter()
        .map(|g| (g.template.clone(), (g.fingerprint, g.count)))
        .collect()
}

#[test]
fn ten_thousand_failures_of_three_templates_are_three_fingerprints() {
    let clock = ManualClock::new(common::T0);
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), helpers::fast(&clock)).unwrap();
    let expected = fill(&store, &clock);
    let dlq = store.dlq("orders").unwrap();

    let groups = dlq.fingerprints();
    assert_eq!(groups.len(), 3, "{groups:#?}");
    let counts: BTreeMap<&str, u64> = groups
        .iter()
        .map(|g| (g.template.as_str(), g.count))
        .collect();
    let want: BTreeMap<&str, u64> = [
        ("order ORD-<num> not found", 3334),
        ("field <str> of user-<uuid> rejected: <email>", 3333),
        ("GET <url> timed out after <num>ms", 3333),
    ]
    .into();
    assert_eq!(counts, want);
    // Times, an example and the hourly counts (the fill took 100 minutes, ending now).
    let nf = &groups[0];
    assert_eq!((nf.error_kind.as_str(), nf.count), ("NotFound", 3334));
    assert_eq!(nf.first_seen_ms, common::T0);
    assert_eq!(nf.example_id, *expected.keys().next().unwrap());
    assert_eq!(nf.last_day_by_hour.iter().sum::<u64>(), 3334);
    assert!(nf.last_day_by_hour[2..].iter().all(|&n| n == 0));
    let stats = dlq.stats();
    assert_eq!(stats.by_fingerprint.get(&nf.fingerprint), Some(&3334));
    // `analyze` reports the same templates from the envelopes.
    let analysis = dlq.analyze(&Filter::all()).unwrap();
    let analysed: BTreeMap<String, (Fingerprint, u64)> = analysis
        .fingerprints
        .iter()
        .map(|g| (g.template.clone(), (g.fingerprint, g.count)))
        .collect();
    assert_eq!(analysed, by_template(&store));

    // Every entry lists under its template's fingerprint, and only there.
    let fp = |t: &str| by_template(&store)[t].0;
    let listed = |f: Fingerprint| -> BTreeSet<u64> {
        dlq.ids(&Filter::all().fingerprint(f), None)
            .unwrap()
            .into_iter()
            .collect()
    };
    for template in want.keys() {
        let want_ids: BTreeSet<u64> = expected
            .iter()
            .filter(|(_, t)| *t == template)
            .map(|(id, _)| *id)
            .collect();
        assert_eq!(listed(fp(template)), want_ids, "{template}");
    }
    let page = dlq
        .list(
            &Filter::all().fingerprint(fp("GET <url> timed out after <num>ms")),
            Page::first(5),
        )
        .unwrap();
    assert!(page.iter().all(|e| e.failure.error_kind == "Timeout"
        && e.fingerprint == Some(fp("GET <url> timed out after <num>ms"))));

    // Replay one fingerprint: exactly its entries leave the DLQ for the queue.
    let timeouts = fp("GET <url> timed out after <num>ms");
    let timeout_ids = listed(timeouts);
    let report = dlq
        .replay(
            &Filter::all().fingerprint(timeouts),
            &ReplayOptions::to_origin(),
        )
        .unwrap();
    assert_eq!(
        report.replayed.iter().copied().collect::<BTreeSet<_>>(),
        timeout_ids
    );
    assert!(report.failed.is_empty());
    assert_eq!(dlq.len(), (TOTAL - 3333) as u64);
    assert_eq!(store.queue("orders").unwrap().len(), 3333);
    assert!(!by_template(&store).contains_key("GET <url> timed out after <num>ms"));

    // Delete another: exactly its entries go; the third is untouched.
    let invalid = fp("field <str> of user-<uuid> rejected: <email>");
    let invalid_ids = listed(invalid);
    assert_eq!(
        dlq.delete_matching(&Filter::all().fingerprint(invalid))
            .unwrap(),
        3333
    );
    let left: BTreeSet<u64> = dlq.ids(&Filter::all(), None).unwrap().into_iter().collect();
    assert!(left.is_disjoint(&invalid_ids));
    assert_eq!(left, listed(fp("order ORD-<num> not found")));
    assert_eq!(left.len(), 3334);

    // Purge by fingerprint: only entries older than the cutoff, pending ones on request.
    let not_found = fp("order ORD-<num> not found");
    assert_eq!(
        dlq.purge_matching(
            &Filter::all().fingerprint(not_found),
            Duration::from_secs(60 * 50),
            false
        )
        .unwrap(),
        0,
        "pending entries are kept"
    );
    let purged = dlq
        .purge_matching(
            &Filter::all().fingerprint(not_found),
            Duration::from_secs(60 * 50),
            true,
        )
        .unwrap();
    // The first 50 minutes of the fill: 5,000 messages, a third of them NotFound.
    assert_eq!(purged, 1667);
    assert_eq!(dlq.len(), 3334 - 1667);
}

#[test]
fn fingerprints_survive_a_checkpoint_a_reopen_and_a_snapshot() {
    let clock = ManualClock::new(common::T0);
    let dir = tempfile::tempdir().unwrap();
    let before = {
        let store = Store::open(dir.path(), helpers::config(&clock)).unwrap();
        let q = store.queue("orders").unwrap();
        let ids = q
            .enqueue_batch(&(0..300).map(|i| format!("m{i}")).collect::<Vec<_>>())
            .unwrap();
        for (i, msg) in q.lease(150).unwrap().into_iter().enumerate() {
            let (f, _) = failure(i);
            q.dead_letter(&msg, &FailureReport::new(&f)).unwrap();
        }
        // A checkpoint holds the first 150; the log after it the next 150, and a delete.
        store.compact_now().unwrap();
        for (i, msg) in q.lease(150).unwrap().into_iter().enumerate() {
            let (f, _) = failure(i + 150);
            q.dead_letter(&msg, &FailureReport::new(&f)).unwrap();
        }
        q.dlq().delete(ids[0]).unwrap();
        by_template(&store)
    };
    assert_eq!(before.values().map(|(_, n)| n).sum::<u64>(), 299);
    let store = Store::open(dir.path(), helpers::config(&clock)).unwrap();
    assert_eq!(by_template(&store), before);
    let dlq = store.dlq("orders").unwrap();
    let (fp, n) = before["order ORD-<num> not found"];
    assert_eq!(
        dlq.ids(&Filter::all().fingerprint(fp), None).unwrap().len() as u64,
        n
    );
    // A read-only snapshot beside the owner sees the same fingerprints.
    let snapshot = Store::open_read_only(dir.path(), helpers::config(&clock)).unwrap();
    assert_eq!(by_template(&snapshot), before);
}
