//! The dashboard's changes (`POST`, JSON body; the checks of the token, origin and body are
//! the routes' business): replay, delete, and mark reprocessed, by ids (the rows an
//! operator selected) or by filter (every matching entry). Each answers a JSON object and
//! a one-line summary for the log of changes.
//!
//! - `/api/replay`: `{"dlq", "ids": [..]}` or `{"dlq", "filter": {..same keys as the list
//!   query..}}`, with optional `"to"` (target queue), `"reset_attempts"`, `"force"`,
//!   `"dry_run"`; answers `{"replayed": [ids], "failed": [{"id", "reason"}], "dry_run"}`;
//!   a `"to"` naming no queue of the backend is refused (404, `"kind": "unknown_queue"`,
//!   with the nearest known name as `"suggestion"`): the dashboard creates no queue. With
//!   `"payload"` (text) and one id, that entry goes back with this payload in place of
//!   its own (edit-then-replay), refused (in `"failed"`) if it was replayed since the
//!   `"generation"` given, the one the edited payload was read at;
//! - `/api/delete`: `{"dlq", "ids"}` or `{"dlq", "filter"}`; answers `{"deleted": n}`;
//! - `/api/mark`: `{"dlq", "ids"}` or `{"dlq", "filter"}`, with `"success"` (true: it was
//!   reprocessed and it worked; false: it did not) and an optional `"note"`; answers
//!   `{"marked": [ids], "failed": [{"id", "reason"}]}`. The entries stay in the DLQ, no
//!   longer pending. The note goes to the log of changes with the ids.

use serde::Deserialize;
use serde_json::{json, Value};

use deadletter::queue::MessageId;
use deadletter::replay::Correction;
use deadletter::{DeadLetterQueue, ReplayOptions};

use crate::guarded;
use crate::query::FilterSpec;
use crate::reply::{refuse_unknown_target, status_of, Reply};
use crate::source::Source;

/// A change the API makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    /// Replay entries to a queue.
    Replay,
    /// Delete entries.
    Delete,
    /// Mark entries reprocessed.
    Mark,
    /// Start a guarded replay (see the `guarded` module).
    GuardedStart,
    /// Pause, resume or cancel a guarded replay.
    GuardedStep,
}

impl Action {
    /// The endpoint's path.
    pub(crate) fn path(self) -> &'static str {
        match self {
            Action::Replay => "/api/replay",
            Action::Delete => "/api/delete",
            Action::Mark => "/api/mark",
            Action::GuardedStart => "/api/guarded/start",
            Action::GuardedStep => "/api/guarded/step",
        }
    }

    /// The action whose endpoint is `path`.
    pub(crate) fn of_path(path: &str) -> Option<Action> {
        [
            Action::Replay,
            Action::Delete,
            Action::Mark,
            Action::GuardedStart,
            Action::GuardedStep,
        ]
        .into_iter()
        .find(|a| a.path() == path)
    }
}

/// The longest note kept with a mark.
const MAX_NOTE: usize = 500;

/// The body of a change request.
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
    #[serde(default)]
    success: Option<bool>,
    #[serde(default)]
    note: Option<String>,
    #[serde(default)]
    payload: Option<String>,
    #[serde(default)]
    generation: Option<u32>,
}

impl ChangeRequest {
    /// The fields `action` does not take, if any is given.
    fn stray_field(&self, action: Action) -> Option<&'static str> {
        let replay_only = self.to.is_some()
            || self.reset_attempts
            || self.force
            || self.dry_run
            || self.payload.is_some()
            || self.generation.is_some();
        let mark_only = self.success.is_some() || self.note.is_some();
        match action {
            Action::Replay if mark_only => Some("replay does not take \"success\" or \"note\""),
            Action::Replay if self.generation.is_some() && self.payload.is_none() => {
                Some("\"generation\" goes with a corrected \"payload\"")
            }
            Action::Replay
                if self.payload.is_some() && !matches!(&self.ids, Some(ids) if ids.len() == 1) =>
            {
                Some("a corrected \"payload\" replays one entry: give \"ids\" with its id alone")
            }
            Action::Delete if replay_only || mark_only => {
                Some("delete takes only \"dlq\" and \"ids\" or \"filter\"")
            }
            Action::Mark if replay_only => {
                Some("mark takes only \"dlq\", \"ids\" or \"filter\", \"success\" and \"note\"")
            }
            _ => None,
        }
    }
}

/// One line of a note for the log: control characters replaced, length bounded.
fn note_for_log(note: &str) -> String {
    note.chars()
        .take(MAX_NOTE)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

fn failed_json(failed: &[(MessageId, String)]) -> Vec<Value> {
    failed
        .iter()
        .map(|(id, reason)| json!({ "id": id, "reason": reason }))
        .collect()
}

/// Carries out a change; also returns a one-line summary for the log.
pub(crate) fn mutate<S: Source>(store: &S, action: Action, body: &[u8]) -> (Reply, String) {
    match action {
        Action::GuardedStart => return guarded::start(store, body),
        Action::GuardedStep => return guarded::step(store, body),
        Action::Replay | Action::Delete | Action::Mark => {}
    }
    let fail = |status: u16, msg: String| (Reply::error(status, msg.clone()), msg);
    let req: ChangeRequest = match serde_json::from_slice(body) {
        Ok(r) => r,
        Err(e) => return fail(400, format!("bad request body: {e}")),
    };
    if let Some(why) = req.stray_field(action) {
        return fail(400, why.into());
    }
    if let Some(to) = req.to.as_deref().filter(|t| !t.is_empty()) {
        if let Some(refused) = refuse_unknown_target(store, to) {
            return refused;
        }
    }
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
        // Their bodies are not change requests: answered above, before the parse.
        Action::GuardedStart => guarded::start(store, body),
        Action::GuardedStep => guarded::step(store, body),
        Action::Replay => {
            let mut options = ReplayOptions::to_origin();
            options.target = req.to.clone().filter(|t| !t.is_empty());
            options.reset_attempts = req.reset_attempts;
            options.force = req.force;
            options.dry_run = req.dry_run;
            let replayed = match &req.payload {
                Some(payload) => {
                    options.detail = Some("payload edited in the dashboard".into());
                    let mut correction = Correction::new(ids[0], payload.as_bytes());
                    correction.generation = req.generation;
                    dlq.replay_corrected_batch(&[correction], &options)
                }
                None => dlq.replay_ids(&ids, &options),
            };
            match replayed {
                Ok(report) => {
                    let summary = format!(
                        "{}replayed {} of {} ({selection}) from {dlq_name} to {}{}, {} refused",
                        if report.dry_run {
                            "dry run: would have "
                        } else {
                            ""
                        },
                        report.replayed.len(),
                        ids.len(),
                        options.target.as_deref().unwrap_or(dlq.queue_name()),
                        match &req.payload {
                            Some(p) => format!(" with an edited payload ({} bytes)", p.len()),
                            None => String::new(),
                        },
                        report.failed.len()
                    );
                    let reply = Reply::json(
                        200,
                        &json!({
                            "replayed": report.replayed,
                            "failed": failed_json(&report.failed),
                            "dry_run": report.dry_run,
                        }),
                    );
                    (reply, summary)
                }
                Err(e) => fail(status_of(&e), e.to_string()),
            }
        }
        Action::Delete => {
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
        Action::Mark => {
            let Some(success) = req.success else {
                return fail(400, "mark needs \"success\": true or false".into());
            };
            let note = req.note.as_deref().map(note_for_log).unwrap_or_default();
            let (mut marked, mut failed) = (Vec::new(), Vec::new());
            for &id in &ids {
                match dlq.mark_reprocessed(id, success) {
                    Ok(()) => marked.push(id),
                    Err(e) => failed.push((id, e.to_string())),
                }
            }
            let summary = format!(
                "marked {} of {} ({selection}) in {dlq_name} reprocessed {}, {} refused; note: {note:?}",
                marked.len(),
                ids.len(),
                if success { "ok" } else { "failed" },
                failed.len()
            );
            let reply = Reply::json(
                200,
                &json!({ "marked": marked, "failed": failed_json(&failed) }),
            );
            (reply, summary)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actions_and_their_fields() {
        assert_eq!(Action::of_path("/api/mark"), Some(Action::Mark));
        assert_eq!(Action::of_path("/api/other"), None);
        let req: ChangeRequest =
            serde_json::from_str(r#"{"dlq": "d", "ids": [1], "success": true}"#).unwrap();
        assert!(req.stray_field(Action::Mark).is_none());
        assert!(req.stray_field(Action::Delete).is_some());
        assert!(req.stray_field(Action::Replay).is_some());
        assert_eq!(note_for_log("a\nb"), "a b");
    }
}
