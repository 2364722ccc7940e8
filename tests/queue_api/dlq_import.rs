//! Exported DLQ entries import into another store whole, and survive a reopen there.

use deadletter::dlq::EntryStatus;
use deadletter::queue::FailureReport;
use deadletter::{Config, Failure, Filter, Page, Store};

use crate::common;

#[test]
fn export_then_import_round_trips_entries() {
    let (_a_dir, a) = common::temp_store(Config::fast());
    let q = a.queue("orders").unwrap();
    let payloads: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i, 0, 255, i]).collect();
    for p in &payloads {
        q.enqueue(p).unwrap();
    }
    for (i, msg) in q.lease(10).unwrap().into_iter().enumerate() {
        let f = Failure::permanent("Bad", format!("bad {i}")).with_context("k", "v");
        q.dead_letter(&msg, &FailureReport::new(&f).worker("w1"))
            .unwrap();
    }
    let exported = q.dlq().list(&Filter::all(), Page::first(100)).unwrap();
    assert_eq!(exported.len(), 5);

    let (b_dir, b) = common::temp_store(Config::fast());
    let dlq = b.queue("orders").unwrap().dlq();
    for e in &exported {
        dlq.import(e).unwrap();
    }
    drop(dlq);
    b.close().unwrap();
    let b = Store::open(b_dir.path(), Config::fast()).unwrap();
    let dlq = b.dlq("orders-dlq").unwrap();
    let imported = dlq.list(&Filter::all(), Page::first(100)).unwrap();
    assert_eq!(imported.len(), 5);
    for (x, y) in exported.iter().zip(&imported) {
        assert_eq!(x.payload, y.payload);
        assert_eq!(x.failure, y.failure);
        assert_eq!(x.dlq, y.dlq);
        assert_eq!(x.metadata.delivery_count, y.metadata.delivery_count);
        assert_eq!(y.status, EntryStatus::Pending);
    }
    let stats = dlq.stats();
    assert_eq!(stats.total, 5);
    assert_eq!(stats.by_error_kind["Bad"], 5);
    assert_eq!(stats.by_worker["w1"], 5);
}

#[test]
fn an_importer_adds_each_entry_once_through_any_chain_of_stores() {
    let (_a_dir, a) = common::temp_store(Config::fast());
    let q = a.queue("orders").unwrap();
    // Identical payloads are distinct failures: each has its own id.
    q.enqueue_batch(&["same", "same", "other"]).unwrap();
    for msg in q.lease(10).unwrap() {
        let f = Failure::permanent("Bad", "no");
        q.dead_letter(&msg, &FailureReport::new(&f)).unwrap();
    }
    let export = q.dlq().list(&Filter::all(), Page::first(100)).unwrap();

    let (_b_dir, b) = common::temp_store(Config::fast());
    let mut importer = b.importer(None).unwrap();
    let first = importer.import_batch(&export[..2]).unwrap();
    assert_eq!(first.imported.len(), 2);
    // An interrupted import run again: only the rest is added, in one batch.
    let rest = b.importer(None).unwrap().import_batch(&export).unwrap();
    assert_eq!((rest.imported.len(), rest.skipped.len()), (1, 2));
    // A batch that holds an entry twice adds it once.
    let (_c_dir, c) = common::temp_store(Config::fast());
    let twice = [export[0].clone(), export[0].clone()];
    let r = c.importer(None).unwrap().import_batch(&twice).unwrap();
    assert_eq!((r.imported.len(), r.skipped.len()), (1, 1));

    // B's entries keep A's ids as their original ids, so an export of B brings nothing
    // new back into A, and into B nothing either.
    let from_b = b
        .dlq("orders-dlq")
        .unwrap()
        .list(&Filter::all(), Page::first(100))
        .unwrap();
    assert_eq!(from_b.len(), 3);
    for (x, y) in export.iter().zip(&from_b) {
        assert_eq!(y.original_id, Some(x.id()));
        assert_eq!(x.identity(), y.identity());
    }
    let back = a.importer(None).unwrap().import_batch(&from_b).unwrap();
    assert_eq!((back.imported.len(), back.skipped.len()), (0, 3));
    assert_eq!(a.dlq("orders-dlq").unwrap().len(), 3);
    // Into another DLQ it is a copy.
    let copy = b
        .importer(Some("archive"))
        .unwrap()
        .import_batch(&export)
        .unwrap();
    assert_eq!(copy.imported.len(), 3);
    assert_eq!(copy.imported[0].dlq, "archive-dlq");
}
