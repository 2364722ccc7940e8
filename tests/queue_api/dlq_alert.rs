//! The DLQ alert hook fires when the DLQ reaches its threshold and again when it falls
//! back under, once per crossing.

use std::sync::{Arc, Mutex};

use deadletter::clock::ManualClock;
use deadletter::dlq::DlqAlert;
use deadletter::ReplayOptions;

use crate::common::{self, T0};
use crate::helpers::{fail_one, fast, options};

#[test]
fn alert_hook_fires_when_the_dlq_crosses_its_threshold_up_and_down() {
    let clock = ManualClock::new(T0);
    let (_dir, store) = common::temp_store(fast(&clock));
    let q = store.queue_with("orders", options(3)).unwrap();
    q.enqueue_batch(&[b"1", b"2", b"3", b"4"]).unwrap();
    let alerts: Arc<Mutex<Vec<DlqAlert>>> = Arc::default();
    let sink = Arc::clone(&alerts);
    q.dlq()
        .on_threshold(2, move |a| sink.lock().unwrap().push(a.clone()))
        .unwrap();
    let taken = |alerts: &Arc<Mutex<Vec<DlqAlert>>>| std::mem::take(&mut *alerts.lock().unwrap());

    let first = fail_one(&q, "Bad");
    assert!(taken(&alerts).is_empty(), "1 entry is under the threshold");
    let second = fail_one(&q, "Bad");
    let fired = taken(&alerts);
    assert_eq!(fired.len(), 1);
    let alert = &fired[0];
    assert_eq!(
        (alert.dlq.as_str(), alert.size, alert.threshold, alert.above),
        ("orders-dlq", 2, 2, true)
    );
    fail_one(&q, "Bad");
    assert!(
        taken(&alerts).is_empty(),
        "no new alert while it stays above"
    );
    q.dlq().delete(first).unwrap();
    assert!(
        taken(&alerts).is_empty(),
        "2 entries is still at the threshold"
    );
    q.dlq()
        .replay_one(second, &ReplayOptions::to_origin())
        .unwrap();
    let down = taken(&alerts);
    assert_eq!(down.len(), 1);
    assert!(!down[0].above);
    assert_eq!(down[0].size, 1);
    // Crossing up again fires again.
    fail_one(&q, "Bad");
    assert_eq!(taken(&alerts).len(), 1);
}
