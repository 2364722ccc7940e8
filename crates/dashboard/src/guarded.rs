//! Guarded replays and failure fingerprints in the dashboard's API, and a guarded replay's
//! report in JSON (the form `deadletter replay --progress --json` prints too).
//!
//! - `GET /api/guarded`: `{"available", "replays": [report]}` (see [`report_json`]); a
//!   running replay's report also says whether anything consumes its target queue,
//!   `consumer` (see [`crate::workers::consumer_json`]);
//! - `GET /api/fingerprints/{dlq}`: the DLQ's failure fingerprints, the most frequent first;
//! - `POST /api/guarded/start`: `{"dlq", "ids": [..]}` or `{"dlq", "filter": {..}}`, with
//!   optional `"to"`, `"reset_attempts"`, `"force"`, `"canary"`, `"growth"`,
//!   `"max_failure_ratio"`, `"rate"`; answers the new replay's report;
//! - `POST /api/guarded/step`: `{"id", "step": "pause" | "resume" | "cancel"}`; answers the
//!   replay's report.
//!
//! The store drives a guarded replay once started (see the library's `Dlq::replay_guarded`);
//! the page polls `/api/guarded` for its progress.

use deadletter::queue::MessageId;
use deadletter::replay::{GuardedReplay, GuardedReplayOptions, GuardedReplayState};
use deadletter::{DeadLetterQueue, Error, ReplayOptions};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::query::FilterSpec;
use crate::reply::{refuse_unknown_target, status_of, Reply};
use crate::source::{GuardedReplays, GuardedStep, Source};
use crate::workers::consumer_json;

/// A guarded replay's report as a JSON object: every number of
/// [`GuardedReplay`], `state` as a word (`running`, `paused`, `completed`, `stopped`,
/// `cancelled`), `state_text` in words (why it stopped), and for a stopped one `stopped`:
/// `{"wave", "failed", "handled"}`.
pub fn report_json(r: &GuardedReplay) -> Value {
    let stopped = match r.state {
        GuardedReplayState::Stopped {
            wave,
            failed,
            handled,
        } => json!({ "wave": wave, "failed": failed, "handled": handled }),
        _ => Value::Null,
    };
    json!({
        "id": r.id,
        "dlq": r.dlq,
        "target": r.target,
        "selection": r.selection,
        "started_by": r.started_by,
        "state": r.state.name(),
        "state_text": r.state.to_string(),
        "stopped": stopped,
        "active": r.is_active(),
        "selected": r.selected,
        "replayed": r.replayed,
        "succeeded": r.succeeded,
        "failed_again": r.failed_again,
        "removed": r.removed,
        "waiting": r.waiting,
        "skipped": r.skipped,
        "left": r.left,
        "wave": r.wave,
        "wave_size": r.wave_size,
        "wave_released": r.wave_released,
        "canary": r.canary,
        "growth": r.growth,
        "max_failure_ratio": r.max_failure_ratio,
        "rate_per_sec": r.rate_per_sec,
        "reset_attempts": r.reset_attempts,
        "started_at_ms": r.started_at_ms,
        "updated_at_ms": r.updated_at_ms,
    })
}

/// A guarded replay of entries selected by ids or a filter, as `POST /api/guarded/start`
/// takes it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct StartRequest {
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
    canary: Option<u32>,
    #[serde(default)]
    growth: Option<f64>,
    #[serde(default)]
    max_failure_ratio: Option<f64>,
    #[serde(default)]
    rate: Option<u32>,
}

/// What `POST /api/guarded/step` takes.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct StepRequest {
    id: u64,
    step: String,
}

/// `GET /api/guarded`: `{"available", "replays": [report]}`; `available` is false on a
/// backend that keeps no guarded replays (the page then offers none).
pub(crate) fn list<S: Source>(store: &S) -> Reply {
    match store.guarded() {
        None => Reply::json(200, &json!({ "available": false, "replays": [] })),
        Some(g) => match g.guarded_list() {
            Ok(all) => {
                // Asked once, and only when a replay runs: a store's owner answers it.
                let workers = all.iter().any(|r| r.is_active()).then(|| store.workers());
                let replays: Vec<Value> = all
                    .iter()
                    .map(|r| {
                        let mut v = report_json(r);
                        if let (true, Some(w)) = (r.is_active(), &workers) {
                            let target = target_queue(store, r);
                            v["consumer"] = consumer_json(&target, w.as_ref());
                        }
                        v
                    })
                    .collect();
                Reply::json(200, &json!({ "available": true, "replays": replays }))
            }
            Err(e) => Reply::error(status_of(&e), e.to_string()),
        },
    }
}

/// The queue guarded replay `r` releases into: its target, or its DLQ's own queue.
pub fn target_queue<S: Source>(store: &S, r: &GuardedReplay) -> String {
    match &r.target {
        Some(t) => t.clone(),
        None => store
            .dlq(&r.dlq)
            .map(|d| d.queue_name().to_string())
            .unwrap_or_else(|_| r.dlq.clone()),
    }
}

/// `GET /api/fingerprints/{dlq}`: `{"dlq", "fingerprints": [{"fingerprint", "error_kind",
/// "template", "count", "first_seen_ms", "last_seen_ms", "example_id", "as_of_ms",
/// "last_day_by_hour": [24 counts, the last hour first]}]}`, the most frequent first.
pub(crate) fn fingerprints<S: Source>(store: &S, name: &str) -> Reply {
    let dlq = match store.dlq(name) {
        Ok(d) => d,
        Err(e) => return Reply::error(status_of(&e), e.to_string()),
    };
    match dlq.fingerprints() {
        Ok(mut all) => {
            all.sort_by(|a, b| {
                b.count
                    .cmp(&a.count)
                    .then(a.first_seen_ms.cmp(&b.first_seen_ms))
            });
            let rows: Vec<Value> = all
                .iter()
                .map(|f| {
                    json!({
                        "fingerprint": f.fingerprint.to_string(),
                        "error_kind": f.error_kind,
                        "template": f.template,
                        "count": f.count,
                        "first_seen_ms": f.first_seen_ms,
                        "last_seen_ms": f.last_seen_ms,
                        "example_id": f.example_id,
                        "as_of_ms": f.as_of_ms,
                        "last_day_by_hour": f.last_day_by_hour.to_vec(),
                    })
                })
                .collect();
            Reply::json(200, &json!({ "dlq": dlq.name(), "fingerprints": rows }))
        }
        Err(e) => Reply::error(status_of(&e), e.to_string()),
    }
}

/// What a change answers: the reply, and a one-line summary for the log of changes.
type Answer = (Reply, String);

fn fail(status: u16, msg: String) -> Answer {
    (Reply::error(status, msg.clone()), msg)
}

fn lib_fail(e: Error) -> Answer {
    fail(status_of(&e), e.to_string())
}

/// Answers a change to a guarded replay: the replay's report and the summary `change`
/// returns, or the refusal it stopped at. Changes need a backend that keeps guarded
/// replays, and a body that parses.
fn answer<S: Source, R: DeserializeOwned>(
    store: &S,
    body: &[u8],
    change: impl FnOnce(&dyn GuardedReplays, R) -> Result<(String, GuardedReplay), Answer>,
) -> Answer {
    let Some(guarded) = store.guarded() else {
        return fail(
            404,
            "this backend keeps no guarded replays (a store does, in its log)".into(),
        );
    };
    let result = serde_json::from_slice(body)
        .map_err(|e| fail(400, format!("bad request body: {e}")))
        .and_then(|req| change(guarded, req));
    match result {
        Ok((summary, report)) => (Reply::json(200, &report_json(&report)), summary),
        Err(refused) => refused,
    }
}

/// `POST /api/guarded/step`: pauses, resumes or cancels a guarded replay.
pub(crate) fn step<S: Source>(store: &S, body: &[u8]) -> Answer {
    answer(store, body, |guarded, req: StepRequest| {
        let step = match req.step.as_str() {
            "pause" => GuardedStep::Pause,
            "resume" => GuardedStep::Resume,
            "cancel" => GuardedStep::Cancel,
            other => {
                return Err(fail(
                    400,
                    format!("step {other:?}: give \"pause\", \"resume\" or \"cancel\""),
                ))
            }
        };
        let r = guarded.guarded_step(req.id, step).map_err(lib_fail)?;
        Ok((format!("{} guarded replay {}", req.step, r.id), r))
    })
}

/// `POST /api/guarded/start`: starts a guarded replay of the selected entries.
pub(crate) fn start<S: Source>(store: &S, body: &[u8]) -> Answer {
    answer(store, body, |guarded, req: StartRequest| {
        let dlq = store.dlq(&req.dlq).map_err(lib_fail)?;
        if let Some(to) = req.to.as_deref().filter(|t| !t.is_empty()) {
            if let Some(refused) = refuse_unknown_target(store, to) {
                return Err(refused);
            }
        }
        let (ids, selection) = match (&req.ids, &req.filter) {
            (Some(ids), None) => (ids.clone(), format!("{} selected entries", ids.len())),
            (None, Some(spec)) => {
                let filter = spec.to_filter().map_err(|e| fail(400, e))?;
                (dlq.ids(&filter, None).map_err(lib_fail)?, spec.describe())
            }
            _ => {
                return Err(fail(
                    400,
                    "give exactly one of \"ids\" or \"filter\"".into(),
                ))
            }
        };
        let mut replay = ReplayOptions::to_origin();
        replay.target = req.to.clone().filter(|t| !t.is_empty());
        replay.reset_attempts = req.reset_attempts;
        replay.force = req.force;
        let defaults = GuardedReplayOptions::default();
        let mut options = GuardedReplayOptions::new(replay)
            .canary(req.canary.unwrap_or(defaults.canary))
            .growth(req.growth.unwrap_or(defaults.growth))
            .max_failure_ratio(req.max_failure_ratio.unwrap_or(defaults.max_failure_ratio))
            .selection(selection);
        options.rate_per_sec = req.rate;
        let r = guarded
            .guarded_start(&dlq.name(), &ids, &options)
            .map_err(lib_fail)?;
        let summary = format!(
            "started guarded replay {} of {} ({}) in {}",
            r.id, r.selected, r.selection, r.dlq
        );
        Ok((summary, r))
    })
}
