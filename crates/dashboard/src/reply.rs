//! A response before it is sent (status, content type, body), and the HTTP status each
//! library error answers with: what every handler of the API returns, whichever module
//! answers the request. Also the refusal of a replay into a queue the backend does not
//! hold, shared by the plain and the guarded replay.

use deadletter::Error;

use crate::source::Source;
use crate::suggest;

/// A response: status, content type, body.
pub(crate) struct Reply {
    pub(crate) status: u16,
    pub(crate) content_type: &'static str,
    pub(crate) body: String,
}

impl Reply {
    pub(crate) fn json(status: u16, value: &serde_json::Value) -> Reply {
        Reply {
            status,
            content_type: "application/json",
            body: value.to_string(),
        }
    }

    pub(crate) fn error(status: u16, message: impl Into<String>) -> Reply {
        Reply::json(status, &serde_json::json!({ "error": message.into() }))
    }

    /// A typed error: `{"error": message, "kind": kind, ..extra}`; `extra` is an object.
    pub(crate) fn typed_error(
        status: u16,
        kind: &str,
        message: impl Into<String>,
        extra: serde_json::Value,
    ) -> Reply {
        let mut body = serde_json::json!({ "error": message.into(), "kind": kind });
        if let (Some(body), serde_json::Value::Object(extra)) = (body.as_object_mut(), extra) {
            body.extend(extra);
        }
        Reply::json(status, &body)
    }

    pub(crate) fn text(status: u16, content_type: &'static str, body: impl Into<String>) -> Reply {
        Reply {
            status,
            content_type,
            body: body.into(),
        }
    }
}

/// The status code for a library error.
pub(crate) fn status_of(e: &Error) -> u16 {
    match e {
        Error::UnknownQueue(_) | Error::NotFound(_) => 404,
        Error::InvalidQueueName { .. } | Error::TooLarge { .. } | Error::InvalidConfig(_) => 400,
        Error::UnknownGuardedReplay(_) => 404,
        Error::AlreadyReprocessed(_)
        | Error::InvalidState { .. }
        | Error::NameClash { .. }
        | Error::GuardedReplayConflict { .. } => 409,
        _ => 500,
    }
}

/// Refuses a replay into `to` when the backend holds no queue of that name (a typo would
/// otherwise create a queue nobody consumes): a 404 with kind `unknown_queue`, the name,
/// the nearest known queue (`"suggestion"`, or null) and every known queue. The message
/// and the one-line summary for the log of changes come with it.
pub(crate) fn refuse_unknown_target<S: Source>(store: &S, to: &str) -> Option<(Reply, String)> {
    let known = match store.queue_names() {
        Ok(k) => k,
        Err(e) => {
            let msg = e.to_string();
            return Some((Reply::error(status_of(&e), msg.clone()), msg));
        }
    };
    if known.iter().any(|q| q == to) {
        return None;
    }
    let suggestion = suggest::nearest(to, known.iter().map(String::as_str));
    let msg = format!(
        "there is no queue {to:?} to replay into{}; replay to an existing queue \
         (`deadletter replay --to {to} --create` creates one)",
        suggest::did_you_mean(to, known.iter().map(String::as_str))
    );
    let reply = Reply::typed_error(
        404,
        "unknown_queue",
        msg.clone(),
        serde_json::json!({ "queue": to, "suggestion": suggestion, "known": known }),
    );
    Some((reply, msg))
}
