//! Exported DLQ entries import into another store whole, and survive a reopen there.

use deadletter::{Config, EntryStatus, Failure, FailureReport, Filter, Page, Store};

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
