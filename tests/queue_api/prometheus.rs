//! The Prometheus text a metrics snapshot renders: every family for every queue (no age
//! sample when there is nothing to age), the DLQ's name, the DLQ entries by error kind
//! (labels escaped), the handler histogram, the disk bytes and the build info.

use std::time::Duration;

use deadletter::clock::ManualClock;
use deadletter::dlq::DlqStats;
use deadletter::metrics::{Metrics, QueueMetrics};
use deadletter::queue::QueueStats;
use deadletter::store::FORMAT_VERSION;
use deadletter::Store;

use crate::helpers::fast;

#[test]
fn renders_every_family_for_every_queue() {
    // A real histogram: one run within the first bound, one above the last.
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), fast(&ManualClock::new(0))).unwrap();
    let orders = store.queue("orders").unwrap();
    orders.observe_handler(Duration::from_micros(500));
    orders.observe_handler(Duration::from_secs(61));
    let histogram = store.metrics_snapshot().queues[0].handler_duration.clone();

    let mut queue = QueueStats::new("orders", "orders-dlq");
    (queue.counts.ready, queue.counts.in_flight) = (3, 1);
    (queue.counts.enqueued, queue.counts.acked) = (10, 5);
    (queue.counts.retried, queue.counts.dead_lettered) = (2, 1);
    queue.dlq_size = 1;
    queue.oldest_ready_at_ms = Some(7_500);
    let mut dlq = DlqStats::new("orders-dlq");
    dlq.pending = 1;
    dlq.by_error_kind.insert("Invalid \"x\"".to_string(), 1);
    let mut q = QueueMetrics::from_stats(&queue, &dlq, 10_000);
    q.handler_duration = histogram;
    let m = Metrics::new(0, vec![q]).with_disk_bytes(Some(4096));
    let text = m.to_prometheus();
    assert!(text
        .contains("deadletter_dlq_entries{queue=\"orders\",error_kind=\"Invalid \\\"x\\\"\"} 1\n"));
    assert!(text
        .contains("deadletter_handler_duration_seconds_bucket{queue=\"orders\",le=\"0.001\"} 1\n"));
    assert!(text
        .contains("deadletter_handler_duration_seconds_bucket{queue=\"orders\",le=\"+Inf\"} 2\n"));
    assert!(text.contains("deadletter_handler_duration_seconds_sum{queue=\"orders\"} 61.0005\n"));
    assert!(text.contains("deadletter_store_disk_bytes 4096\n"));
    assert!(text.contains(&format!(
        "deadletter_build_info{{version=\"{}\",format_version=\"{FORMAT_VERSION}\"}} 1\n",
        env!("CARGO_PKG_VERSION")
    )));
    assert!(text.contains("deadletter_queue_depth{queue=\"orders\"} 3\n"));
    assert!(text.contains("deadletter_oldest_message_age_seconds{queue=\"orders\"} 2.5\n"));
    assert!(text.contains("deadletter_queue_info{queue=\"orders\",dlq=\"orders-dlq\"} 1\n"));
    assert!(
        !text.contains("deadletter_dlq_size"),
        "the sum of dlq_entries is not repeated"
    );
    assert!(
        !text.contains("deadletter_dlq_oldest_age_seconds{"),
        "no DLQ age was given"
    );
    assert_eq!(
        text.matches("# TYPE").count(),
        Metrics::family_names().count() + 5
    );
}
