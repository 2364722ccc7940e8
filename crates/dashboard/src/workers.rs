//! The worker pools attached to each queue and the queues' recent rates in the dashboard's
//! API, in the JSON form `deadletter workers --json` prints too, and what a guarded replay
//! says of its target's consumers.
//!
//! - `GET /api/workers`: `{"available", "reason", "at_ms", "owner_pid", "queues": [{"queue",
//!   "pools": [pool], "rates": {"last_minute", "last_5_minutes"}}]}` where a pool is an
//!   `AttachedPool` (`id`, `queue`, `name`, `kind`, `workers`, `in_flight`,
//!   `started_at_ms`, `last_heartbeat_ms`, `pid`, `host`) with `heartbeat_age_ms`, and a
//!   rate window a `RateWindow` (`seconds`, `covered_ms`, `enqueued`, `acked`, `retried`,
//!   `dead_lettered`) with `per_second: {"enqueued", "acked", "failed"}`. `available` is
//!   false (with `reason`, and no queues) where the pools cannot be known: a backend that
//!   keeps no list, or a store whose owner could not be asked.

use deadletter::pool::{QueueWorkers, Workers};
use deadletter::queue::RateWindow;
use deadletter::Error;
use serde_json::{json, Value};

use crate::reply::Reply;
use crate::source::Source;

/// `{"at_ms", "owner_pid", "queues": [...]}` of `workers` (see the module documentation);
/// with `rates` false (rates the reader cannot vouch for: a snapshot's) each queue's
/// `rates` is null.
pub fn workers_json<'a>(
    workers: &Workers,
    queues: impl IntoIterator<Item = &'a QueueWorkers>,
    rates: bool,
) -> Value {
    let queues: Vec<Value> = queues
        .into_iter()
        .map(|q| queue_json(q, workers.at_ms, rates))
        .collect();
    json!({
        "at_ms": workers.at_ms,
        "owner_pid": workers.live.then_some(workers.pid),
        "queues": queues,
    })
}

fn queue_json(q: &QueueWorkers, at_ms: u64, rates: bool) -> Value {
    let pools: Vec<Value> = q
        .pools
        .iter()
        .map(|p| {
            let mut v = serde_json::to_value(p).unwrap_or(Value::Null);
            v["heartbeat_age_ms"] = at_ms.saturating_sub(p.last_heartbeat_ms).into();
            v
        })
        .collect();
    let rates = rates.then(|| {
        json!({
            "last_minute": window_json(&q.rates.last_minute),
            "last_5_minutes": window_json(&q.rates.last_5_minutes),
        })
    });
    json!({ "queue": q.queue, "pools": pools, "rates": rates })
}

/// A rate window with its per-second rates.
pub fn window_json(w: &RateWindow) -> Value {
    let mut v = serde_json::to_value(w).unwrap_or(Value::Null);
    v["per_second"] = json!({
        "enqueued": w.per_second(w.enqueued),
        "acked": w.per_second(w.acked),
        "failed": w.per_second(w.failed()),
    });
    v
}

/// What to say of queue `queue` when nothing consumes it: how to attach a consumer.
fn no_consumer_hint(queue: &str) -> String {
    format!(
        "no worker pool is attached to {queue}, so nothing consumes what is replayed there: {}",
        attach_hint(queue)
    )
}

/// How to attach a consumer to `queue`.
fn attach_hint(queue: &str) -> String {
    format!(
        "start a WorkerPool on queue {queue:?} in the process that holds the store (it must \
         open the store with Config::control_socket for the pool to be seen from here)"
    )
}

/// What a running guarded replay into `target` says of its consumers: `{"queue",
/// "known", "pools", "hint"}`; `known` is false (with the reason as `hint`) when the pools
/// cannot be known, `pools` is how many are attached, and `hint` says how to attach one
/// when there is none.
pub fn consumer_json(target: &str, workers: Option<&Result<Workers, Error>>) -> Value {
    match workers {
        Some(Ok(w)) => {
            let pools = w.queue(target).map_or(0, |q| q.pools.len());
            let hint = (pools == 0).then(|| no_consumer_hint(target));
            json!({ "queue": target, "known": true, "pools": pools, "hint": hint })
        }
        Some(Err(e)) => json!({
            "queue": target,
            "known": false,
            "pools": null,
            "hint": format!(
                "whether a worker pool consumes {target} cannot be seen ({}); without one the \
                 replay waits: {}",
                why_unknown(e),
                attach_hint(target)
            ),
        }),
        None => json!({ "queue": target, "known": false, "pools": null, "hint": null }),
    }
}

/// Why the pools cannot be known, in words: for a store whose owner could not be asked,
/// the reason (the error's own text speaks of a change).
fn why_unknown(e: &Error) -> String {
    match e {
        Error::NoOwner { path, reason } => format!(
            "the process holding {} cannot be asked: {reason}",
            path.display()
        ),
        other => other.to_string(),
    }
}

/// `GET /api/workers`.
pub(crate) fn get<S: Source>(store: &S) -> Reply {
    let unavailable = |reason: String| {
        Reply::json(
            200,
            &json!({ "available": false, "reason": reason, "queues": [] }),
        )
    };
    match store.workers() {
        None => unavailable(format!(
            "{} keeps no list of the worker pools consuming it",
            store.describe()
        )),
        Some(Err(e)) => unavailable(why_unknown(&e)),
        Some(Ok(w)) => {
            let mut doc = workers_json(&w, &w.queues, true);
            doc["available"] = true.into();
            doc["reason"] = Value::Null;
            Reply::json(200, &doc)
        }
    }
}
