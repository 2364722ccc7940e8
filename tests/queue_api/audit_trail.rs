//! The audit trail and lineage (issue 13): who changed a DLQ, and the whole life of a
//! message, still answered after the records are compacted away and the store reopened.

use deadletter::audit::{
    Actor, AuditAction, AuditLimits, HistoryEvent, MessageHistory, MessageState, Removal,
};
use deadletter::clock::ManualClock;
use deadletter::queue::FailureReport;
use deadletter::{Error, Failure, ReplayOptions, Store};

use crate::common::{self, T0};
use crate::helpers::{config, options};

const SEGMENT: u64 = 72 << 10;

fn small_segments(clock: &ManualClock) -> deadletter::Config {
    config(clock)
        .segment_size(SEGMENT)
        .max_message_size(4 << 10)
}

/// Leases message `id` (the only one ready) and dead-letters it.
fn fail(store: &Store, id: u64, message: &str) {
    let q = store.existing_queue("orders").unwrap();
    let m = q.lease(1).unwrap().remove(0);
    assert_eq!(m.id(), id);
    let f = Failure::permanent("NotFound", message);
    q.dead_letter(&m, &FailureReport::new(&f).worker("w1"))
        .unwrap();
}

/// Fills segments with enqueued-and-acked traffic, so compaction can reclaim the segments
/// that hold the message's own records.
fn churn(store: &Store) {
    let q = store.queue("churn").unwrap();
    for _ in 0..40 {
        q.enqueue(vec![7u8; 4000]).unwrap();
        let m = q.lease(1).unwrap().remove(0);
        q.ack(&m).unwrap();
    }
}

fn kinds(h: &MessageHistory) -> Vec<String> {
    h.steps
        .iter()
        .map(|s| match &s.event {
            HistoryEvent::Enqueued { queue } => format!("enqueued {queue}"),
            HistoryEvent::DeadLettered {
                generation,
                message,
                ..
            } => format!("dead {generation} {message}"),
            HistoryEvent::Replayed { generation, .. } => format!(
                "replayed {generation} by {}",
                s.actor.as_deref().unwrap_or("?")
            ),
            HistoryEvent::Removed { how } => {
                format!("{how:?} by {}", s.actor.as_deref().unwrap_or("?"))
            }
            other => format!("{other:?}"),
        })
        .collect()
}

/// The acceptance test of issue 13: `history` of a message replayed twice and then deleted
/// shows each step, after a compaction and a reopen, and in a read-only snapshot.
#[test]
fn a_message_replayed_twice_then_deleted_keeps_its_whole_life() {
    let clock = ManualClock::new(T0);
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), small_segments(&clock)).unwrap();
    let q = store.queue_with("orders", options(1)).unwrap();
    let id = q.enqueue(b"ORD-1").unwrap();
    let ana = store.with_actor(Actor::new("ana@ops-1").unwrap());
    let bob = store.with_actor(Actor::new("bob@ops-2").unwrap());
    for generation in 0..3u64 {
        clock.advance(1_000);
        fail(&store, id, &format!("order ORD-{generation} not found"));
        clock.advance(1_000);
        if generation < 2 {
            let dlq = ana.existing_queue("orders").unwrap().dlq();
            dlq.replay_one(id, &ReplayOptions::to_origin()).unwrap();
        }
    }
    bob.dlq("orders-dlq").unwrap().delete(id).unwrap();
    let expected = [
        "enqueued orders",
        "dead 0 order ORD-0 not found",
        "replayed 1 by ana@ops-1",
        "dead 1 order ORD-1 not found",
        "replayed 2 by ana@ops-1",
        "dead 2 order ORD-2 not found",
        "Deleted by bob@ops-2",
    ];
    let check = |h: MessageHistory, when: &str| {
        assert_eq!(kinds(&h), expected, "{when}");
        assert_eq!(h.replays, 2, "{when}");
        assert_eq!(
            h.state,
            MessageState::Removed {
                how: Some(Removal::Deleted),
                at_ms: T0 + 6_000
            },
            "{when}"
        );
        let times: Vec<u64> = h.steps.iter().map(|s| s.at_ms - T0).collect();
        assert_eq!(
            times,
            [0, 1_000, 2_000, 3_000, 4_000, 5_000, 6_000],
            "{when}"
        );
    };
    check(store.history(id).unwrap(), "live");

    // Two runs: the second reclaims what the first one's checkpoint covers.
    let mut deleted = 0;
    for _ in 0..2 {
        churn(&store);
        deleted += store.compact_now().unwrap().segments_deleted;
    }
    assert!(deleted > 0);
    check(store.history(id).unwrap(), "after compaction");
    let snapshot = Store::open_read_only(dir.path(), small_segments(&clock)).unwrap();
    check(snapshot.history(id).unwrap(), "read-only snapshot");
    drop(snapshot);
    drop((q, ana, bob));
    store.close().unwrap();

    let store = Store::open(dir.path(), small_segments(&clock)).unwrap();
    check(store.history(id).unwrap(), "after a reopen");
    let trail: Vec<(AuditAction, String)> = store
        .audit_trail(10)
        .into_iter()
        .map(|e| (e.action, e.actor))
        .collect();
    assert_eq!(
        trail,
        [
            (AuditAction::Replay, "ana@ops-1".to_string()),
            (AuditAction::Replay, "ana@ops-1".to_string()),
            (AuditAction::Delete, "bob@ops-2".to_string()),
        ]
    );
    assert!(matches!(store.history(id + 1000), Err(Error::NotFound(_))));
}

/// Retention, purges and a replay that succeeded end a lineage each in their own way, and
/// the tombstones stay within their bounds.
#[test]
fn removals_say_how_and_tombstones_are_bounded() {
    let clock = ManualClock::new(T0);
    let limits = AuditLimits {
        tombstones: 2,
        ..AuditLimits::default()
    };
    let cfg = config(&clock)
        .retention(Some(std::time::Duration::from_secs(60)))
        .audit_limits(limits);
    let (_dir, store) = common::temp_store(cfg);
    let q = store.queue_with("orders", options(1)).unwrap();
    let ids: Vec<u64> = (0..4).map(|i| q.enqueue(format!("{i}")).unwrap()).collect();
    for &id in &ids {
        fail(&store, id, "gone");
    }
    let dlq = q.dlq();
    // 0: replayed and then handled.
    dlq.replay_one(ids[0], &ReplayOptions::to_origin()).unwrap();
    let m = q.lease(1).unwrap().remove(0);
    q.ack(&m).unwrap();
    clock.advance(10_000);
    // Purge takes 1, 2 and 3: four tombstones, the two newest kept.
    assert_eq!(dlq.purge(std::time::Duration::ZERO, true).unwrap(), 3);
    for id in [ids[0], ids[1]] {
        // The oldest tombstones went; the trail still names what happened to them.
        let h = store.history(id).unwrap();
        assert!(
            h.steps
                .iter()
                .all(|s| matches!(s.event, HistoryEvent::Audited { .. })),
            "{h:?}"
        );
    }
    let h3 = store.history(ids[3]).unwrap();
    assert_eq!(
        h3.state,
        MessageState::Removed {
            how: Some(Removal::Purged),
            at_ms: T0 + 10_000
        }
    );
    assert_eq!(h3.steps.last().unwrap().actor.as_deref(), Some("library"));

    // Retention: an entry past it is removed by the store.
    let id = q.enqueue(b"late").unwrap();
    fail(&store, id, "late");
    clock.advance(61_000);
    assert_eq!(dlq.expire_retention().unwrap(), 1);
    let h = store.history(id).unwrap();
    assert_eq!(
        kinds(&h).last().map(String::as_str),
        Some("Retention by store")
    );
    let last = store.audit_trail(1).remove(0);
    assert_eq!(
        (last.action, last.actor.as_str()),
        (AuditAction::Retention, "store")
    );
    assert!(last.ids.contains(id));
}

#[test]
fn a_processed_replay_is_a_tombstone_and_actors_are_checked() {
    let clock = ManualClock::new(T0);
    let (_dir, store) = common::temp_store(config(&clock));
    let q = store.queue_with("orders", options(1)).unwrap();
    let id = q.enqueue(b"x").unwrap();
    fail(&store, id, "boom");
    q.dlq().replay_one(id, &ReplayOptions::to_origin()).unwrap();
    let m = q.lease(1).unwrap().remove(0);
    clock.advance(500);
    q.ack(&m).unwrap();
    let h = store.history(id).unwrap();
    assert_eq!(
        h.state,
        MessageState::Removed {
            how: Some(Removal::Processed),
            at_ms: T0 + 500
        }
    );
    for bad in ["", "a\nb", &"x".repeat(257)] {
        assert!(
            matches!(Actor::new(bad), Err(Error::InvalidActor(_))),
            "{bad:?}"
        );
    }
    // A message that never failed has a short history.
    let other = q.enqueue(b"y").unwrap();
    let h = store.history(other).unwrap();
    assert_eq!(kinds(&h), ["enqueued orders"]);
    assert_eq!(
        h.state,
        MessageState::Queued {
            queue: "orders".into()
        }
    );
}
