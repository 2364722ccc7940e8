//! A queue's own messages (not its DLQ): `messages` (a page of them by state), `message`
//! (one), and an operator's `retry-now`, `delay`, `dead-letter` and `delete-message`.
//!
//! Reads ask the store's owner through its control socket when one answers (it names the
//! pool worker holding each in-flight message, which only its memory knows), and read a
//! snapshot otherwise. Changes take the store, or ask its owner (`store_access`); a
//! selection (--all, --state, filters) is made on the store or the owner's snapshot and
//! sent as ids, so a message that changed in between (leased, acked) is reported as
//! refused, never changed twice; ids typed one by one are all changed or none. More than
//! `confirm::BULK` messages need `--yes`.

use deadletter::control::Client;
use deadletter::queue::{ActionReport, MessageAction, MessageCounts, QueuedMessage, QueuedState};
use deadletter::{Filter, Page, Store};
use deadletter_dashboard::export::PayloadEncoding;
use deadletter_dashboard::time::format_utc;
use serde_json::{json, Value};

use crate::cli::{ActionArgs, DelayArgs, MessageArgs, MessagesArgs};
use crate::confirm;
use crate::error::CliError;
use crate::output::{clip, hex_dump, payload_preview, print, print_json, Table};
use crate::store_access::{self, cli_actor, Open, Writable};
use crate::timefmt::fmt_opt_time;

/// The control protocol from which an owner lists a queue's own messages.
const QUEUE_MESSAGES_PROTOCOL: u16 = 7;

/// Where a read is made: the owner (who knows holders) or a snapshot.
enum Reader {
    Owner(Client),
    Snapshot(Store),
}

impl Reader {
    fn open(dir: &std::path::Path) -> Result<Reader, CliError> {
        store_access::check_is_store(dir)?;
        match Client::connect_as(dir, &cli_actor()) {
            // An owner too old to list a queue's messages is read on a snapshot instead.
            Ok(client) if client.protocol() >= QUEUE_MESSAGES_PROTOCOL => Ok(Reader::Owner(client)),
            _ => Ok(Reader::Snapshot(store_access::open_read(dir)?)),
        }
    }

    fn messages(
        &self,
        queue: &str,
        state: Option<QueuedState>,
        filter: &Filter,
        page: Page,
    ) -> Result<Vec<QueuedMessage>, CliError> {
        Ok(match self {
            Reader::Owner(c) => c.messages(queue, state, filter, page)?,
            Reader::Snapshot(s) => s.existing_queue(queue)?.messages(state, filter, page)?,
        })
    }

    fn counts(&self, queue: &str) -> Result<MessageCounts, CliError> {
        Ok(match self {
            Reader::Owner(c) => c.message_counts(queue)?,
            Reader::Snapshot(s) => s.existing_queue(queue)?.message_counts(),
        })
    }

    fn message(&self, queue: &str, id: u64) -> Result<QueuedMessage, CliError> {
        let found = match self {
            Reader::Owner(c) => c.message(queue, id),
            Reader::Snapshot(s) => s.existing_queue(queue).and_then(|q| q.message(id)),
        };
        found.map_err(|e| not_in(queue, e))
    }
}

/// The error of an id the store does not hold, said of a queue's messages (the library's
/// `NotFound` reads as a DLQ entry's elsewhere in this tool).
fn not_in(queue: &str, e: deadletter::Error) -> CliError {
    match e {
        deadletter::Error::NotFound(id) => CliError::Input(format!(
            "queue {queue} holds no message {id}: not found (acked, deleted or moved to its \
             DLQ since, or never enqueued)"
        )),
        e => e.into(),
    }
}

pub fn list(args: &MessagesArgs, json: bool) -> Result<(), CliError> {
    let reader = Reader::open(&args.dir)?;
    let limit = args.limit as usize;
    let mut page = Page::first(limit + 1);
    page.after = args.after;
    let state = args.sel.state.map(|s| s.state());
    let mut list = reader.messages(&args.queue, state, &args.sel.filter(), page)?;
    let more = list.len() > limit;
    list.truncate(limit);
    let next = if more {
        list.last().map(|m| m.id)
    } else {
        None
    };
    let counts = reader.counts(&args.queue)?;
    if json {
        let list: Vec<Value> = list.iter().map(message_json).collect();
        let counts: serde_json::Map<String, Value> = QueuedState::ALL
            .iter()
            .map(|s| (s.as_str().to_string(), json!(counts.of(*s))))
            .collect();
        return print_json(&json!({
            "queue": args.queue,
            "counts": counts,
            "messages": list,
            "next_cursor": next,
        }));
    }
    let mut text = render_list(&list, next);
    let in_words: Vec<String> = QueuedState::ALL
        .iter()
        .map(|s| format!("{} {}", counts.of(*s), s.as_str().replace('_', " ")))
        .collect();
    text.push_str(&format!("queue {}: {}\n", args.queue, in_words.join(", ")));
    print(&text)
}

/// The table of a page of messages, with the next page's cursor.
fn render_list(list: &[QueuedMessage], next: Option<u64>) -> String {
    if list.is_empty() {
        return "no matching messages\n".into();
    }
    let mut t = Table::new(&[
        ">ID",
        "STATE",
        ">ATTEMPTS",
        "VISIBLE / NEXT ATTEMPT",
        "LEASE UNTIL",
        "HOLDER",
        "LAST ERROR",
        "PAYLOAD",
    ]);
    for m in list {
        t.row(vec![
            m.id.to_string(),
            m.state.to_string(),
            m.attempts.to_string(),
            fmt_opt_time(m.visible_at_ms),
            fmt_opt_time(m.lease_expires_at_ms),
            m.holder.clone().unwrap_or_else(|| "-".into()),
            last_error(m).map_or_else(|| "-".into(), |e| clip(&e, 48)),
            payload_preview(&m.payload, 32),
        ]);
    }
    let mut text = t.render();
    match next {
        Some(id) => text.push_str(&format!(
            "\n{} messages shown; next page: --after {id}\n",
            list.len()
        )),
        None => text.push_str(&format!("\n{} messages\n", list.len())),
    }
    text
}

/// "Kind: message" of the last failure.
fn last_error(m: &QueuedMessage) -> Option<String> {
    m.last_failure()
        .map(|a| format!("{}: {}", a.error_kind, a.error_message))
}

/// The JSON form of a message: times in ms and as UTC text, the payload as text when it is
/// UTF-8 and always in base64.
fn message_json(m: &QueuedMessage) -> Value {
    let time = |ms: Option<u64>| ms.map(format_utc);
    let failures: Vec<Value> = m
        .failures
        .iter()
        .map(|a| {
            json!({
                "attempt": a.number,
                "at_ms": a.at_ms,
                "at": format_utc(a.at_ms),
                "error_kind": a.error_kind,
                "error_message": a.error_message,
                "worker": a.worker,
                "duration_ms": a.duration_ms,
            })
        })
        .collect();
    let next_attempt = (m.state == QueuedState::Retrying)
        .then_some(m.visible_at_ms)
        .flatten();
    json!({
        "id": m.id,
        "queue": m.queue,
        "state": m.state.as_str(),
        "attempts": m.attempts,
        "generation": m.generation,
        "enqueued_at_ms": m.enqueued_at_ms,
        "enqueued_at": format_utc(m.enqueued_at_ms),
        "visible_at_ms": m.visible_at_ms,
        "visible_at": time(m.visible_at_ms),
        "next_attempt_at_ms": next_attempt,
        "lease_expires_at_ms": m.lease_expires_at_ms,
        "lease_expires_at": time(m.lease_expires_at_ms),
        "holder": m.holder,
        "expires_at_ms": m.expires_at_ms,
        "attributes": m.attributes,
        "payload_text": std::str::from_utf8(&m.payload).ok(),
        "payload_base64": PayloadEncoding::Base64.encode(&m.payload),
        "last_error": m.last_failure().map(|a| json!({
            "error_kind": a.error_kind,
            "error_message": a.error_message,
            "at_ms": a.at_ms,
            "worker": a.worker,
        })),
        "failures": failures,
    })
}

pub fn show(args: &MessageArgs, json: bool) -> Result<(), CliError> {
    let reader = Reader::open(&args.dir)?;
    let m = reader.message(&args.queue, args.id)?;
    if json {
        return print_json(&message_json(&m));
    }
    let mut out = format!(
        "message {} of queue {}\n  state:        {}\n  attempts:     {}\n  enqueued:     {}\n",
        m.id,
        m.queue,
        m.state,
        m.attempts,
        format_utc(m.enqueued_at_ms)
    );
    let mut line = |label: &str, value: String| out.push_str(&format!("  {label:<13} {value}\n"));
    match m.state {
        QueuedState::InFlight => {
            line("lease until:", fmt_opt_time(m.lease_expires_at_ms));
            line("holder:", m.holder.clone().unwrap_or_else(|| "-".into()));
        }
        QueuedState::Retrying => line("next attempt:", fmt_opt_time(m.visible_at_ms)),
        _ => line("visible at:", fmt_opt_time(m.visible_at_ms)),
    }
    if m.generation > 0 {
        line("generation:", m.generation.to_string());
    }
    if let Some(at) = m.expires_at_ms {
        line("expires:", format_utc(at));
    }
    for (k, v) in &m.attributes {
        line("attribute:", format!("{k}={v}"));
    }
    if !m.failures.is_empty() {
        out.push_str("  failures:\n");
        for a in &m.failures {
            let worker = a
                .worker
                .as_deref()
                .map(|w| format!(" [{w}]"))
                .unwrap_or_default();
            out.push_str(&format!(
                "    #{} {} {}: {}{worker}\n",
                a.number,
                format_utc(a.at_ms),
                a.error_kind,
                a.error_message
            ));
        }
    }
    let payload = match std::str::from_utf8(&m.payload) {
        Ok(text) if !args.hex => text.to_string(),
        _ => hex_dump(&m.payload),
    };
    out.push_str(&format!(
        "  payload ({} bytes):\n{payload}\n",
        m.payload.len()
    ));
    print(&out)
}

/// An operator's action, as the command line names it.
pub enum Act {
    RetryNow,
    MoveToDlq(String),
    Delete,
    DelayUntil(u64),
}

impl Act {
    fn action(&self) -> MessageAction {
        match self {
            Act::RetryNow => MessageAction::RetryNow,
            Act::MoveToDlq(reason) => MessageAction::MoveToDlq {
                reason: reason.clone(),
            },
            Act::Delete => MessageAction::Delete,
            Act::DelayUntil(at) => MessageAction::DelayUntil(*at),
        }
    }

    fn verb(&self) -> &'static str {
        match self {
            Act::RetryNow => "retry now",
            Act::MoveToDlq(_) => "move to the DLQ",
            Act::Delete => "delete for good",
            Act::DelayUntil(_) => "delay",
        }
    }

    /// What was done, such as "retried now".
    fn done(&self) -> String {
        match self {
            Act::RetryNow => "retried now".into(),
            Act::MoveToDlq(_) => "moved to the DLQ".into(),
            Act::Delete => "deleted".into(),
            Act::DelayUntil(at) => format!("delayed until {}", format_utc(*at)),
        }
    }
}

pub fn delay(args: &DelayArgs, json: bool) -> Result<(), CliError> {
    let until = match (args.until, args.for_) {
        (Some(at), _) => at,
        (None, Some(d)) => now_ms().saturating_add(d.as_millis() as u64),
        (None, None) => return Err(CliError::Usage("delay needs --until or --for".into())),
    };
    act(&args.action, Act::DelayUntil(until), json)
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

pub fn act(args: &ActionArgs, act: Act, json: bool) -> Result<(), CliError> {
    let store = store_access::open_write(&args.dir, Open::Existing, false)?;
    let local = match &store {
        Writable::Local(s) => s,
        Writable::Owner(live) => live.snapshot(),
    };
    let queue = local.existing_queue(&args.queue)?;
    // Ids typed one by one: all of them or none. A selection: what is still there.
    let strict = !args.ids.is_empty();
    let ids = if strict {
        args.ids.clone()
    } else {
        let state = args.sel.state.map(|s| s.state());
        let mut ids = queue.message_ids(state, &args.sel.filter(), None)?;
        // Nothing in flight is selected: it is its consumer's.
        if state.is_none() {
            let in_flight = queue.message_ids(Some(QueuedState::InFlight), &Filter::all(), None)?;
            ids.retain(|id| in_flight.binary_search(id).is_err());
        }
        ids
    };
    let action = act.action();
    if !args.dry_run {
        confirm::bulk(
            ids.len(),
            || {
                format!(
                    "{} {} messages of queue {}",
                    act.verb(),
                    ids.len(),
                    args.queue
                )
            },
            args.yes,
        )?;
    }
    let report = if args.dry_run || ids.is_empty() {
        ActionReport::default()
    } else {
        let done = match &store {
            Writable::Local(s) => s
                .existing_queue(&args.queue)
                .and_then(|q| q.apply_action(&action, &ids, strict)),
            Writable::Owner(live) => {
                live.client()
                    .message_action(&args.queue, &action, &ids, strict)
            }
        };
        done.map_err(|e| not_in(&args.queue, e))?
    };
    let done: &[u64] = if args.dry_run { &ids } else { &report.applied };
    if json {
        let refused: Vec<Value> = report
            .refused
            .iter()
            .map(|(id, why)| json!({ "id": id, "reason": why }))
            .collect();
        return print_json(&json!({
            "queue": args.queue,
            "action": action.name(),
            "dry_run": args.dry_run,
            "applied": done,
            "refused": refused,
        }));
    }
    let mut out = if args.dry_run {
        format!(
            "would {} {} messages of queue {}",
            act.verb(),
            done.len(),
            args.queue
        )
    } else {
        format!(
            "{} {} messages of queue {}",
            act.done(),
            done.len(),
            args.queue
        )
    };
    out.push_str(&ids_in_words(done));
    out.push('\n');
    for (id, why) in &report.refused {
        out.push_str(&format!("  refused {id}: {why}\n"));
    }
    print(&out)
}

/// ": 1, 2, 3" (up to 20 ids), or nothing.
fn ids_in_words(ids: &[u64]) -> String {
    if ids.is_empty() {
        return String::new();
    }
    let shown: Vec<String> = ids.iter().take(20).map(u64::to_string).collect();
    let more = if ids.len() > 20 { ", ..." } else { "" };
    format!(": {}{more}", shown.join(", "))
}
