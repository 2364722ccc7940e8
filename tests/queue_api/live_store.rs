//! A store held by one handle, operated from another: a read-only snapshot reads it
//! without the lock and writes nothing; changes go through the owner's control socket; a
//! refused open names the holder.

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use deadletter::clock::ManualClock;
use deadletter::control::Client;
use deadletter::dlq::DeadLetter;
use deadletter::queue::EnqueueOptions;
use deadletter::{Error, Filter, Page, ReplayOptions, Store};

use crate::common::{self, T0};
use crate::helpers::{fail_one, fast};

#[test]
fn a_refused_open_names_the_holder() {
    let clock = ManualClock::new(T0);
    let (dir, _store) = common::temp_store(fast(&clock));
    match Store::open(dir.path(), fast(&clock)) {
        Err(Error::Locked { pid, host, .. }) => {
            assert_eq!(pid, Some(std::process::id()));
            assert!(host.is_some_and(|h| !h.is_empty()));
        }
        other => panic!("expected Locked, got {other:?}"),
    }
}

#[test]
fn a_snapshot_reads_a_held_store_and_writes_nothing() {
    let clock = ManualClock::new(T0);
    let (dir, owner) = common::temp_store(fast(&clock));
    let q = owner.queue("orders").unwrap();
    for i in 0..5 {
        q.enqueue(format!("ORD-{i}")).unwrap();
    }
    let dead = fail_one(&q, "Invalid");
    let leased = q.lease(1).unwrap();
    owner.sync().unwrap();
    let before = common::dir_contents(dir.path());

    let snap = Store::open_read_only(dir.path(), fast(&clock)).unwrap();
    assert!(snap.is_read_only());
    let sq = snap.existing_queue("orders").unwrap();
    assert_eq!(sq.len(), 3, "ready messages");
    // The lease is the owner's, alive: the snapshot keeps it.
    assert_eq!(sq.stats().counts.in_flight, 1);
    let dlq = snap.dlq("orders-dlq").unwrap();
    assert_eq!(dlq.get(dead).unwrap().payload, b"ORD-0");
    // Every change is refused, and nothing in the directory changed.
    assert!(matches!(sq.enqueue(b"x"), Err(Error::ReadOnly { .. })));
    assert!(matches!(dlq.delete(dead), Err(Error::ReadOnly { .. })));
    assert!(matches!(snap.queue("new"), Err(Error::ReadOnly { .. })));
    assert!(matches!(snap.compact_now(), Err(Error::ReadOnly { .. })));
    drop((sq, dlq, snap));
    assert_eq!(common::dir_contents(dir.path()), before);

    // Later writes are in the next snapshot.
    q.ack_all(&leased).unwrap();
    q.enqueue(b"ORD-5").unwrap();
    owner.sync().unwrap();
    let snap = Store::open_read_only(dir.path(), fast(&clock)).unwrap();
    assert_eq!(snap.existing_queue("orders").unwrap().len(), 4);
}

#[test]
fn a_torn_tail_ends_the_snapshot_and_stays() {
    let clock = ManualClock::new(T0);
    let (dir, owner) = common::temp_store(fast(&clock));
    let q = owner.queue("orders").unwrap();
    q.enqueue_batch(&["a", "b", "c"]).unwrap();
    drop(q);
    owner.close().unwrap();
    // Half a record after the last one, as a writer caught mid-write leaves it.
    let seg = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "seg"))
        .max()
        .unwrap();
    let bytes = std::fs::read(&seg).unwrap();
    let end = bytes.iter().rposition(|&b| b != 0).unwrap() + 1;
    let mut torn = bytes.clone();
    torn[end..end + 6].copy_from_slice(&[40, 0, 0, 0, 0xab, 0xcd]);
    std::fs::write(&seg, &torn).unwrap();
    let before = common::dir_contents(dir.path());

    let snap = Store::open_read_only(dir.path(), fast(&clock)).unwrap();
    assert_eq!(snap.existing_queue("orders").unwrap().len(), 3);
    drop(snap);
    assert_eq!(common::dir_contents(dir.path()), before, "nothing repaired");
}

#[test]
fn changes_go_through_the_owners_control_socket() {
    let clock = ManualClock::new(T0);
    let (dir, owner) = common::temp_store(fast(&clock).control_socket(true));
    let socket = dir.path().join(deadletter::control::SOCKET_NAME);
    let mode = std::fs::metadata(&socket).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let q = owner.queue("orders").unwrap();
    q.enqueue_batch(&["ORD-1", "ORD-2", "ORD-3", "ORD-4"])
        .unwrap();
    let ids: Vec<u64> = (0..4).map(|_| fail_one(&q, "Invalid")).collect();

    let client = Client::connect(dir.path()).unwrap();
    assert_eq!(client.owner_pid(), std::process::id());
    let id = client
        .enqueue(
            "orders",
            b"ORD-5",
            &EnqueueOptions::new().attribute("k", "v"),
        )
        .unwrap();
    assert_eq!(q.len(), 1);

    // A replay to a queue that does not exist needs create_target.
    let to_typo = ReplayOptions::to_queue("ordrs");
    assert!(matches!(
        client.replay("orders-dlq", &ids[..1], &to_typo, false),
        Err(Error::UnknownQueue(_))
    ));
    assert_eq!(owner.queue_names(), ["orders"]);
    let report = client
        .replay("orders-dlq", &ids[..1], &ReplayOptions::to_origin(), false)
        .unwrap();
    assert_eq!(report.replayed, [ids[0]]);
    assert_eq!(q.len(), 2);

    // A second replay of the same entry is refused, not doubled.
    let again = client
        .replay("orders-dlq", &ids[..1], &ReplayOptions::to_origin(), false)
        .unwrap();
    assert!(again.replayed.is_empty() && again.failed.len() == 1);

    let marks = client
        .mark_reprocessed("orders-dlq", &[ids[1], 999_999], true)
        .unwrap();
    assert_eq!((marks.marked, marks.failed.len()), (vec![ids[1]], 1));
    assert_eq!(
        client.delete("orders-dlq", &[ids[2], ids[0]]).unwrap(),
        [ids[2]]
    );
    clock.advance(3_600_000);
    assert_eq!(
        client
            .purge("orders-dlq", Duration::from_secs(60), false)
            .unwrap(),
        1
    );

    let dlq = owner.dlq("orders-dlq").unwrap();
    let left: Vec<DeadLetter> = dlq.list(&Filter::all(), Page::first(10)).unwrap();
    assert_eq!(left.iter().map(|e| e.id()).collect::<Vec<_>>(), [ids[3]]);
    let imported = client.import(Some("archive"), &left).unwrap();
    assert_eq!(imported.imported.len(), 1);
    // The same again adds nothing: the owner holds that entry now.
    let again = client.import(Some("archive"), &left).unwrap();
    assert_eq!((again.imported.len(), again.skipped.len()), (0, 1));
    assert_eq!(owner.dlq("archive-dlq").unwrap().len(), 1);
    let _ = id;

    // Errors keep their type across the socket.
    assert!(matches!(
        client.delete("nope-dlq", &[1]),
        Err(Error::UnknownQueue(_))
    ));

    // Once the owner closes, the socket is gone, and a client says nobody answers.
    drop((q, dlq, client));
    owner.close().unwrap();
    assert!(!socket.exists());
    assert!(matches!(
        Client::connect(dir.path()),
        Err(Error::NoOwner { .. })
    ));
}

#[test]
fn the_age_of_a_message_whose_lease_was_lost_counts_from_the_loss() {
    let clock = ManualClock::new(T0);
    let (dir, store) = common::temp_store(crate::helpers::config(&clock));
    let q = store.queue("orders").unwrap();
    q.enqueue(b"ORD-1").unwrap();
    clock.advance(60_000);
    let _leased = q.lease(1).unwrap();
    drop(q);
    // The holder dies with the lease.
    drop(store);
    clock.advance(3_600_000);
    let store = Store::open(dir.path(), crate::helpers::config(&clock)).unwrap();
    let stats = store.existing_queue("orders").unwrap().stats();
    assert_eq!(stats.counts.ready, 1);
    assert_eq!(
        stats.oldest_ready_at_ms,
        Some(T0 + 60_000),
        "when the lease was taken"
    );
    let age = store.metrics_snapshot().queues[0].oldest_message_age_ms;
    assert_eq!(age, Some(3_600_000));
}
