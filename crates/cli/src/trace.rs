//! `trace`: the whole life of one message (`Store::history`), on a read-only snapshot, so
//! it works while another process holds the store: enqueue, failed deliveries, each
//! dead-lettering, replay generation and mark, and its removal, with who did what where
//! the store knows it.

use deadletter::audit::{HistoryEvent, MessageHistory, MessageState};
use deadletter_dashboard::time::format_utc;

use crate::cli::TraceArgs;
use crate::error::CliError;
use crate::output::{print, print_json, Table};
use crate::store_access;

pub fn trace(args: &TraceArgs, json: bool) -> Result<(), CliError> {
    let store = store_access::open_read(&args.dir)?;
    let history = match store.history(args.id) {
        Err(deadletter::Error::NotFound(id)) => return Err(CliError::UnknownMessage(id)),
        other => other?,
    };
    if json {
        let value = serde_json::to_value(&history)
            .map_err(|e| CliError::Usage(format!("history of {} as JSON: {e}", args.id)))?;
        return print_json(&value);
    }
    print(&render(&history))
}

fn state(s: &MessageState) -> String {
    match s {
        MessageState::Queued { queue } => format!("waiting in {queue}"),
        MessageState::InFlight { queue } => format!("being handled from {queue}"),
        MessageState::InDlq { dlq } => format!("in {dlq}"),
        MessageState::Removed { how, at_ms } => match how {
            Some(how) => format!("removed ({how:?}) at {}", format_utc(*at_ms)),
            None => format!("removed at {}", format_utc(*at_ms)),
        },
        other => format!("{other:?}"),
    }
}

/// What happened, and its details, for the table.
fn describe(e: &HistoryEvent) -> (String, String) {
    match e {
        HistoryEvent::Enqueued { queue } => ("enqueued".into(), format!("into {queue}")),
        HistoryEvent::Failed {
            attempt,
            error_kind,
            message,
        } => (
            "failed".into(),
            format!("delivery {attempt}: {error_kind}: {message}"),
        ),
        HistoryEvent::DeadLettered {
            dlq,
            generation,
            attempts,
            error_kind,
            message,
            fingerprint,
            ..
        } => (
            "dead-lettered".into(),
            format!(
                "into {dlq}, generation {generation} after {attempts} deliveries: \
                 {error_kind}: {message} [{fingerprint}]"
            ),
        ),
        HistoryEvent::Imported {
            dlq,
            original_id,
            error_kind,
            message,
        } => (
            "imported".into(),
            format!("into {dlq} (was {original_id}): {error_kind}: {message}"),
        ),
        HistoryEvent::Replayed {
            from_dlq,
            to_queue,
            generation,
            corrected,
            detail,
        } => (
            "replayed".into(),
            format!(
                "from {from_dlq} to {to_queue}, generation {generation}{}{}",
                if *corrected {
                    " (corrected payload)"
                } else {
                    ""
                },
                match detail {
                    Some(detail) => format!(": {detail}"),
                    None => String::new(),
                }
            ),
        ),
        HistoryEvent::MarkedReprocessed { success } => (
            "marked".into(),
            if *success {
                "reprocessed: ok"
            } else {
                "reprocessed: failed"
            }
            .into(),
        ),
        HistoryEvent::Removed { how } => ("removed".into(), format!("{how:?}").to_lowercase()),
        HistoryEvent::Audited { action, detail } => {
            let what = match detail {
                Some(detail) => format!("{action:?}: {detail}"),
                None => format!("{action:?}"),
            };
            ("audited".into(), what)
        }
        other => ("other".into(), format!("{other:?}")),
    }
}

fn render(h: &MessageHistory) -> String {
    let mut out = format!(
        "Message {}: {}, {} replay(s)\n\n",
        h.id,
        state(&h.state),
        h.replays
    );
    if h.steps_dropped > 0 {
        out.push_str(&format!(
            "({} older step(s) no longer kept)\n",
            h.steps_dropped
        ));
    }
    let mut table = Table::new(&["TIME", "EVENT", "ACTOR", "DETAILS"]);
    for s in &h.steps {
        let (event, details) = describe(&s.event);
        let actor = s.actor.clone().unwrap_or_else(|| "-".into());
        table.row(vec![format_utc(s.at_ms), event, actor, details]);
    }
    out.push_str(&table.render());
    out
}
