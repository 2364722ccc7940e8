//! One process, one handle at a time: a second open of a store directory is
//! `Error::Locked` until every handle of the first is gone.

use deadletter::clock::ManualClock;
use deadletter::{Error, Store};

use crate::common::{self, T0};
use crate::helpers::config;

#[test]
fn a_second_open_of_the_same_directory_is_locked() {
    let clock = ManualClock::new(T0);
    let (dir, store) = common::temp_store(config(&clock));
    let q = store.queue("q").unwrap();
    q.enqueue(b"one").unwrap();
    match Store::open(dir.path(), config(&clock)) {
        Err(Error::Locked { path, .. }) => assert_eq!(path, dir.path()),
        other => panic!("expected Locked, got {other:?}"),
    }
    // The directory is free again once every handle is gone.
    drop(q);
    store.close().unwrap();
    let store = Store::open(dir.path(), config(&clock)).unwrap();
    assert_eq!(store.existing_queue("q").unwrap().len(), 1);
}
