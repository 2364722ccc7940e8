//! The store's limits are the store's: a record an application wrote with a larger
//! `max_message_size` than the tool's (it opens with the default 4 MiB) is read, verified
//! and kept by every command, never cut as a torn tail; the tool's own limit applies to
//! what it enqueues.

use deadletter::recovery::RecoveryMode;
use deadletter::store::Durability;
use deadletter::{Config, Store};
use serde_json::Value;

use crate::run::{json, ok, run, serial, stderr, stdout};

/// A payload of `len` bytes no two offsets of which repeat a short pattern.
fn payload(len: usize) -> Vec<u8> {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// The application's configuration: its own segment size and message limit.
fn app_config(segment: u64, max_message: usize) -> Config {
    Config::default()
        .segment_size(segment)
        .max_message_size(max_message)
        .durability(Durability::Always)
        .recovery(RecoveryMode::Strict)
}

/// Runs the tool over a store holding `big` (and `after`, when given, enqueued behind it)
/// written with the application's `config`, then checks that nothing was lost: verify,
/// stats and an enqueue through the binary, then the payloads read back byte for byte.
fn big_record_survives_the_tool(config: Config, big: &[u8], after: Option<&[u8]>) {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    {
        let store = Store::open(dir.path(), config.clone()).unwrap();
        let q = store.queue("q").unwrap();
        assert_eq!(q.enqueue(big).unwrap(), 0);
        if let Some(after) = after {
            assert_eq!(q.enqueue(after).unwrap(), 1);
        }
        store.close().unwrap();
    }
    let stored = 1 + u64::from(after.is_some());

    let v = json(&["verify", d, "--json"]);
    assert_eq!(v["clean"], true, "{v}");
    assert_eq!(v["problems"], 0, "{v}");
    assert!(v["segments"][0]["torn_tail"].is_null(), "{v}");
    let text = ok(&["verify", d]);
    assert!(!text.contains("torn tail"), "{text}");

    let stats = json(&["stats", d, "--json"]);
    assert_eq!(
        stats["queues"][0]["depth"].as_u64(),
        Some(stored),
        "{stats}"
    );

    let o = run(&["enqueue", d, "--queue", "q", "hi", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        v["id"].as_u64(),
        Some(stored),
        "ids are never handed out again"
    );

    // The tool's own limit (4 MiB) still applies to what it enqueues.
    if big.len() > 4 << 20 {
        let o = crate::run::run_stdin(&["enqueue", d, "--queue", "q", "--json"], big);
        assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    }

    let store = Store::open(dir.path(), config).unwrap();
    let q = store.existing_queue("q").unwrap();
    let msgs = q.lease(10).unwrap();
    assert_eq!(msgs.len() as u64, stored + 1);
    assert_eq!(msgs[0].id(), 0);
    assert!(
        msgs[0].payload() == big,
        "the large payload reads back byte-exact"
    );
    if let Some(after) = after {
        assert_eq!(msgs[1].payload(), after);
    }
    assert_eq!(msgs.last().unwrap().payload(), b"hi");
    store.close().unwrap();
    assert_eq!(
        deadletter::verify::verify(dir.path()).unwrap().problems(),
        0
    );
}

#[test]
fn a_13_mb_message_survives_verify_stats_and_enqueue() {
    let config = app_config(64 << 20, 16 << 20);
    big_record_survives_the_tool(config, &payload(13_000_000), None);
}

#[test]
fn a_record_after_a_13_mb_message_is_not_bad_record() {
    let config = app_config(64 << 20, 16 << 20);
    big_record_survives_the_tool(config, &payload(13_000_000), Some(b"behind it"));
}

#[test]
fn a_100_kb_message_survives_an_opener_with_a_32_kib_limit() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let big = payload(100_000);
    {
        let store = Store::open(dir.path(), app_config(1 << 20, 512 << 10)).unwrap();
        let q = store.queue("q").unwrap();
        q.enqueue(&big).unwrap();
        q.enqueue(b"second").unwrap();
        store.close().unwrap();
    }
    let small = app_config(1 << 20, 32 << 10);
    for mode in [RecoveryMode::Strict, RecoveryMode::Quarantine] {
        let store = Store::open(dir.path(), small.clone().recovery(mode)).unwrap();
        assert!(store.recovery_report().torn_tail.is_none());
        assert!(store.recovery_report().quarantined.is_empty());
        let q = store.existing_queue("q").unwrap();
        // The limit applies to new enqueues only.
        assert!(matches!(
            q.enqueue(&big),
            Err(deadletter::Error::TooLarge { .. })
        ));
        assert_eq!(q.len(), 2);
        store.close().unwrap();
    }
    let store = Store::open(dir.path(), small).unwrap();
    let msgs = store.existing_queue("q").unwrap().lease(10).unwrap();
    assert_eq!(msgs.len(), 2);
    assert!(msgs[0].payload() == big.as_slice());
    assert_eq!(msgs[1].payload(), b"second");
    store.close().unwrap();
    let v = json(&["verify", dir.path().to_str().unwrap(), "--json"]);
    assert_eq!(v["clean"], true, "{v}");
}
