//! The store the tests run the binary against, written by the library.

use std::collections::BTreeMap;
use std::path::Path;

use deadletter::clock::{Clock, ManualClock, SystemClock};
use deadletter::dlq::DeadLetter;
use deadletter::queue::{EnqueueOptions, FailureReport, QueueOptions};
use deadletter::{Config, Failure, Filter, Page, Store};

/// Bytes before a segment's first record: the header docs/FORMAT.md documents, of the
/// format version this build writes (version 2: 56 bytes; the tests damage segment files
/// at known places, as a user's disk could).
pub const SEGMENT_HEADER_LEN: usize = 56;
/// A minute, in ms.
pub const MIN: u64 = 60_000;

/// A store with known DLQ contents, written by the library with a clock that starts three
/// hours ago, then closed.
///
/// `orders` (2 attempts): ORD-1 acked; ORD-2 not JSON (InvalidPayload, permanent);
/// ORD-3 not UTF-8 (InvalidPayload, permanent); ORD-4 card declined (PaymentDeclined,
/// permanent); ORD-5 times out twice (Timeout, dead-lettered on attempt 2); ORD-6 waits.
/// `emails`: one SmtpError (permanent), one acked.
pub struct Fixture {
    pub dir: tempfile::TempDir,
    /// Payloads by their orderId / name.
    pub payloads: BTreeMap<&'static str, Vec<u8>>,
}

impl Fixture {
    /// The store directory, as an argument.
    pub fn path(&self) -> &str {
        self.dir.path().to_str().expect("utf-8 temp path")
    }

    /// Opens the store with the library.
    pub fn open(&self) -> Store {
        Store::open(self.dir.path(), small_config()).expect("reopen")
    }

    /// DLQ entries by payload name, read with the library.
    pub fn entries(&self) -> BTreeMap<String, DeadLetter> {
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
pub fn small_config() -> Config {
    Config::default()
        .segment_size(1 << 20)
        .max_message_size(256 << 10)
}

/// Creates an empty store with small segments.
pub fn empty_store(dir: &Path) {
    let store = Store::open(dir, small_config()).unwrap();
    store.close().unwrap();
}

/// Writes the store [`Fixture`] describes.
pub fn fixture() -> Fixture {
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

/// Every file's name and bytes.
pub fn dir_snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
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
