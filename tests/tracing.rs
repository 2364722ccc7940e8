//! The spans and events of the feature `tracing` (`deadletter::trace`), read by a real
//! `tracing-subscriber` registry with a layer that records them: a message enqueued with a
//! `traceparent` keeps it through a retry, its dead letter, a replay and the delivery after
//! it, each span and event carrying it, the outcome on each handler span and the failure
//! events inside the handler's span; a message without one carries none. The same for
//! the async pool. One test per binary run sets the process's subscriber, so they share
//! one recorder and each looks only at its own queue's records.
#![cfg(feature = "tracing")]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use deadletter::pool::Retry;
use deadletter::queue::EnqueueOptions;
use deadletter::trace::TraceParent;
use deadletter::{Config, Failure, Message, ReplayOptions, Store, WorkerPool};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

/// A span or an event as the layer saw it.
#[derive(Debug, Clone)]
struct Seen {
    name: String,
    fields: BTreeMap<String, String>,
    /// For an event, the name of the span it happened in.
    parent: Option<String>,
}

impl Seen {
    fn field(&self, name: &str) -> Option<&str> {
        self.fields.get(name).map(String::as_str)
    }
}

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

#[derive(Default, Clone)]
struct Recorder {
    closed_spans: Arc<Mutex<Vec<Seen>>>,
    events: Arc<Mutex<Vec<Seen>>>,
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Recorder {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = BTreeMap::new();
        attrs.record(&mut Fields(&mut fields));
        let span = ctx.span(id).expect("a new span is in the registry");
        span.extensions_mut().insert(fields);
    }
    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let span = ctx.span(id).expect("a recorded span is in the registry");
        let mut ext = span.extensions_mut();
        let fields = ext
            .get_mut::<BTreeMap<String, String>>()
            .expect("fields stored at creation");
        values.record(&mut Fields(fields));
    }
    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let mut fields = BTreeMap::new();
        event.record(&mut Fields(&mut fields));
        let parent = ctx.event_span(event).map(|s| s.name().to_string());
        let name = event.metadata().name().to_string();
        self.events.lock().unwrap().push(Seen {
            name,
            fields,
            parent,
        });
    }
    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let span = ctx.span(&id).expect("a closing span is in the registry");
        let fields = span
            .extensions()
            .get::<BTreeMap<String, String>>()
            .cloned()
            .unwrap_or_default();
        self.closed_spans.lock().unwrap().push(Seen {
            name: span.name().to_string(),
            fields,
            parent: None,
        });
    }
}

/// The process's recorder, installed as the global subscriber on first use.
fn recorder() -> &'static Recorder {
    static RECORDER: OnceLock<Recorder> = OnceLock::new();
    RECORDER.get_or_init(|| {
        let recorder = Recorder::default();
        let subscriber = tracing_subscriber::registry().with(recorder.clone());
        tracing::subscriber::set_global_default(subscriber).expect("no subscriber yet");
        recorder
    })
}

/// The handler spans and events of `queue` (and, for events, of its DLQ), in order.
fn seen_for(queue: &str) -> (Vec<Seen>, Vec<Seen>) {
    let r = recorder();
    let of = |s: &Seen| s.field("queue") == Some(queue) || s.field("dlq") == Some(queue);
    let spans = r.closed_spans.lock().unwrap();
    let events = r.events.lock().unwrap();
    (
        spans.iter().filter(|s| of(s)).cloned().collect(),
        events.iter().filter(|s| of(s)).cloned().collect(),
    )
}

fn names(seen: &[Seen]) -> Vec<&str> {
    seen.iter().map(|s| s.name.as_str()).collect()
}

#[test]
fn a_trace_follows_a_message_through_retries_the_dlq_and_a_replay() {
    recorder();
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), Config::fast()).unwrap();
    let orders = store.queue("orders").unwrap();
    let trace = TraceParent::new_root();
    let tp = trace.to_string();
    let traced = orders
        .enqueue_with(b"ORD-1", &EnqueueOptions::new().traceparent(&trace))
        .unwrap();
    let plain = orders.enqueue(b"ORD-2").unwrap();

    // ORD-1 fails twice (a retry, then its dead letter); ORD-2 succeeds. After the replay
    // ORD-1 succeeds on its third delivery (a replay keeps the count of deliveries).
    let fixed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let fixed_in_handler = Arc::clone(&fixed);
    let run = |fixed: Arc<std::sync::atomic::AtomicBool>| {
        let pool = WorkerPool::new(&orders)
            .workers(1)
            .retry(Retry::fixed(Duration::from_millis(1)).max_attempts(2))
            .start(move |m: &Message| {
                let broken = !fixed.load(std::sync::atomic::Ordering::SeqCst);
                if m.text() == Some("ORD-1") && broken {
                    return Err(Failure::transient("Timeout", "the API did not answer"));
                }
                Ok(())
            })
            .unwrap();
        pool.run_until_idle().unwrap();
        pool.shutdown(Duration::from_secs(10)).unwrap();
    };
    run(Arc::clone(&fixed_in_handler));
    assert_eq!(orders.dlq().len(), 1);
    let dlq_entry = orders.dlq().get(traced).unwrap();
    assert_eq!(
        TraceParent::from_attributes(&dlq_entry.metadata.attributes),
        Some(trace)
    );
    fixed.store(true, std::sync::atomic::Ordering::SeqCst);
    orders
        .dlq()
        .replay_one(traced, &ReplayOptions::to_origin())
        .unwrap();
    run(fixed_in_handler);

    let (spans, events) = seen_for("orders");
    let with_trace: Vec<&Seen> = spans
        .iter()
        .filter(|s| s.field("message_id") == Some(&traced.to_string()))
        .collect();
    assert_eq!(
        with_trace
            .iter()
            .map(|s| (s.field("attempt").unwrap(), s.field("outcome").unwrap()))
            .collect::<Vec<_>>(),
        [("1", "retry"), ("2", "dead_letter"), ("3", "ok")],
        "{spans:#?}"
    );
    assert!(with_trace.iter().all(|s| s.name == "deadletter.handle"));
    assert!(with_trace
        .iter()
        .all(|s| s.field("traceparent") == Some(&tp)));
    let untraced: Vec<&Seen> = spans
        .iter()
        .filter(|s| s.field("message_id") == Some(&plain.to_string()))
        .collect();
    assert_eq!(untraced.len(), 1, "{spans:#?}");
    assert_eq!(untraced[0].field("outcome"), Some("ok"));
    assert_eq!(untraced[0].field("traceparent"), None);

    let of_traced: Vec<&Seen> = events
        .iter()
        .filter(|e| e.field("message_id") == Some(&traced.to_string()))
        .collect();
    assert_eq!(
        of_traced
            .iter()
            .map(|e| e.name.as_str())
            .collect::<Vec<_>>(),
        [
            "deadletter.enqueue",
            "deadletter.retry",
            "deadletter.dead_letter",
            "deadletter.replay"
        ],
        "{events:#?}"
    );
    assert!(of_traced
        .iter()
        .all(|e| e.field("traceparent") == Some(&tp)));
    // The failures happened inside their handler's span; the replay names where it went.
    assert_eq!(of_traced[1].parent.as_deref(), Some("deadletter.handle"));
    assert_eq!(of_traced[2].parent.as_deref(), Some("deadletter.handle"));
    assert_eq!(of_traced[2].field("error_kind"), Some("Timeout"));
    assert_eq!(
        of_traced[3].field("dlq"),
        Some(orders.dlq().name().as_str())
    );
    assert_eq!(of_traced[3].field("queue"), Some("orders"));
    let enqueued_plain = events
        .iter()
        .find(|e| e.field("message_id") == Some(&plain.to_string()))
        .expect("the plain enqueue's event");
    assert_eq!(
        names(std::slice::from_ref(enqueued_plain)),
        ["deadletter.enqueue"]
    );
    assert_eq!(enqueued_plain.field("traceparent"), None);
    store.close().unwrap();
}

#[cfg(feature = "async")]
#[test]
fn the_async_pool_traces_its_handlers_too() {
    use deadletter::async_api::AsyncWorkerPool;

    recorder();
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), Config::fast()).unwrap();
    let emails = store.queue("emails").unwrap();
    let trace = TraceParent::new_root();
    let options = EnqueueOptions::new().traceparent(&trace);
    let id = emails.enqueue_with(b"no address", &options).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let pool =
        AsyncWorkerPool::new(&emails).retry(Retry::fixed(Duration::from_millis(1)).max_attempts(2));
    runtime
        .block_on(pool.run_until_idle(|_m: Message| async {
            tracing::info!(name: "handler.inside", queue = "emails", "in the handler");
            Err::<(), _>(Failure::transient("SmtpTimeout", "no answer"))
        }))
        .unwrap();

    let (spans, events) = seen_for("emails");
    let tp = trace.to_string();
    assert_eq!(
        spans
            .iter()
            .map(|s| (s.field("attempt").unwrap(), s.field("outcome").unwrap()))
            .collect::<Vec<_>>(),
        [("1", "retry"), ("2", "dead_letter")],
        "{spans:#?}"
    );
    assert!(spans.iter().all(|s| s.field("traceparent") == Some(&tp)));
    assert!(spans
        .iter()
        .all(|s| s.field("message_id") == Some(&id.to_string())));
    // The handler's own event is inside its span.
    let inside: Vec<&Seen> = events
        .iter()
        .filter(|e| e.name == "handler.inside")
        .collect();
    assert_eq!(inside.len(), 2);
    assert!(inside
        .iter()
        .all(|e| e.parent.as_deref() == Some("deadletter.handle")));
    assert_eq!(
        names(&events)
            .into_iter()
            .filter(|n| n.starts_with("deadletter."))
            .collect::<Vec<_>>(),
        [
            "deadletter.enqueue",
            "deadletter.retry",
            "deadletter.dead_letter"
        ]
    );
    store.close().unwrap();
}
