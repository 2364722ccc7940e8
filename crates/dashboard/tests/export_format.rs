//! The export format is a promise too: a file written by deadletter 0.1 (the fill_dlq
//! scenario, exported by that version's `deadletter export`, checked in under
//! tests/fixtures) still reads back exactly, and writing what was read gives the same
//! lines byte for byte.

use std::collections::BTreeMap;

use deadletter::dlq::EntryStatus;
use deadletter_dashboard::export::{envelope_to_line, parse_line};

const EXPORT_0_1: &str = include_str!("fixtures/export-0.1.ndjson");

#[test]
fn an_export_written_by_0_1_reads_back_exactly() {
    let lines: Vec<&str> = EXPORT_0_1.lines().collect();
    let entries: Vec<_> = lines
        .iter()
        .map(|line| parse_line(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect();
    let ids: Vec<u64> = entries.iter().map(|e| e.id()).collect();
    assert_eq!(ids, [2, 4, 6, 8, 10, 11, 3, 13]);

    let mut kinds = BTreeMap::new();
    for e in &entries {
        *kinds
            .entry((e.dlq_name.as_str(), e.failure.error_kind.as_str()))
            .or_insert(0) += 1;
        assert_eq!(e.status, EntryStatus::Pending);
        assert_eq!(e.generation, 0);
    }
    assert_eq!(
        kinds,
        BTreeMap::from([
            (("emails-dlq", "SmtpTimeout"), 1),
            (("orders-dlq", "InvalidPayload"), 4),
            (("orders-dlq", "InventoryTimeout"), 1),
            (("orders-dlq", "PaymentDeclined"), 2),
        ])
    );

    let first = &entries[0];
    assert_eq!(first.payload, b"orderId=ORD-3;;;");
    assert_eq!(first.metadata.queue, "orders");
    assert_eq!(first.metadata.attributes["orderId"], "ORD-3");
    assert_eq!(first.metadata.enqueued_at_ms, 1_796_051_220_000);
    assert_eq!(first.dlq.dead_lettered_at_ms, 1_796_053_980_000);
    assert_eq!(first.dlq.worker.as_deref(), Some("billing-1"));
    assert_eq!(first.failure.context["step"], "parse");
    assert_eq!(first.failure.attempts.len(), 1);
    assert_eq!(first.failure.attempts[0].duration_ms, 54);

    // The payload that is not UTF-8 keeps every byte.
    let binary = &entries[5];
    assert_eq!(
        binary.payload,
        [0xff, 0xfe, 0x00, 0x4f, 0x52, 0x44, 0x2d, 0x31, 0x32, 0x80, 0x0a]
    );
    // The entry that timed out three times keeps its whole history.
    let timeout = &entries[6];
    assert_eq!(timeout.failure.error_kind, "InventoryTimeout");
    assert_eq!(timeout.metadata.delivery_count, 3);
    let numbers: Vec<u32> = timeout.failure.attempts.iter().map(|a| a.number).collect();
    assert_eq!(numbers, [1, 2, 3]);

    // Written again, each line is the same but for the status, which 0.1 wrote in its
    // serde form ("Pending") and later versions as the API names it ("pending").
    for (line, entry) in lines.iter().zip(&entries) {
        let now = line.replace(r#""status":"Pending""#, r#""status":"pending""#);
        assert_eq!(envelope_to_line(entry), now);
        assert_eq!(parse_line(&now).unwrap(), *entry);
    }
}
