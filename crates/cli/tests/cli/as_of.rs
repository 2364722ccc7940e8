//! `list --as-of` and `stats --as-of`: the DLQs as they were before a delete and a mark,
//! recorded with `list` at the time and compared after, in JSON and in the table; pages;
//! the filters the past cannot answer and JetStream targets are usage errors.

use deadletter::clock::{Clock, ManualClock};
use deadletter::Store;
use serde_json::Value;

use crate::fixture::{fixture, small_config, MIN};
use crate::run::{fails, ids_of, json, ok, serial};

/// (id, dlq, status) of each entry of a `list --json` output.
fn rows(v: &Value) -> Vec<(u64, String, String)> {
    v["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| {
            (
                e["id"].as_u64().unwrap(),
                e["dlq_name"].as_str().unwrap().to_string(),
                e["status"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn list_and_stats_as_of_an_earlier_time_show_what_was_there() {
    let _serial = serial();
    let f = fixture();
    let path = f.path();
    let before = json(&["list", path, "--json"]);
    let entries = f.entries();
    let newest = entries
        .values()
        .map(|e| e.dlq.dead_lettered_at_ms)
        .max()
        .unwrap();
    // Changes a minute after the newest entry, by a library with its own clock.
    let then = newest + MIN;
    {
        let clock = ManualClock::new(then + MIN);
        let store = Store::open(f.dir.path(), small_config().clock(clock.clone())).unwrap();
        let dlq = store.dlq("orders-dlq").unwrap();
        dlq.delete(entries["ORD-4"].id()).unwrap();
        dlq.mark_reprocessed(entries["ORD-2"].id(), true).unwrap();
        assert!(clock.now_ms() > then);
        store.close().unwrap();
    }
    let at = then.to_string();
    let now = json(&["list", path, "--json"]);
    assert!(!ids_of(&now).contains(&entries["ORD-4"].id()));
    let past = json(&["list", path, "--as-of", &at, "--json"]);
    assert_eq!(past["as_of_ms"], then);
    assert_eq!(rows(&past), rows(&before), "{past}");
    let ord4 = &past["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["id"] == entries["ORD-4"].id())
        .unwrap();
    assert_eq!(ord4["error_kind"], "PaymentDeclined");
    assert_eq!(ord4["error_message"], "card declined");
    // As of now: what the list shows now.
    let later = (then + 2 * MIN).to_string();
    let past_now = json(&["list", path, "--as-of", &later, "--json"]);
    assert_eq!(rows(&past_now), rows(&now));

    // Pages, as `list` pages.
    let first = json(&["list", path, "--as-of", &at, "--limit", "2", "--json"]);
    let cursor = first["next_cursor"].as_u64().unwrap().to_string();
    let rest = json(&[
        "list", path, "--as-of", &at, "--after", &cursor, "--limit", "10", "--json",
    ]);
    let paged: Vec<u64> = ids_of(&first).into_iter().chain(ids_of(&rest)).collect();
    assert_eq!(paged, ids_of(&before));

    let stats = json(&["stats", path, "--as-of", &at, "--json"]);
    let orders = stats["dlqs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["queue"] == "orders")
        .unwrap();
    assert_eq!(
        (orders["total"].as_u64(), orders["pending"].as_u64()),
        (Some(4), Some(4))
    );
    assert_eq!(orders["by_error_kind"]["PaymentDeclined"], 1);
    let stats_now = json(&["stats", path, "--as-of", &later, "--json"]);
    let orders_now = stats_now["dlqs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["queue"] == "orders")
        .unwrap();
    assert_eq!(
        (
            orders_now["total"].as_u64(),
            orders_now["reprocessed"].as_u64()
        ),
        (Some(3), Some(1))
    );

    let table = ok(&["list", path, "--as-of", &at]);
    assert!(
        table.contains("As of ") && table.contains("card declined"),
        "{table}"
    );
    let table = ok(&["stats", path, "--as-of", &at]);
    assert!(
        table.contains("orders-dlq") && table.contains("PaymentDeclined"),
        "{table}"
    );
}

#[test]
fn what_the_past_does_not_keep_is_a_usage_error() {
    let _serial = serial();
    let f = fixture();
    let path = f.path();
    for flag in [
        ["--grep", "ORD"],
        ["--regex", "ORD-[0-9]"],
        ["--attr", "orderId=ORD-2"],
        ["--tag", "k=v"],
    ] {
        fails(
            &["list", path, "--as-of", "1h", flag[0], flag[1]],
            2,
            "cannot be used with",
        );
    }
    #[cfg(feature = "jetstream")]
    fails(
        &["list", "nats://127.0.0.1:1/ns", "--as-of", "1h"],
        2,
        "--as-of reads the lineage a store directory keeps",
    );
    fails(
        &["stats", path, "--as-of", "yesterday-ish"],
        2,
        "is not a time",
    );
}
