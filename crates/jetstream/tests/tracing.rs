//! The JetStream backend's own events (feature `tracing`): a message enqueued with a
//! `traceparent` gives a `deadletter.enqueue` event carrying it, and its replay from the
//! DLQ a `deadletter.replay` event carrying it, read by a real `tracing-subscriber`
//! registry with a layer that records events.

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use deadletter::queue::{EnqueueOptions, FailureReport};
use deadletter::trace::TraceParent;
use deadletter::{DeadLetterQueue, Failure, MessageQueue, ReplayOptions};
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

/// An event seen: its name and fields.
type Seen = (String, BTreeMap<String, String>);

/// The events seen.
#[derive(Default, Clone)]
struct Recorder(Arc<Mutex<Vec<Seen>>>);

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_string(), value.to_string());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0
            .insert(field.name().to_string(), format!("{value:?}"));
    }
}

impl<S: Subscriber> Layer<S> for Recorder {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let mut fields = BTreeMap::new();
        event.record(&mut Fields(&mut fields));
        let name = event.metadata().name().to_string();
        self.0.lock().unwrap().push((name, fields));
    }
}

#[test]
fn enqueues_and_replays_carry_the_messages_traceparent() {
    let recorder = Recorder::default();
    let subscriber = tracing_subscriber::registry().with(recorder.clone());
    let _guard = tracing::subscriber::set_default(subscriber);

    let js = common::fresh_namespace(&common::server_url());
    let orders = js.queue("orders").unwrap();
    let trace = TraceParent::new_root();
    let traced = EnqueueOptions::new().traceparent(&trace);
    let id = orders.enqueue_with(b"ORD-1", &traced).unwrap();
    let plain = orders.enqueue(b"ORD-2").unwrap();
    let msgs = orders.lease(2).unwrap();
    let failure = Failure::permanent("Invalid", "bad order");
    for m in &msgs {
        orders
            .dead_letter(m, &FailureReport::new(&failure))
            .unwrap();
    }
    orders
        .dlq()
        .replay_one(id, &ReplayOptions::to_origin())
        .unwrap();

    let seen = recorder.0.lock().unwrap().clone();
    let of = |name: &str, id: u64| {
        seen.iter()
            .find(|(n, f)| n == name && f.get("message_id") == Some(&id.to_string()))
            .map(|(_, f)| f.clone())
            .unwrap_or_else(|| panic!("no {name} event of message {id} in {seen:?}"))
    };
    let enqueued = of("deadletter.enqueue", id);
    assert_eq!(enqueued["queue"], "orders");
    assert_eq!(enqueued["traceparent"], trace.to_string());
    assert!(!of("deadletter.enqueue", plain).contains_key("traceparent"));
    let replayed = of("deadletter.replay", id);
    assert_eq!(replayed["queue"], "orders");
    assert_eq!(replayed["dlq"], orders.dlq().name());
    assert_eq!(replayed["traceparent"], trace.to_string());
    js.delete_namespace().unwrap();
}
