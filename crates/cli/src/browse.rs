//! Commands that read without changing anything: `stats`, `list`, `show`, `analyze`.

use deadletter::dlq::{Analysis, DeadLetter, EntryStatus};
use deadletter::queue::MessageId;
use deadletter::DeadLetterQueue;
use deadletter::Page;
use deadletter_dashboard::export::{envelope_to_json, status_name, PayloadEncoding};
use deadletter_dashboard::time::format_utc;
use deadletter_dashboard::{api, Source};
use serde_json::{json, Value};

use crate::cli::{AnalyzeArgs, ListArgs, ShowArgs, StatsArgs};
use crate::error::CliError;
use crate::kinds;
use crate::output::{clip, hex_dump, payload_preview, print, print_json, terminal_width, Table};
use crate::pools::Observed;
use crate::store_access::{self, select_dlqs};
use crate::timefmt::{fmt_age, fmt_opt_time};

pub fn stats(args: &StatsArgs, json: bool) -> Result<(), CliError> {
    let store = store_access::open_read(&args.dir)?;
    // The pools attached and the rates, from the owner when one answers.
    stats_on(&Observed::ask(store, &args.dir), json)
}

/// `stats` on any source of queues and DLQs (a store, a JetStream namespace).
pub fn stats_on<S: Source>(store: &S, json: bool) -> Result<(), CliError> {
    if json {
        // The same document as the dashboard's `/api/stats`.
        return print_json(&api::stats_json(store)?);
    }
    let metrics = store.metrics()?;
    if metrics.queues.is_empty() {
        return print("no queues yet\n");
    }
    let mut t = Table::new(&[
        "QUEUE",
        ">READY",
        ">IN FLIGHT",
        ">ENQUEUED",
        ">ACKED",
        ">RETRIED",
        ">DEAD-LETTERED",
        ">EXPIRED",
        ">OLDEST WAITING",
        "DLQ",
        ">SIZE",
        ">PENDING",
        ">OLDEST ENTRY",
    ]);
    let mut kinds = Table::new(&["DLQ", "ERROR KIND", ">ENTRIES"]);
    // On a narrow terminal, the queues and their DLQs in two tables.
    let mut queues = Table::new(&[
        "QUEUE",
        ">READY",
        ">IN FLIGHT",
        ">ENQUEUED",
        ">ACKED",
        ">RETRIED",
        ">DEAD-LETTERED",
        ">EXPIRED",
        ">OLDEST WAITING",
    ]);
    let mut dlqs = Table::new(&["DLQ", "QUEUE", ">SIZE", ">PENDING", ">OLDEST ENTRY"]);
    for q in &metrics.queues {
        let d = store.dlq(&q.dlq)?.stats()?;
        queues.row(vec![
            q.queue.clone(),
            q.depth.to_string(),
            q.in_flight.to_string(),
            q.enqueued.to_string(),
            q.acked.to_string(),
            q.retried.to_string(),
            q.dead_lettered.to_string(),
            q.expired.to_string(),
            fmt_age(q.oldest_message_age_ms),
        ]);
        dlqs.row(vec![
            q.dlq.clone(),
            q.queue.clone(),
            q.dlq_size.to_string(),
            d.pending.to_string(),
            fmt_age(q.dlq_oldest_age_ms),
        ]);
        t.row(vec![
            q.queue.clone(),
            q.depth.to_string(),
            q.in_flight.to_string(),
            q.enqueued.to_string(),
            q.acked.to_string(),
            q.retried.to_string(),
            q.dead_lettered.to_string(),
            q.expired.to_string(),
            fmt_age(q.oldest_message_age_ms),
            q.dlq.clone(),
            q.dlq_size.to_string(),
            d.pending.to_string(),
            fmt_age(q.dlq_oldest_age_ms),
        ]);
        for (kind, n) in &d.by_error_kind {
            kinds.row(vec![q.dlq.clone(), kind.clone(), n.to_string()]);
        }
    }
    let width = terminal_width();
    let mut text = if width.is_none_or(|w| t.natural_width() <= w) {
        t.render_width(width)
    } else {
        format!(
            "{}\n{}",
            queues.render_width(width),
            dlqs.render_width(width)
        )
    };
    if !kinds.is_empty() {
        text.push('\n');
        text.push_str(&kinds.render());
    }
    let activity: Vec<String> = metrics.queues.iter().filter_map(activity_line).collect();
    if !activity.is_empty() {
        text.push('\n');
        text.push_str(&activity.join(""));
    }
    print(&text)
}

/// A queue's attached pools and last-minute rates in one line, where they are known
/// (`deadletter workers` has the details).
fn activity_line(q: &deadletter::metrics::QueueMetrics) -> Option<String> {
    let (pools, rates) = (q.pools.as_ref()?, q.rates?);
    let m = rates.last_minute;
    let consumers = match pools.len() {
        0 => "no pool attached".to_string(),
        n => format!(
            "{n} pool{} ({} workers, {} running)",
            if n == 1 { "" } else { "s" },
            pools.iter().map(|p| p.workers).sum::<u64>(),
            pools.iter().map(|p| p.in_flight).sum::<u64>()
        ),
    };
    Some(format!(
        "{}: {consumers}; last minute {:.1} enqueued/s, {:.1} acked/s, {:.1} failed/s\n",
        q.queue,
        m.per_second(m.enqueued),
        m.per_second(m.acked),
        m.per_second(m.failed())
    ))
}

pub fn list(args: &ListArgs, json: bool) -> Result<(), CliError> {
    let store = store_access::open_read(&args.dir)?;
    list_on(&store, args, json)
}

/// `list` on any source of queues and DLQs (a store, a JetStream namespace).
pub fn list_on<S: Source>(store: &S, args: &ListArgs, json: bool) -> Result<(), CliError> {
    let dlqs = select_dlqs(store, args.sel.queue.as_deref())?;
    let filter = args.sel.filter();
    let limit = args.limit as usize;
    // The cursor is an entry id: start in the DLQ that holds it, just after it.
    let mut start = 0;
    if let Some(after) = args.after {
        start = dlqs
            .iter()
            .position(|d| d.get(after).is_ok())
            .ok_or_else(|| {
                CliError::Input(format!(
                    "cursor {after} is not an entry of the DLQs listed (it may have been \
                     replayed or deleted since); list again without --after"
                ))
            })?;
    }
    let mut entries: Vec<DeadLetter> = Vec::new();
    for (i, dlq) in dlqs.iter().enumerate().skip(start) {
        let want = limit + 1 - entries.len();
        let mut page = Page::first(want);
        page.after = if i == start { args.after } else { None };
        entries.extend(dlq.list(&filter, page)?);
        if entries.len() > limit {
            break;
        }
    }
    let more = entries.len() > limit;
    entries.truncate(limit);
    let next = if more {
        entries.last().map(DeadLetter::id)
    } else {
        None
    };
    // Nothing matched: a --error-kind that differs only in case from a kind held says so.
    let hint = match entries.is_empty() {
        true => kinds::hint(args.sel.error_kind.as_deref(), &dlqs)?,
        false => None,
    };
    if json {
        let list: Vec<Value> = entries
            .iter()
            .map(|e| envelope_to_json(e, PayloadEncoding::Base64, true))
            .collect();
        let mut doc = json!({ "entries": list, "next_cursor": next });
        if let Some(h) = &hint {
            doc["error_kind_hint"] = h.to_json();
        }
        return print_json(&doc);
    }
    match hint {
        Some(h) => print(&format!("no matching DLQ entries: {}\n", h.sentence())),
        None => print(&render_list(&entries, next)),
    }
}

/// The table of a page of entries, and where the next page starts.
pub fn render_list(entries: &[DeadLetter], next: Option<MessageId>) -> String {
    if entries.is_empty() {
        return "no matching DLQ entries\n".into();
    }
    let mut t = Table::new(&[
        ">ID",
        "DLQ",
        "DEAD-LETTERED",
        "ERROR KIND",
        ">ATTEMPTS",
        "STATUS",
        "MESSAGE",
        "PAYLOAD",
    ]);
    for e in entries {
        t.row(vec![
            e.id().to_string(),
            e.dlq_name.clone(),
            format_utc(e.dlq.dead_lettered_at_ms),
            clip(&e.failure.error_kind, 24),
            e.metadata.delivery_count.to_string(),
            status_name(&e.status).into(),
            clip(&e.failure.error_message, 40),
            payload_preview(&e.payload, 32),
        ]);
    }
    let mut text = t.render();
    match next {
        Some(id) => text.push_str(&format!(
            "\n{} entries shown; next page: --after {id}\n",
            entries.len()
        )),
        None => text.push_str(&format!("\n{} entries\n", entries.len())),
    }
    text
}

pub fn show(args: &ShowArgs, json: bool) -> Result<(), CliError> {
    let store = store_access::open_read(&args.dir)?;
    show_on(&store, args, json)
}

/// `show` on any source of queues and DLQs (a store, a JetStream namespace).
pub fn show_on<S: Source>(store: &S, args: &ShowArgs, json: bool) -> Result<(), CliError> {
    let (_, e) = api::find_entry(store, args.id)?;
    if json {
        let encoding = if args.hex {
            PayloadEncoding::Hex
        } else {
            PayloadEncoding::Base64
        };
        return print_json(&envelope_to_json(&e, encoding, !args.hex));
    }
    print(&render_entry(&e, args.hex))
}

/// The human view of one envelope.
pub fn render_entry(e: &DeadLetter, force_hex: bool) -> String {
    let mut out = format!(
        "Entry {} in {} ({})\n\n",
        e.id(),
        e.dlq_name,
        status_name(&e.status)
    );
    let mut fields = Table::new(&["FIELD", "VALUE"]);
    let mut add = |k: &str, v: String| fields.row(vec![k.to_string(), v]);
    add("queue", e.metadata.queue.clone());
    add(
        "error",
        format!("{}: {}", e.failure.error_kind, e.failure.error_message),
    );
    if let Some(d) = &e.failure.details {
        add("details", d.clone());
    }
    if let Some(fp) = e.fingerprint {
        add("fingerprint", fp.to_string());
    }
    add("dead-lettered", format_utc(e.dlq.dead_lettered_at_ms));
    add("enqueued", format_utc(e.metadata.enqueued_at_ms));
    add(
        "first delivered",
        fmt_opt_time(e.metadata.first_received_at_ms),
    );
    add("deliveries", e.metadata.delivery_count.to_string());
    add("replays before", e.generation.to_string());
    if let EntryStatus::Reprocessed { success, at_ms } = e.status {
        add(
            "reprocessed",
            format!(
                "{} at {}",
                if success { "ok" } else { "failed" },
                format_utc(at_ms)
            ),
        );
    }
    if let Some(w) = &e.dlq.worker {
        add("worker", w.clone());
    }
    if let Some(env) = &e.dlq.environment {
        add("environment", env.clone());
    }
    if let Some(v) = &e.dlq.code_version {
        add("code version", v.clone());
    }
    add("retention until", fmt_opt_time(e.dlq.expires_at_ms));
    for (k, v) in &e.failure.context {
        add(&format!("context {k}"), v.clone());
    }
    for (k, v) in &e.metadata.attributes {
        add(&format!("attribute {k}"), v.clone());
    }
    for (k, v) in &e.dlq.tags {
        add(&format!("tag {k}"), v.clone());
    }
    out.push_str(&fields.render());
    if let Some(trace) = &e.failure.stack_trace {
        out.push_str("\nStack trace:\n");
        out.push_str(trace);
        out.push('\n');
    }
    out.push_str(&format!(
        "\nAttempts ({} kept, {} older dropped)\n",
        e.failure.attempts.len(),
        e.failure.attempts_dropped
    ));
    if !e.failure.attempts.is_empty() {
        let mut t = Table::new(&[">#", "AT", "ERROR KIND", "MESSAGE", ">DURATION", "WORKER"]);
        for a in &e.failure.attempts {
            t.row(vec![
                a.number.to_string(),
                format_utc(a.at_ms),
                a.error_kind.clone(),
                clip(&a.error_message, 60),
                format!("{} ms", a.duration_ms),
                a.worker.clone().unwrap_or_default(),
            ]);
        }
        out.push_str(&t.render());
    }
    out.push_str(&payload_block("Payload", &e.payload, force_hex));
    if let Some(old) = &e.replaced_payload {
        out.push_str(&payload_block(
            "Payload before a corrected replay",
            old,
            force_hex,
        ));
    }
    out
}

fn payload_block(title: &str, bytes: &[u8], force_hex: bool) -> String {
    match std::str::from_utf8(bytes) {
        Ok(text) if !force_hex => {
            format!("\n{title} ({} bytes, UTF-8 text):\n{text}\n", bytes.len())
        }
        _ => format!(
            "\n{title} ({} bytes, hex):\n{}",
            bytes.len(),
            hex_dump(bytes)
        ),
    }
}

pub fn analyze(args: &AnalyzeArgs, json: bool) -> Result<(), CliError> {
    let store = store_access::open_read(&args.dir)?;
    analyze_on(&store, args, json)
}

/// `analyze` on any source of queues and DLQs (a store, a JetStream namespace).
pub fn analyze_on<S: Source>(store: &S, args: &AnalyzeArgs, json: bool) -> Result<(), CliError> {
    let dlqs = select_dlqs(store, args.sel.queue.as_deref())?;
    let filter = args.sel.filter();
    let mut docs = Vec::new();
    let mut text = String::new();
    for dlq in &dlqs {
        let a = dlq.analyze(&filter)?;
        let hint = match a.total {
            0 => kinds::hint(args.sel.error_kind.as_deref(), [dlq])?,
            _ => None,
        };
        if json {
            let analysis = serde_json::to_value(&a)
                .map_err(|e| CliError::Input(format!("cannot encode JSON: {e}")))?;
            let mut doc = json!({
                "dlq": dlq.name(),
                "queue": dlq.queue_name(),
                "analysis": analysis,
            });
            if let Some(h) = &hint {
                doc["error_kind_hint"] = h.to_json();
            }
            docs.push(doc);
            continue;
        }
        match hint {
            Some(h) => text.push_str(&format!(
                "{}: no matching entries: {}\n\n",
                dlq.name(),
                h.sentence()
            )),
            None => text.push_str(&render_analysis(&dlq.name(), &a)),
        }
    }
    if json {
        return print_json(&json!({ "dlqs": docs }));
    }
    if dlqs.is_empty() {
        return print("no queues yet\n");
    }
    print(text.trim_end_matches('\n'))?;
    print("\n")
}

/// Templates an analysis shows in its table (the JSON form has them all).
const TEMPLATES_SHOWN: usize = 20;

/// The human view of an analysis of DLQ `name`.
pub fn render_analysis(name: &str, a: &Analysis) -> String {
    let mut text = String::new();
    if a.total == 0 {
        return format!("{name}: no matching entries\n\n");
    }
    text.push_str(&format!(
        "{}: {} entries, {:.1} deliveries on average",
        name, a.total, a.average_attempts
    ));
    if let Some((lo, hi)) = a.time_range {
        text.push_str(&format!(
            ", dead-lettered from {} to {}",
            format_utc(lo),
            format_utc(hi)
        ));
    }
    text.push_str("\n\n");
    let mut kinds = Table::new(&["ERROR KIND", ">ENTRIES", ">SHARE"]);
    let mut by_kind: Vec<_> = a.by_error_kind.iter().collect();
    by_kind.sort_by(|x, y| y.1.cmp(x.1).then_with(|| x.0.cmp(y.0)));
    for (kind, n) in by_kind {
        kinds.row(vec![
            kind.clone(),
            n.to_string(),
            format!("{:.0}%", *n as f64 * 100.0 / a.total as f64),
        ]);
    }
    text.push_str(&kinds.render());
    if !a.fingerprints.is_empty() {
        text.push_str("\nTemplates (by failure fingerprint):\n");
        let mut t = Table::new(&["FINGERPRINT", "ERROR KIND", ">ENTRIES", "TEMPLATE"]);
        for g in a.fingerprints.iter().take(TEMPLATES_SHOWN) {
            t.row(vec![
                g.fingerprint.to_string(),
                g.error_kind.clone(),
                g.count.to_string(),
                g.template.clone(),
            ]);
        }
        text.push_str(&t.render());
        if a.fingerprints.len() > TEMPLATES_SHOWN {
            text.push_str(&format!(
                "... and {} more (--json lists them all)\n",
                a.fingerprints.len() - TEMPLATES_SHOWN
            ));
        }
    }
    let workers: Vec<_> = a.by_worker.iter().filter(|(w, _)| !w.is_empty()).collect();
    if !workers.is_empty() {
        let mut t = Table::new(&["WORKER", ">ENTRIES"]);
        for (w, n) in workers {
            t.row(vec![w.clone(), n.to_string()]);
        }
        text.push('\n');
        text.push_str(&t.render());
    }
    text.push_str("\nDead-letterings by hour of day (UTC):\n");
    let max = a.by_hour_of_day.iter().copied().max().unwrap_or(0).max(1);
    for (hour, &n) in a.by_hour_of_day.iter().enumerate() {
        if n > 0 {
            let bar = "#".repeat(((n * 40).div_ceil(max)) as usize);
            text.push_str(&format!("  {hour:02}:00  {bar} {n}\n"));
        }
    }
    if a.patterns.is_empty() {
        text.push_str("\nNo pattern (no error kind with 3 or more entries).\n");
    } else {
        text.push_str("\nPatterns (error kinds with 3 or more entries):\n");
        for p in &a.patterns {
            text.push_str(&format!(
                "  {} x{}, from {} to {}",
                p.error_kind,
                p.count,
                format_utc(p.first_ms),
                format_utc(p.last_ms)
            ));
            if !p.workers.is_empty() {
                let w: Vec<&str> = p.workers.iter().map(String::as_str).collect();
                text.push_str(&format!(", workers {}", w.join(", ")));
            }
            text.push('\n');
            for (m, n) in &p.common_messages {
                text.push_str(&format!("    message x{n}: {}\n", clip(m, 80)));
            }
            for (c, n) in &p.common_context {
                text.push_str(&format!("    context x{n}: {}\n", clip(c, 80)));
            }
        }
    }
    text.push('\n');
    text
}
