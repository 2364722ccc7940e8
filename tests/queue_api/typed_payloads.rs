//! Typed payloads: `enqueue_typed` and `Message::decode` round-trip a serde type; bytes
//! that do not decode are `Error::Codec`.

use deadletter::clock::ManualClock;
use deadletter::Error;
use serde::{Deserialize, Serialize};

use crate::common::{self, T0};
use crate::helpers::fast;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Order {
    id: u32,
    customer: String,
    items: Vec<(String, u16)>,
    express: bool,
}

#[test]
fn typed_payloads_round_trip() {
    let clock = ManualClock::new(T0);
    let (_dir, store) = common::temp_store(fast(&clock));
    let q = store.queue("orders").unwrap();
    let order = Order {
        id: 42,
        customer: "Ada".into(),
        items: vec![("tea".into(), 2), ("scones".into(), 6)],
        express: true,
    };
    q.enqueue_typed(&order).unwrap();
    q.enqueue(b"\xff\xff\xff").unwrap();
    let got = q.lease(2).unwrap();
    assert_eq!(got[0].decode::<Order>().unwrap(), order);
    assert!(matches!(got[1].decode::<Order>(), Err(Error::Codec(_))));
}
