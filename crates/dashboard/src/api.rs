//! The dashboard's JSON API. Every answer is a JSON object; errors are
//! `{"error": "what went wrong"}` with a 4xx or 5xx status.
//!
//! Reads (`GET`):
//! - `/api/stats`: `{"dir", "at_ms", "queues": [QueueMetrics fields + "dlq_stats": DlqStats]}`;
//! - `/api/dlq/{name}?error_kind=&message=&since_ms=&until_ms=&min_attempts=&max_attempts=`
//!   `&payload=&status=pending|reprocessed&worker=&fingerprint=&attr.KEY=&tag.KEY=&after=|before=&limit=`:
//!   `{"dlq", "queue", "matched", "entries": [summary], "next_cursor", "prev_cursor"}`
//!   where `name` is a DLQ or queue name, a summary is `{"id", "cursor", "error_kind",
//!   "error_message", "attempts", "dead_lettered_at_ms", "enqueued_at_ms", "status",
//!   "worker", "fingerprint", "payload_size", "payload_is_text", "payload_preview"}`,
//!   `next_cursor` is the `after` of the next page and `prev_cursor` the `before` of the
//!   previous one (null when there is none). Cursors are keyset positions (see the `query`
//!   module): a page loaded after entries came or went still starts right after the last
//!   row shown;
//! - `/api/entry/{id}`: the whole envelope in the JSON form of [`crate::export`], with
//!   `payload_text` when the payload is UTF-8;
//! - `/api/timeline/{name}?hours=N` (1 to 2160, 90 days; default 24): dead-letterings per
//!   hour, `{"dlq", "bucket_ms", "start_ms", "buckets": [count], "by_kind": {kind:
//!   [count]}, "earlier", "persisted"}`, oldest bucket first, the last one holding the
//!   current hour: the failure history the store keeps, which replays and deletes do not
//!   change (`persisted` is false on a backend that keeps none: then the counts are of the
//!   entries still held).
//!
//! - `/api/guarded` and `/api/fingerprints/{name}`: guarded replays and failure
//!   fingerprints, answered by the `guarded` module, which documents them;
//! - `/api/workers`: the worker pools attached to each queue and its rates, answered by
//!   the [`crate::workers`] module, which documents it.
//!
//! Changes (`POST /api/replay`, `/api/delete`, `/api/mark`) are answered by the `change` module, which documents them;
//! `POST /api/guarded/start` and `/api/guarded/step` by the `guarded` module.

use percent_encoding::percent_decode_str;
use serde_json::{json, Value};

use deadletter::dlq::{Cursor, DeadLetter, HISTORY_HOURS};
use deadletter::queue::MessageId;
use deadletter::{DeadLetterQueue, Error, Page};

use crate::export::{envelope_to_json, status_name, PayloadEncoding};
use crate::query::{cursor_text, ListQuery};
use crate::reply::{status_of, Reply};
use crate::source::Source;

/// Decodes the `{name}` segment of a path: `%XX` escapes, strictly UTF-8 once decoded (a
/// `+` is a plus sign in a path, unlike in a query string).
fn path_segment(s: &str) -> Result<String, String> {
    percent_decode_str(s)
        .decode_utf8()
        .map(|name| name.into_owned())
        .map_err(|_| format!("{s:?} is not UTF-8 once decoded"))
}

fn lib_error(e: &Error) -> Reply {
    Reply::error(status_of(e), e.to_string())
}

/// Answers a `GET` under `/api/`.
pub(crate) fn get<S: Source>(store: &S, path: &str, query: &str) -> Reply {
    let rest = &path["/api/".len()..];
    let (what, arg) = rest.split_once('/').unwrap_or((rest, ""));
    let arg = match path_segment(arg) {
        Ok(a) => a,
        Err(e) => return Reply::error(400, e),
    };
    match (what, arg.is_empty()) {
        ("stats", true) => stats(store),
        ("dlq", false) => list(store, &arg, query),
        ("entry", false) => match arg.parse::<MessageId>() {
            Ok(id) => entry(store, id),
            Err(_) => Reply::error(400, format!("{arg:?} is not an entry id")),
        },
        ("timeline", false) => timeline(store, &arg, query),
        ("guarded", true) => crate::guarded::list(store),
        ("workers", true) => crate::workers::get(store),
        ("fingerprints", false) => crate::guarded::fingerprints(store, &arg),
        _ => Reply::error(404, format!("no such endpoint {path:?}")),
    }
}

/// The JSON value of `value`. The library's report types are plain structs with string
/// keys, which serde_json always encodes; should one ever fail, the value says why
/// instead of a panic.
fn to_json(value: &impl serde::Serialize) -> Value {
    serde_json::to_value(value).unwrap_or_else(|e| json!({ "error": e.to_string() }))
}

/// The stats document of `/api/stats` (and of `deadletter stats --json`): `{"dir",
/// "at_ms", "queues": [QueueMetrics fields + "dlq_stats": DlqStats]}`; `dir` says what is
/// served (a store's directory, a namespace's URL).
pub fn stats_json<S: Source>(store: &S) -> Result<Value, Error> {
    let metrics = store.metrics()?;
    let mut queues = Vec::new();
    for q in &metrics.queues {
        let mut value = to_json(q);
        let dlq_stats = to_json(&store.dlq(&q.dlq)?.stats()?);
        if let Value::Object(map) = &mut value {
            map.insert("dlq_stats".into(), dlq_stats);
        }
        queues.push(value);
    }
    Ok(json!({
        "dir": store.describe(),
        "at_ms": metrics.at_ms,
        "queues": queues,
    }))
}

fn stats<S: Source>(store: &S) -> Reply {
    match stats_json(store) {
        Ok(doc) => Reply::json(200, &doc),
        Err(e) => lib_error(&e),
    }
}

/// A list row: what the table shows, without the whole payload.
fn summary(e: &DeadLetter) -> Value {
    let text = std::str::from_utf8(&e.payload).ok();
    let preview = match text {
        Some(t) => t.chars().take(120).collect::<String>(),
        None => PayloadEncoding::Hex.encode(&e.payload[..e.payload.len().min(48)]),
    };
    json!({
        "id": e.id(),
        "cursor": cursor_text(&Cursor::of(e)),
        "error_kind": e.failure.error_kind,
        "error_message": e.failure.error_message,
        "attempts": e.metadata.delivery_count,
        "dead_lettered_at_ms": e.dlq.dead_lettered_at_ms,
        "enqueued_at_ms": e.metadata.enqueued_at_ms,
        "status": status_name(&e.status),
        "worker": e.dlq.worker,
        "fingerprint": e.fingerprint.map(|f| f.to_string()),
        "payload_size": e.payload.len(),
        "payload_is_text": text.is_some(),
        "payload_preview": preview,
    })
}

fn list<S: Source>(store: &S, name: &str, query: &str) -> Reply {
    let q = match ListQuery::parse(query) {
        Ok(q) => q,
        Err(e) => return Reply::error(400, e),
    };
    let filter = match q.spec.to_filter() {
        Ok(f) => f,
        Err(e) => return Reply::error(400, e),
    };
    let dlq = match store.dlq(name) {
        Ok(d) => d,
        Err(e) => return lib_error(&e),
    };
    let page = match (q.before, q.after) {
        (Some(c), _) => Page::before_cursor(c, q.limit),
        (None, Some(c)) => Page::after_cursor(c, q.limit),
        (None, None) => Page::first(q.limit),
    };
    let listed = dlq.list(&filter, page).and_then(|entries| {
        // Whether there is a page on either side: one entry past each end.
        let beyond = |page: Page| dlq.list(&filter, page).map(|v| !v.is_empty());
        let next = match entries.last() {
            Some(last) => {
                beyond(Page::after_cursor(Cursor::of(last), 1))?.then(|| Cursor::of(last))
            }
            // An empty page before a place: what follows it is the next page.
            None => q
                .before
                .filter(|&c| beyond(Page::after_cursor(c, 1)).unwrap_or(false)),
        };
        let prev = match entries.first() {
            Some(first) => {
                beyond(Page::before_cursor(Cursor::of(first), 1))?.then(|| Cursor::of(first))
            }
            None => q
                .after
                .filter(|&c| beyond(Page::before_cursor(c, 1)).unwrap_or(false)),
        };
        let matched = dlq.ids(&filter, None)?.len();
        Ok((entries, next, prev, matched))
    });
    let (entries, next, prev, matched) = match listed {
        Ok(x) => x,
        Err(e) => return lib_error(&e),
    };
    Reply::json(
        200,
        &json!({
            "dlq": dlq.name(),
            "queue": dlq.queue_name(),
            "matched": matched,
            "entries": entries.iter().map(summary).collect::<Vec<_>>(),
            "next_cursor": next.as_ref().map(cursor_text),
            "prev_cursor": prev.as_ref().map(cursor_text),
        }),
    )
}

/// Finds the entry `id` in whichever DLQ holds it.
pub fn find_entry<S: Source>(store: &S, id: MessageId) -> Result<(S::Dlq, DeadLetter), Error> {
    for name in store.queue_names()? {
        let dlq = store.dlq(&name)?;
        match dlq.get(id) {
            Ok(e) => return Ok((dlq, e)),
            Err(Error::NotFound(_)) => continue,
            Err(e) => return Err(e),
        }
    }
    Err(Error::NotFound(id))
}

fn entry<S: Source>(store: &S, id: MessageId) -> Reply {
    match find_entry(store, id) {
        Ok((_, e)) => Reply::json(200, &envelope_to_json(&e, PayloadEncoding::Base64, true)),
        Err(e) => lib_error(&e),
    }
}

fn timeline<S: Source>(store: &S, name: &str, query: &str) -> Reply {
    let mut hours = 24u32;
    for (key, value) in form_urlencoded::parse(query.as_bytes()) {
        match key.as_ref() {
            "hours" => match value.parse::<u32>() {
                Ok(h) if (1..=HISTORY_HOURS).contains(&h) => hours = h,
                _ => {
                    return Reply::error(
                        400,
                        format!("hours must be a whole number from 1 to {HISTORY_HOURS}"),
                    )
                }
            },
            other => return Reply::error(400, format!("unknown query parameter {other:?}")),
        }
    }
    let dlq = match store.dlq(name) {
        Ok(d) => d,
        Err(e) => return lib_error(&e),
    };
    match dlq.failure_timeline(store.now_ms(), hours) {
        Ok(t) => Reply::json(
            200,
            &json!({
                "dlq": dlq.name(),
                "bucket_ms": t.bucket_ms,
                "start_ms": t.start_ms,
                "buckets": t.buckets,
                "by_kind": t.by_kind,
                "earlier": t.earlier,
                "persisted": t.persisted,
            }),
        ),
        Err(e) => lib_error(&e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_segments() {
        assert_eq!(path_segment("orders%2Ddlq").unwrap(), "orders-dlq");
        assert_eq!(path_segment("a+b%20c").unwrap(), "a+b c");
        assert!(path_segment("bad%FF").is_err());
    }
}
