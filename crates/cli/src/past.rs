//! `list --as-of TIME` and `stats --as-of TIME`: a store's DLQs as they were at a past time
//! (`Dlq::as_of`), on a read-only snapshot, so it works while another process holds the
//! store. The store keeps each past entry's failure (kind, message, fingerprint, worker,
//! deliveries, status), not its payload, tags or attributes: the list has no payload
//! column, and the grammar refuses `--grep`, `--regex`, `--attr` and `--tag` with it.
//! Only DLQs travel: the queues' own counts are not kept. A time before what the store
//! keeps is an error naming the earliest time it answers for.

use deadletter::dlq::{DlqAsOf, EntryStatus, PastDlqEntry};
use deadletter::queue::MessageId;
use deadletter::{Dlq, Page, Store};
use deadletter_dashboard::export::status_name;
use deadletter_dashboard::time::format_utc;
use serde_json::{json, Value};

use crate::cli::{ListArgs, StatsArgs};
use crate::error::CliError;
use crate::output::{clip, print, print_json, Table};
use crate::store_access::{self, select_dlqs};
use crate::timefmt::fmt_age;

/// `list --as-of`.
pub fn list(args: &ListArgs, at: u64, json: bool) -> Result<(), CliError> {
    let store = store_access::open_read(&args.dir)?;
    let dlqs = past_dlqs(&store, args.sel.queue.as_deref(), at)?;
    let filter = args.sel.filter();
    let limit = args.limit as usize;
    // The cursor is an entry id: start in the DLQ that held it then, just after it.
    let mut start = 0;
    if let Some(after) = args.after {
        start = dlqs
            .iter()
            .position(|(_, d)| d.get(after).is_some())
            .ok_or_else(|| {
                CliError::Input(format!(
                    "cursor {after} was not an entry of the DLQs listed as of {}",
                    format_utc(at)
                ))
            })?;
    }
    let mut entries: Vec<(&str, PastDlqEntry)> = Vec::new();
    for (i, (_, dlq)) in dlqs.iter().enumerate().skip(start) {
        let want = limit + 1 - entries.len();
        let mut page = Page::first(want);
        page.after = if i == start { args.after } else { None };
        let name = dlq.name();
        entries.extend(dlq.list(&filter, page)?.into_iter().map(|e| (name, e)));
        if entries.len() > limit {
            break;
        }
    }
    let more = entries.len() > limit;
    entries.truncate(limit);
    let next = if more {
        entries.last().map(|(_, e)| e.id)
    } else {
        None
    };
    if json {
        let list: Vec<Value> = entries.iter().map(|(d, e)| entry_json(d, e)).collect();
        return print_json(&json!({
            "as_of_ms": at,
            "entries": list,
            "next_cursor": next,
        }));
    }
    print(&render_list(at, &entries, next))
}

/// Every DLQ selected, as of `at`, with its queue's name.
fn past_dlqs(
    store: &Store,
    queue: Option<&str>,
    at: u64,
) -> Result<Vec<(String, DlqAsOf)>, CliError> {
    let dlqs: Vec<Dlq> = select_dlqs(store, queue)?;
    let mut out = Vec::with_capacity(dlqs.len());
    for d in &dlqs {
        out.push((d.queue_name().to_string(), d.as_of(at)?));
    }
    Ok(out)
}

/// One past entry in JSON: its fields, the status in the one spelling every output uses,
/// and its DLQ (`dlq_name`, as in `list --json`).
fn entry_json(dlq: &str, e: &PastDlqEntry) -> Value {
    let mut value =
        serde_json::to_value(e).unwrap_or_else(|err| json!({ "error": err.to_string() }));
    if let Value::Object(map) = &mut value {
        map.insert("dlq_name".into(), Value::from(dlq));
        map.insert("status".into(), Value::from(status_name(&e.status)));
        if let EntryStatus::Reprocessed { at_ms, .. } = e.status {
            map.insert("reprocessed_at_ms".into(), Value::from(at_ms));
        }
    }
    value
}

fn render_list(at: u64, entries: &[(&str, PastDlqEntry)], next: Option<MessageId>) -> String {
    let when = format_utc(at);
    if entries.is_empty() {
        return format!("no matching DLQ entries as of {when}\n");
    }
    let mut t = Table::new(&[
        ">ID",
        "DLQ",
        "DEAD-LETTERED",
        "ERROR KIND",
        ">ATTEMPTS",
        "STATUS",
        "MESSAGE",
    ]);
    for (dlq, e) in entries {
        t.row(vec![
            e.id.to_string(),
            dlq.to_string(),
            format_utc(e.dead_lettered_at_ms),
            clip(&e.error_kind, 24),
            e.attempts.to_string(),
            status_name(&e.status).into(),
            clip(&e.error_message, 60),
        ]);
    }
    let mut text = format!("As of {when}:\n\n{}", t.render());
    match next {
        Some(id) => text.push_str(&format!(
            "\n{} entries shown; next page: --as-of {at} --after {id}\n",
            entries.len()
        )),
        None => text.push_str(&format!("\n{} entries\n", entries.len())),
    }
    text
}

/// `stats --as-of`: the counts of every DLQ then.
pub fn stats(args: &StatsArgs, at: u64, json: bool) -> Result<(), CliError> {
    let store = store_access::open_read(&args.dir)?;
    let dlqs = past_dlqs(&store, None, at)?;
    if json {
        let mut docs = Vec::new();
        for (queue, dlq) in &dlqs {
            let mut value = serde_json::to_value(dlq.stats())
                .map_err(|e| CliError::Input(format!("cannot encode JSON: {e}")))?;
            if let Value::Object(map) = &mut value {
                map.insert("queue".into(), Value::from(queue.as_str()));
            }
            docs.push(value);
        }
        return print_json(&json!({
            "dir": args.dir.display().to_string(),
            "as_of_ms": at,
            "dlqs": docs,
        }));
    }
    if dlqs.is_empty() {
        return print("no queues yet\n");
    }
    let mut t = Table::new(&[
        "DLQ",
        "QUEUE",
        ">SIZE",
        ">PENDING",
        ">REPROCESSED",
        ">OLDEST ENTRY",
    ]);
    let mut kinds = Table::new(&["DLQ", "ERROR KIND", ">ENTRIES"]);
    for (queue, dlq) in &dlqs {
        let s = dlq.stats();
        t.row(vec![
            s.name.clone(),
            queue.clone(),
            s.total.to_string(),
            s.pending.to_string(),
            s.reprocessed.to_string(),
            fmt_age(s.oldest_age_ms),
        ]);
        for (kind, n) in &s.by_error_kind {
            kinds.row(vec![s.name.clone(), kind.clone(), n.to_string()]);
        }
    }
    let mut text = format!(
        "DLQs as of {} (ages then; the queues' own counts are not kept):\n\n{}",
        format_utc(at),
        t.render()
    );
    if !kinds.is_empty() {
        text.push('\n');
        text.push_str(&kinds.render());
    }
    print(&text)
}
