//! Services started on a store with a guard of their own (`deadletter::services`): each
//! runs until its guard is dropped and keeps the store open meanwhile; a store opened with
//! them in its configuration runs them until its last handle goes, even when that handle
//! is dropped on a service's own thread.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use deadletter::clock::ManualClock;
use deadletter::control::{Client, SOCKET_NAME};
use deadletter::queue::EnqueueOptions;
use deadletter::replay::GuardedReplayOptions;
use deadletter::services::{Compactor, ControlServer, GuardedReplayDriver};
use deadletter::store::CompactionOptions;
use deadletter::{Error, Filter, Store};

use crate::common::{self, T0};
use crate::helpers::{fail_one, fast};

/// Waits (up to a minute, for a loaded machine) until `done` holds.
fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_control_server_serves_until_its_guard_goes_and_keeps_the_store_open_meanwhile() {
    let clock = ManualClock::new(T0);
    let (dir, store) = common::temp_store(fast(&clock));
    let socket = dir.path().join(SOCKET_NAME);
    assert!(!socket.exists(), "the configuration serves none");

    let server = ControlServer::start(&store).unwrap();
    assert_eq!(server.path(), socket);
    assert!(
        matches!(ControlServer::start(&store), Err(Error::InvalidConfig(_))),
        "one server per store"
    );
    let client = Client::connect(dir.path()).unwrap();
    client
        .enqueue("orders", b"ORD-1", &EnqueueOptions::new())
        .unwrap();
    assert_eq!(store.existing_queue("orders").unwrap().len(), 1);

    // The guard holds the store: dropping every other handle leaves it locked and served.
    drop(store);
    assert!(matches!(
        Store::open(dir.path(), fast(&clock)),
        Err(Error::Locked { .. })
    ));
    client
        .enqueue("orders", b"ORD-2", &EnqueueOptions::new())
        .unwrap();
    // Dropping the guard removes the socket, then lets go of the store.
    drop(server);
    assert!(!socket.exists());
    let store = Store::open(dir.path(), fast(&clock)).unwrap();
    assert_eq!(store.existing_queue("orders").unwrap().len(), 2);
    // The old connection's store is closed: refused, not carried out on the new one.
    assert!(matches!(
        client.enqueue("orders", b"ORD-3", &EnqueueOptions::new()),
        Err(Error::Remote { kind, .. }) if kind == "Closed"
    ));
    assert!(matches!(
        Client::connect(dir.path()),
        Err(Error::NoOwner { .. })
    ));

    // A snapshot serves nothing: its changes are its owner's.
    let snapshot = Store::open_read_only(dir.path(), fast(&clock)).unwrap();
    assert!(matches!(
        ControlServer::start(&snapshot),
        Err(Error::ReadOnly { .. })
    ));
}

/// A control socket removed under the running server (its file, or the whole store
/// directory, deleted) does not keep the guard's drop, nor the store's close, from
/// returning: there is nobody left to wake the listener through it.
#[test]
fn a_control_server_whose_socket_was_removed_still_stops() {
    let clock = ManualClock::new(T0);
    let (dir, store) = common::temp_store(fast(&clock));
    let server = ControlServer::start(&store).unwrap();
    std::fs::remove_file(server.path()).unwrap();
    drop(server);
    // The same through a store that serves its socket as a service.
    drop(store);
    let store = Store::open(dir.path(), fast(&clock).control_socket(true)).unwrap();
    std::fs::remove_file(dir.path().join(SOCKET_NAME)).unwrap();
    store.close().unwrap();
    assert!(
        Store::open(dir.path(), fast(&clock)).is_ok(),
        "the lock was released"
    );
}

#[test]
fn a_guarded_replay_driver_started_on_its_own_drives_until_its_guard_goes() {
    let clock = ManualClock::new(T0);
    let (_dir, store) = common::temp_store(fast(&clock).guarded_replay_driver(false));
    let orders = store.queue("orders").unwrap();
    orders.enqueue_batch(&["a", "b", "c", "d"]).unwrap();
    for _ in 0..4 {
        fail_one(&orders, "Bug");
    }
    let options = GuardedReplayOptions::default().canary(1).growth(1.0);
    let replay = orders
        .dlq()
        .replay_guarded(&Filter::all(), &options)
        .unwrap();
    assert_eq!(replay.replayed, 0, "no driver runs");
    // By hand: the canary.
    store.drive_guarded_replays().unwrap();
    assert_eq!(store.guarded_replay(replay.id).unwrap().replayed, 1);
    orders.ack(&orders.lease(1).unwrap()[0]).unwrap();
    assert_eq!(
        store.guarded_replay(replay.id).unwrap().replayed,
        1,
        "no driver releases the next wave"
    );

    // With a driver, the next wave is out as soon as the driver starts, and each one after
    // as soon as the one before was handled.
    let driver = GuardedReplayDriver::start(&store).unwrap();
    assert!(
        matches!(
            GuardedReplayDriver::start(&store),
            Err(Error::InvalidConfig(_))
        ),
        "one driver per store"
    );
    assert_eq!(store.guarded_replay(replay.id).unwrap().replayed, 2);
    orders.ack(&orders.lease(1).unwrap()[0]).unwrap();
    assert_eq!(store.guarded_replay(replay.id).unwrap().replayed, 3);

    // Without it again, the wave handled releases nothing.
    drop(driver);
    orders.ack(&orders.lease(1).unwrap()[0]).unwrap();
    assert_eq!(store.guarded_replay(replay.id).unwrap().replayed, 3);
    let driver = GuardedReplayDriver::start(&store).unwrap();
    assert_eq!(store.guarded_replay(replay.id).unwrap().replayed, 4);
    drop(driver);
}

#[test]
fn a_compactor_started_on_its_own_expires_until_its_guard_goes() {
    let clock = ManualClock::new(T0);
    let (_dir, store) = common::temp_store(fast(&clock));
    let orders = store.queue("orders").unwrap();
    let ttl = EnqueueOptions::new().ttl(Duration::from_secs(60));
    orders.enqueue_with(b"ORD-1", &ttl).unwrap();
    clock.advance(120_000);
    assert!(matches!(
        Compactor::start(&store, Duration::ZERO),
        Err(Error::InvalidConfig(_))
    ));

    let compactor = Compactor::start(&store, Duration::from_millis(5)).unwrap();
    eventually("the compactor expires the message", || {
        orders.dlq().len() == 1
    });
    drop(compactor);
    // Stopped: a message expiring now stays until someone compacts.
    orders.enqueue_with(b"ORD-2", &ttl).unwrap();
    clock.advance(120_000);
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(orders.len(), 1, "no compaction ran after the guard went");
    store.compact_now().unwrap();
    assert_eq!(orders.dlq().len(), 2);
}

#[test]
fn the_last_handle_dropped_on_a_service_thread_closes_the_store() {
    let clock = ManualClock::new(T0);
    let dir = tempfile::tempdir().unwrap();
    let every = CompactionOptions::default().interval(Some(Duration::from_millis(5)));
    let config = fast(&clock).compaction(every).control_socket(true);
    let store = Store::open(dir.path(), config.clone()).unwrap();
    let orders = store.queue("orders").unwrap();
    let ttl = EnqueueOptions::new().ttl(Duration::from_secs(60));
    orders.enqueue_with(b"ORD-1", &ttl).unwrap();

    // The last handle waits in a slot that the DLQ alert empties: the alert fires on the
    // compaction thread, when expiry moves the message to the DLQ.
    let last: Arc<Mutex<Option<Store>>> = Arc::new(Mutex::new(Some(store)));
    let slot = Arc::clone(&last);
    orders
        .dlq()
        .on_threshold(1, move |_| drop(slot.lock().unwrap().take()))
        .unwrap();
    drop(orders);
    clock.advance(120_000);
    eventually("the compaction thread drops the last handle", || {
        last.lock().unwrap().is_none()
    });
    // Its services stopped (the socket is gone) and the store closed: it opens again,
    // with the message in its DLQ.
    eventually("the store is released", || {
        !dir.path().join(SOCKET_NAME).exists() && Store::open(dir.path(), config.clone()).is_ok()
    });
    let store = Store::open(dir.path(), config).unwrap();
    assert_eq!(store.dlq("orders").unwrap().len(), 1);
}
