//! The dashboard's JSON API. Every answer is a JSON object; errors are
//! `{"error": "what went wrong"}` with a 4xx or 5xx status.
//!
//! Reads (`GET`):
//! - `/api/stats`: `{"dir", "at_ms", "queues": [QueueMetrics fields + "dlq_stats": DlqStats]}`;
//! - `/api/dlq/{name}?error_kind=&message=&since_ms=&until_ms=&min_attempts=&max_attempts=`
//!   `&status=pending|reprocessed&worker=&after=&limit=`: `{"dlq", "queue", "matched",
//!   "entries": [summary], "next_cursor"}` where `name` is a DLQ or queue name, a summary is
//!   `{"id", "error_kind", "error_message", "attempts", "dead_lettered_at_ms",
//!   "enqueued_at_ms", "status", "worker", "payload_size", "payload_is_text",
//!   "payload_preview"}`, and `next_cursor` is the `after` of the next page (or null);
//! - `/api/entry/{id}`: the whole envelope in the JSON form of [`crate::export`], with
//!   `payload_text` when the payload is UTF-8;
//! - `/api/timeline/{name}?hours=N` (1 to 168, default 24): dead-letterings per hour,
//!   `{"dlq", "bucket_ms", "start_ms", "buckets": [count], "earlier"}`, oldest bucket first,
//!   the last one holding the current hour.
//!
//! Changes (`POST`, JSON body, token required; see the module above):
//! - `/api/replay`: `{"dlq", "ids": [..]}` or `{"dlq", "filter": {..same keys as the list
//!   query..}}`, with optional `"to"` (target queue), `"reset_attempts"`, `"force"`,
//!   `"dry_run"`; answers `{"replayed": [ids], "failed": [{"id", "reason"}], "dry_run"}`;
//! - `/api/delete`: `{"dlq", "ids": [..]}` or `{"dlq", "filter": {..}}`; answers
//!   `{"deleted": n}`.

use percent_encoding::percent_decode_str;
use serde::Deserialize;
use serde_json::{json, Value};

use deadletter::{
    DeadLetter, DeadLetterQueue, EntryStatus, Error, Filter, MessageId, Page, ReplayOptions,
};

use crate::export::{envelope_to_json, PayloadEncoding};
use crate::routes::Reply;
use crate::source::Source;

/// A change the API makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    /// Replay entries to a queue.
    Replay,
    /// Delete entries.
    Delete,
}

impl Action {
    /// The endpoint's path.
    pub(crate) fn path(self) -> &'static str {
        match self {
            Action::Replay => "/api/replay",
            Action::Delete => "/api/delete",
        }
    }
}

/// Which entries: the same keys in a query string and in a JSON body.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct FilterSpec {
    /// Error kind, exactly.
    pub error_kind: Option<String>,
    /// A substring of the error message.
    pub message: Option<String>,
    /// Dead-lettered at or after (ms).
    pub since_ms: Option<u64>,
    /// Dead-lettered before (ms).
    pub until_ms: Option<u64>,
    /// At least this many deliveries.
    pub min_attempts: Option<u32>,
    /// At most this many deliveries.
    pub max_attempts: Option<u32>,
    /// `pending`, `reprocessed`, or `any` (the default).
    pub status: Option<String>,
    /// Worker name, exactly.
    pub worker: Option<String>,
}

impl FilterSpec {
    /// The library filter, or why the spec is not valid.
    pub(crate) fn to_filter(&self) -> Result<Filter, String> {
        let mut f = Filter::all();
        f.error_kind = self.error_kind.clone().filter(|s| !s.is_empty());
        f.message_contains = self.message.clone().filter(|s| !s.is_empty());
        f.since_ms = self.since_ms;
        f.until_ms = self.until_ms;
        f.min_attempts = self.min_attempts;
        f.max_attempts = self.max_attempts;
        f.worker = self.worker.clone().filter(|s| !s.is_empty());
        f.pending = match self.status.as_deref() {
            None | Some("") | Some("any") => None,
            Some("pending") => Some(true),
            Some("reprocessed") => Some(false),
            Some(other) => {
                return Err(format!(
                    "status {other:?}: expected pending, reprocessed or any"
                ))
            }
        };
        Ok(f)
    }

    /// Reads the spec from a query string; also returns `after` and `limit`.
    fn from_query(query: &str) -> Result<(FilterSpec, Option<MessageId>, usize), String> {
        let mut spec = FilterSpec::default();
        let mut after = None;
        let mut limit = 50usize;
        for (key, value) in form_urlencoded::parse(query.as_bytes()) {
            if value.is_empty() {
                continue;
            }
            let value = value.into_owned();
            let num = |v: &str| {
                v.parse::<u64>()
                    .map_err(|_| format!("{key}={v:?} is not a whole number"))
            };
            let small = |v: &str| {
                v.parse::<u32>()
                    .map_err(|_| format!("{key}={v:?} is not a whole number"))
            };
            match key.as_ref() {
                "error_kind" => spec.error_kind = Some(value),
                "message" => spec.message = Some(value),
                "since_ms" => spec.since_ms = Some(num(&value)?),
                "until_ms" => spec.until_ms = Some(num(&value)?),
                "min_attempts" => spec.min_attempts = Some(small(&value)?),
                "max_attempts" => spec.max_attempts = Some(small(&value)?),
                "status" => spec.status = Some(value),
                "worker" => spec.worker = Some(value),
                "after" => after = Some(num(&value)?),
                "limit" => limit = (num(&value)? as usize).clamp(1, 500),
                other => return Err(format!("unknown query parameter {other:?}")),
            }
        }
        Ok((spec, after, limit))
    }
}

/// Decodes the `{name}` segment of a path: `%XX` escapes, strictly UTF-8 once decoded (a
/// `+` is a plus sign in a path, unlike in a query string).
fn path_segment(s: &str) -> Result<String, String> {
    percent_decode_str(s)
        .decode_utf8()
        .map(|name| name.into_owned())
        .map_err(|_| format!("{s:?} is not UTF-8 once decoded"))
}

/// The status code for a library error.
fn status_of(e: &Error) -> u16 {
    match e {
        Error::UnknownQueue(_) | Error::NotFound(_) => 404,
        Error::InvalidQueueName(_) | Error::TooLarge { .. } | Error::InvalidConfig(_) => 400,
        Error::AlreadyReprocessed(_) | Error::InvalidState { .. } | Error::NameClash { .. } => 409,
        _ => 500,
    }
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
        "error_kind": e.failure.error_kind,
        "error_message": e.failure.error_message,
        "attempts": e.metadata.delivery_count,
        "dead_lettered_at_ms": e.dlq.dead_lettered_at_ms,
        "enqueued_at_ms": e.metadata.enqueued_at_ms,
        "status": status_name(&e.status),
        "worker": e.dlq.worker,
        "payload_size": e.payload.len(),
        "payload_is_text": text.is_some(),
        "payload_preview": preview,
    })
}

/// `pending`, `reprocessed_ok` or `reprocessed_failed`.
pub(crate) fn status_name(s: &EntryStatus) -> &'static str {
    match s {
        EntryStatus::Pending => "pending",
        EntryStatus::Reprocessed { success: true, .. } => "reprocessed_ok",
        EntryStatus::Reprocessed { success: false, .. } => "reprocessed_failed",
    }
}

fn list<S: Source>(store: &S, name: &str, query: &str) -> Reply {
    let (spec, after, limit) = match FilterSpec::from_query(query) {
        Ok(x) => x,
        Err(e) => return Reply::error(400, e),
    };
    let filter = match spec.to_filter() {
        Ok(f) => f,
        Err(e) => return Reply::error(400, e),
    };
    let dlq = match store.dlq(name) {
        Ok(d) => d,
        Err(e) => return lib_error(&e),
    };
    let mut page = Page::first(limit + 1);
    page.after = after;
    let mut entries = match dlq.list(&filter, page) {
        Ok(v) => v,
        Err(e) => return lib_error(&e),
    };
    let more = entries.len() > limit;
    entries.truncate(limit);
    let matched = match dlq.ids(&filter, None) {
        Ok(ids) => ids.len(),
        Err(e) => return lib_error(&e),
    };
    let next = if more {
        entries.last().map(|e| e.id())
    } else {
        None
    };
    Reply::json(
        200,
        &json!({
            "dlq": dlq.name(),
            "queue": dlq.queue_name(),
            "matched": matched,
            "entries": entries.iter().map(summary).collect::<Vec<_>>(),
            "next_cursor": next,
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

const HOUR_MS: u64 = 3_600_000;

fn timeline<S: Source>(store: &S, name: &str, query: &str) -> Reply {
    let mut hours = 24u64;
    for (key, value) in form_urlencoded::parse(query.as_bytes()) {
        match key.as_ref() {
            "hours" => match value.parse::<u64>() {
                Ok(h) if (1..=168).contains(&h) => hours = h,
                _ => return Reply::error(400, "hours must be a whole number from 1 to 168"),
            },
            other => return Reply::error(400, format!("unknown query parameter {other:?}")),
        }
    }
    let dlq = match store.dlq(name) {
        Ok(d) => d,
        Err(e) => return lib_error(&e),
    };
    let now = store.now_ms();
    let end = (now / HOUR_MS + 1) * HOUR_MS;
    let start = end.saturating_sub(hours * HOUR_MS);
    let count = |since: Option<u64>, until: Option<u64>| {
        dlq.ids(&Filter::all().between(since, until), None)
            .map(|ids| ids.len() as u64)
    };
    let mut buckets = Vec::with_capacity(hours as usize);
    for h in 0..hours {
        let from = start + h * HOUR_MS;
        match count(Some(from), Some(from + HOUR_MS)) {
            Ok(n) => buckets.push(n),
            Err(e) => return lib_error(&e),
        }
    }
    let earlier = match count(None, Some(start)) {
        Ok(n) => n,
        Err(e) => return lib_error(&e),
    };
    Reply::json(
        200,
        &json!({
            "dlq": dlq.name(),
            "bucket_ms": HOUR_MS,
            "start_ms": start,
            "buckets": buckets,
            "earlier": earlier,
        }),
    )
}

/// The body of a replay or delete request.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ChangeRequest {
    dlq: String,
    #[serde(default)]
    ids: Option<Vec<MessageId>>,
    #[serde(default)]
    filter: Option<FilterSpec>,
    #[serde(default)]
    to: Option<String>,
    #[serde(default)]
    reset_attempts: bool,
    #[serde(default)]
    force: bool,
    #[serde(default)]
    dry_run: bool,
}

/// Carries out a replay or delete; also returns a one-line summary for the log.
pub(crate) fn mutate<S: Source>(store: &S, action: Action, body: &[u8]) -> (Reply, String) {
    let req: ChangeRequest = match serde_json::from_slice(body) {
        Ok(r) => r,
        Err(e) => {
            let msg = format!("bad request body: {e}");
            return (Reply::error(400, msg.clone()), msg);
        }
    };
    let fail = |status: u16, msg: String| (Reply::error(status, msg.clone()), msg);
    let dlq = match store.dlq(&req.dlq) {
        Ok(d) => d,
        Err(e) => return fail(status_of(&e), e.to_string()),
    };
    let (ids, selection) = match (&req.ids, &req.filter) {
        (Some(ids), None) => (ids.clone(), format!("ids {ids:?}")),
        (None, Some(spec)) => {
            let filter = match spec.to_filter() {
                Ok(f) => f,
                Err(e) => return fail(400, e),
            };
            match dlq.ids(&filter, None) {
                Ok(ids) => (ids, format!("filter {spec:?}")),
                Err(e) => return fail(status_of(&e), e.to_string()),
            }
        }
        _ => return fail(400, "give exactly one of \"ids\" or \"filter\"".into()),
    };
    let dlq_name = dlq.name();
    match action {
        Action::Replay => {
            let mut options = ReplayOptions::to_origin();
            options.target = req.to.clone().filter(|t| !t.is_empty());
            options.reset_attempts = req.reset_attempts;
            options.force = req.force;
            options.dry_run = req.dry_run;
            match dlq.replay_ids(&ids, &options) {
                Ok(report) => {
                    let summary = format!(
                        "{}replayed {} of {} ({selection}) from {dlq_name} to {}, {} refused",
                        if report.dry_run {
                            "dry run: would have "
                        } else {
                            ""
                        },
                        report.replayed.len(),
                        ids.len(),
                        options.target.as_deref().unwrap_or(dlq.queue_name()),
                        report.failed.len()
                    );
                    let failed: Vec<Value> = report
                        .failed
                        .iter()
                        .map(|(id, reason)| json!({ "id": id, "reason": reason }))
                        .collect();
                    let reply = Reply::json(
                        200,
                        &json!({
                            "replayed": report.replayed,
                            "failed": failed,
                            "dry_run": report.dry_run,
                        }),
                    );
                    (reply, summary)
                }
                Err(e) => fail(status_of(&e), e.to_string()),
            }
        }
        Action::Delete => {
            if req.to.is_some() || req.reset_attempts || req.force || req.dry_run {
                return fail(
                    400,
                    "delete takes only \"dlq\" and \"ids\" or \"filter\"".into(),
                );
            }
            let mut deleted = 0u64;
            for &id in &ids {
                match dlq.delete(id) {
                    Ok(()) => deleted += 1,
                    Err(e) => {
                        let msg = format!("deleted {deleted} of {}, then: {e}", ids.len());
                        return fail(status_of(&e), msg);
                    }
                }
            }
            let summary = format!("deleted {deleted} ({selection}) from {dlq_name}");
            (Reply::json(200, &json!({ "deleted": deleted })), summary)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_parsing() {
        let (spec, after, limit) =
            FilterSpec::from_query("error_kind=Validation%20Error&message=a+b&after=7&limit=9")
                .unwrap();
        assert_eq!(spec.error_kind.as_deref(), Some("Validation Error"));
        assert_eq!(spec.message.as_deref(), Some("a b"));
        assert_eq!((after, limit), (Some(7), 9));
        assert!(FilterSpec::from_query("bogus=1").is_err());
        assert!(FilterSpec::from_query("since_ms=x").is_err());
        assert!(FilterSpec::from_query("min_attempts=%31%32")
            .is_ok_and(|(s, ..)| s.min_attempts == Some(12)));
        // As browsers do (the WHATWG form decoding): a broken escape is kept as it is.
        let (spec, ..) = FilterSpec::from_query("message=100%zz&error_kind=&worker").unwrap();
        assert_eq!(spec.message.as_deref(), Some("100%zz"));
        assert_eq!((spec.error_kind, spec.worker), (None, None));
    }

    #[test]
    fn path_segments() {
        assert_eq!(path_segment("orders%2Ddlq").unwrap(), "orders-dlq");
        assert_eq!(path_segment("a+b%20c").unwrap(), "a+b c");
        assert!(path_segment("bad%FF").is_err());
    }

    #[test]
    fn status_filter() {
        let spec = FilterSpec {
            status: Some("reprocessed".into()),
            ..FilterSpec::default()
        };
        assert_eq!(spec.to_filter().unwrap().pending, Some(false));
        let bad = FilterSpec {
            status: Some("weird".into()),
            ..FilterSpec::default()
        };
        assert!(bad.to_filter().is_err());
    }
}
