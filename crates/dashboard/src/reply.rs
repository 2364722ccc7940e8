//! A response before it is sent (status, content type, body), and the HTTP status each
//! library error answers with: what every handler of the API returns, whichever module
//! answers the request.

use deadletter::Error;

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
