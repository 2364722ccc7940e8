//! The commands on a JetStream namespace: `deadletter COMMAND nats://HOST:PORT/NAMESPACE`
//! (the namespace defaults to `deadletter` when the URL has no path).
//!
//! stats, list, show, analyze, replay, delete, purge, export and enqueue work as on a
//! store directory, through the backend traits (`MessageQueue`, `DeadLetterQueue`) that
//! `deadletter-jetstream` implements; their output (tables, JSON, the export format) is
//! the same. `import` and `verify` are about a store directory's records and files, and
//! `serve` serves a store directory's dashboard: on a namespace they say so.

use std::io::{BufWriter, IsTerminal, Read, Write};

use deadletter::{
    DeadLetter, DeadLetterQueue, EnqueueOptions, Filter, MessageId, MessageQueue, Page,
    ReplayOptions,
};
use deadletter_dashboard::export::{envelope_to_json, envelope_to_line, PayloadEncoding};
use deadletter_dashboard::time::format_utc;
use deadletter_jetstream::{JetStream, JetStreamDlq, JetStreamOptions};
use serde_json::{json, Value};

use crate::browse::{render_analysis, render_entry, render_list};
use crate::cli::{
    AnalyzeArgs, Command, DeleteArgs, EnqueueArgs, ExportArgs, ListArgs, PurgeArgs, ReplayArgs,
    ShowArgs,
};
use crate::error::CliError;
use crate::output::{print, print_json, Table};
use crate::timefmt::fmt_age;

/// `serde_json::to_value`, its (impossible for these types) error as a `CliError`.
macro_rules! to_json {
    ($value:expr) => {
        serde_json::to_value($value)
            .map_err(|e| CliError::Input(format!("cannot encode JSON: {e}")))?
    };
}

/// The namespace used when the URL names none.
pub const DEFAULT_NAMESPACE: &str = "deadletter";

/// A `nats://host:port[/namespace]` target, if `target` is one.
pub fn parse_target(target: &std::path::Path) -> Option<(String, String)> {
    let s = target.to_str()?;
    let rest = s.strip_prefix("nats://")?;
    let (server, namespace) = match rest.split_once('/') {
        Some((server, ns)) if !ns.trim_matches('/').is_empty() => {
            (server, ns.trim_matches('/').to_string())
        }
        Some((server, _)) => (server, DEFAULT_NAMESPACE.to_string()),
        None => (rest, DEFAULT_NAMESPACE.to_string()),
    };
    Some((format!("nats://{server}"), namespace))
}

/// Runs `command` on the namespace `namespace` of the server at `url`.
pub fn run(url: &str, namespace: &str, command: &Command, json: bool) -> Result<(), CliError> {
    let connect = || -> Result<JetStream, CliError> {
        Ok(JetStream::connect_with(
            url,
            JetStreamOptions::new(namespace),
        )?)
    };
    let target = format!("{url}/{namespace}");
    match command {
        Command::Stats(_) => stats(&connect()?, &target, json),
        Command::List(a) => list(&connect()?, a, json),
        Command::Show(a) => show(&connect()?, a, json),
        Command::Analyze(a) => analyze(&connect()?, a, json),
        Command::Replay(a) => replay(&connect()?, a, json),
        Command::Delete(a) => delete(&connect()?, a, json),
        Command::Purge(a) => purge(&connect()?, a, json),
        Command::Export(a) => export(&connect()?, a, json),
        Command::Enqueue(a) => enqueue(&connect()?, a, json),
        Command::Serve(_) => Err(CliError::Usage(format!(
            "serve runs the dashboard of a store directory; the dashboard of a JetStream \
             namespace ({target}) is not served yet: use stats, list, show and analyze"
        ))),
        Command::Import(_) => Err(CliError::Usage(format!(
            "import writes into a store directory's DLQ; {target} is a JetStream namespace \
             (export from it, import into a directory)"
        ))),
        Command::Verify(_) => Err(CliError::Usage(format!(
            "verify checks a store directory's files; {target} is a JetStream namespace, \
             whose files are the server's"
        ))),
    }
}

/// The DLQs a command works on: the one of `queue` (a queue or DLQ name), or all.
fn select(js: &JetStream, queue: Option<&str>) -> Result<Vec<JetStreamDlq>, CliError> {
    match queue {
        Some(name) => Ok(vec![js.dlq(name)?]),
        None => js
            .queue_names()?
            .iter()
            .map(|n| Ok(js.existing_queue(n)?.dlq()))
            .collect(),
    }
}

/// The DLQ holding entry `id`, with the entry.
fn find(js: &JetStream, id: MessageId) -> Result<(JetStreamDlq, DeadLetter), CliError> {
    for dlq in select(js, None)? {
        match dlq.get(id) {
            Ok(e) => return Ok((dlq, e)),
            Err(deadletter::Error::NotFound(_)) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(deadletter::Error::NotFound(id).into())
}

fn stats(js: &JetStream, target: &str, json: bool) -> Result<(), CliError> {
    let names = js.queue_names()?;
    let now = deadletter::Clock::now_ms(&deadletter::SystemClock);
    let mut rows = Vec::new();
    for name in &names {
        let q = js.existing_queue(name)?;
        rows.push((q.stats()?, q.dlq().stats()?));
    }
    if json {
        let mut queues: Vec<Value> = Vec::new();
        for (q, d) in &rows {
            let mut v = to_json!(q);
            if let Value::Object(map) = &mut v {
                map.insert("dlq_stats".into(), to_json!(d));
            }
            queues.push(v);
        }
        return print_json(&json!({ "nats": target, "at_ms": now, "queues": queues }));
    }
    if rows.is_empty() {
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
    for (q, d) in &rows {
        t.row(vec![
            q.name.clone(),
            q.ready.to_string(),
            q.in_flight.to_string(),
            q.enqueued.to_string(),
            q.acked.to_string(),
            q.retried.to_string(),
            q.dead_lettered.to_string(),
            q.expired.to_string(),
            fmt_age(q.oldest_ready_at_ms.map(|t| now.saturating_sub(t))),
            q.dlq_name.clone(),
            d.total.to_string(),
            d.pending.to_string(),
            fmt_age(d.oldest_age_ms),
        ]);
        for (kind, n) in &d.by_error_kind {
            kinds.row(vec![q.dlq_name.clone(), kind.clone(), n.to_string()]);
        }
    }
    let mut text = t.render();
    if !kinds.is_empty() {
        text.push('\n');
        text.push_str(&kinds.render());
    }
    print(&text)
}

fn list(js: &JetStream, args: &ListArgs, json: bool) -> Result<(), CliError> {
    let dlqs = select(js, args.sel.queue.as_deref())?;
    let filter = args.sel.filter();
    let limit = args.limit as usize;
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
        let mut page = Page::first(limit + 1 - entries.len());
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
    if json {
        let list: Vec<Value> = entries
            .iter()
            .map(|e| envelope_to_json(e, PayloadEncoding::Base64, true))
            .collect();
        return print_json(&json!({ "entries": list, "next_cursor": next }));
    }
    print(&render_list(&entries, next))
}

fn show(js: &JetStream, args: &ShowArgs, json: bool) -> Result<(), CliError> {
    let (_, e) = find(js, args.id)?;
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

fn analyze(js: &JetStream, args: &AnalyzeArgs, json: bool) -> Result<(), CliError> {
    let dlqs = select(js, args.sel.queue.as_deref())?;
    let filter = args.sel.filter();
    let mut docs = Vec::new();
    let mut text = String::new();
    for dlq in &dlqs {
        let a = dlq.analyze(&filter)?;
        if json {
            docs.push(json!({
                "dlq": dlq.name(),
                "queue": dlq.queue_name(),
                "analysis": to_json!(&a),
            }));
        } else {
            text.push_str(&render_analysis(&dlq.name(), &a));
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

/// The entries a replay or delete works on, per DLQ.
fn selected(
    js: &JetStream,
    id: Option<MessageId>,
    queue: Option<&str>,
    filter: &Filter,
    limit: Option<usize>,
) -> Result<Vec<(JetStreamDlq, Vec<MessageId>)>, CliError> {
    if let Some(id) = id {
        let (dlq, _) = find(js, id)?;
        if let Some(q) = queue {
            let wanted = js.dlq(q)?;
            if wanted.name() != dlq.name() {
                return Err(CliError::Input(format!(
                    "entry {id} is in {}, not in {}",
                    dlq.name(),
                    wanted.name()
                )));
            }
        }
        return Ok(vec![(dlq, vec![id])]);
    }
    let mut out = Vec::new();
    let mut left = limit.unwrap_or(usize::MAX);
    for dlq in select(js, queue)? {
        if left == 0 {
            break;
        }
        let ids = dlq.ids(filter, Some(left))?;
        left -= ids.len();
        out.push((dlq, ids));
    }
    Ok(out)
}

fn replay(js: &JetStream, args: &ReplayArgs, json: bool) -> Result<(), CliError> {
    let filter = args.sel.filter();
    let groups = selected(js, args.id, args.sel.queue.as_deref(), &filter, args.limit)?;
    let total: usize = groups.iter().map(|(_, ids)| ids.len()).sum();
    let mut moved: Vec<(MessageId, String, String)> = Vec::new();
    let mut failed: Vec<(MessageId, String)> = Vec::new();
    for (dlq, ids) in &groups {
        let target = args
            .to
            .clone()
            .unwrap_or_else(|| dlq.queue_name().to_string());
        let mut options = ReplayOptions::to_origin();
        options.target = args.to.clone();
        options.reset_attempts = args.reset_attempts;
        options.force = args.force;
        options.dry_run = args.dry_run;
        let report = dlq.replay_ids(ids, &options)?;
        moved.extend(
            report
                .replayed
                .into_iter()
                .map(|id| (id, dlq.name(), target.clone())),
        );
        failed.extend(report.failed);
    }
    if json {
        let replayed: Vec<Value> = moved
            .iter()
            .map(|(id, from, to)| json!({ "id": id, "from": from, "to": to }))
            .collect();
        let refused: Vec<Value> = failed
            .iter()
            .map(|(id, reason)| json!({ "id": id, "reason": reason }))
            .collect();
        print_json(&json!({
            "dry_run": args.dry_run,
            "reset_attempts": args.reset_attempts,
            "replayed": replayed,
            "failed": refused,
        }))?;
    } else {
        let verb = if args.dry_run {
            "would replay"
        } else {
            "replayed"
        };
        let mut text = format!(
            "{verb} {} of {total} selected entr{}",
            moved.len(),
            if total == 1 { "y" } else { "ies" }
        );
        let mut targets: Vec<&str> = moved.iter().map(|(_, _, to)| to.as_str()).collect();
        targets.sort_unstable();
        targets.dedup();
        if !targets.is_empty() {
            text.push_str(&format!(" to {}", targets.join(", ")));
        }
        if args.reset_attempts {
            text.push_str(" (attempts reset)");
        }
        text.push('\n');
        for (id, reason) in &failed {
            text.push_str(&format!("refused {id}: {reason}\n"));
        }
        if args.dry_run {
            text.push_str("dry run: nothing was changed\n");
        }
        print(&text)?;
    }
    if !failed.is_empty() {
        return Err(CliError::Incomplete(format!(
            "{} of {total} entries could not be replayed",
            failed.len()
        )));
    }
    Ok(())
}

fn delete(js: &JetStream, args: &DeleteArgs, json: bool) -> Result<(), CliError> {
    let filter = args.sel.filter();
    let groups = selected(js, args.id, args.sel.queue.as_deref(), &filter, None)?;
    let mut deleted: Vec<(MessageId, String)> = Vec::new();
    for (dlq, ids) in &groups {
        if !args.dry_run {
            for &id in ids {
                dlq.delete(id)?;
            }
        }
        deleted.extend(ids.iter().map(|&id| (id, dlq.name())));
    }
    if json {
        let list: Vec<Value> = deleted
            .iter()
            .map(|(id, dlq)| json!({ "id": id, "dlq": dlq }))
            .collect();
        return print_json(&json!({
            "dry_run": args.dry_run,
            "deleted": deleted.len(),
            "entries": list,
        }));
    }
    let verb = if args.dry_run {
        "would delete"
    } else {
        "deleted"
    };
    print(&format!(
        "{verb} {} entr{}\n",
        deleted.len(),
        if deleted.len() == 1 { "y" } else { "ies" }
    ))
}

fn purge(js: &JetStream, args: &PurgeArgs, json: bool) -> Result<(), CliError> {
    let dlqs = select(js, args.queue.as_deref())?;
    let now = deadletter::Clock::now_ms(&deadletter::SystemClock);
    let cutoff = now.saturating_sub(args.older_than.as_millis() as u64);
    let old = Filter::all().between(None, Some(cutoff));
    let mut rows = Vec::new();
    let (mut total_deleted, mut total_kept) = (0u64, 0u64);
    for dlq in &dlqs {
        let pending_old = dlq.ids(&old.clone().pending_only(), None)?.len() as u64;
        let deleted = if args.dry_run {
            let all_old = dlq.ids(&old, None)?.len() as u64;
            if args.include_pending {
                all_old
            } else {
                all_old - pending_old
            }
        } else {
            dlq.purge(args.older_than, args.include_pending)?
        };
        let kept = if args.include_pending { 0 } else { pending_old };
        total_deleted += deleted;
        total_kept += kept;
        rows.push((dlq.name(), deleted, kept));
    }
    if json {
        let list: Vec<Value> = rows
            .iter()
            .map(|(name, d, k)| json!({ "dlq": name, "deleted": d, "kept_pending": k }))
            .collect();
        return print_json(&json!({
            "dry_run": args.dry_run,
            "cutoff_ms": cutoff,
            "deleted": total_deleted,
            "kept_pending": total_kept,
            "dlqs": list,
        }));
    }
    let mut t = Table::new(&["DLQ", ">DELETED", ">PENDING KEPT"]);
    for (name, d, k) in &rows {
        t.row(vec![name.clone(), d.to_string(), k.to_string()]);
    }
    let mut text = t.render();
    text.push_str(&format!(
        "\n{} {total_deleted} entries dead-lettered before {}",
        if args.dry_run {
            "would delete"
        } else {
            "deleted"
        },
        format_utc(cutoff)
    ));
    if total_kept > 0 {
        text.push_str(&format!(
            "; kept {total_kept} pending (add --include-pending to delete them too)"
        ));
    }
    text.push('\n');
    print(&text)
}

fn export(js: &JetStream, args: &ExportArgs, json: bool) -> Result<(), CliError> {
    let filter = args.sel.filter();
    let mut entries = Vec::new();
    for dlq in select(js, args.sel.queue.as_deref())? {
        entries.extend(dlq.list(&filter, Page::first(usize::MAX))?);
    }
    let lines: String = entries.iter().map(|e| envelope_to_line(e) + "\n").collect();
    let out_name = match &args.out {
        Some(path) => {
            write_file_atomically(path, lines.as_bytes())?;
            path.display().to_string()
        }
        None => {
            let stdout = std::io::stdout();
            let mut out = BufWriter::new(stdout.lock());
            match out.write_all(lines.as_bytes()).and_then(|()| out.flush()) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
                Err(e) => return Err(CliError::io("write to stdout", e)),
            }
            "stdout".into()
        }
    };
    let summary = if json {
        json!({ "exported": entries.len(), "out": out_name }).to_string()
    } else {
        format!("exported {} entries to {out_name}", entries.len())
    };
    if args.out.is_some() {
        print(&(summary + "\n"))
    } else {
        eprintln!("{summary}");
        Ok(())
    }
}

/// Writes `bytes` to `path` under a temporary name, fsyncs, and renames it into place:
/// a failed export never leaves a partial file.
fn write_file_atomically(path: &std::path::Path, bytes: &[u8]) -> Result<(), CliError> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".partial");
    let tmp = std::path::PathBuf::from(tmp);
    let written = std::fs::File::create(&tmp).and_then(|mut f| {
        f.write_all(bytes)?;
        f.sync_all()
    });
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(CliError::io(format!("write {}", tmp.display()), e));
    }
    std::fs::rename(&tmp, path)
        .map_err(|e| CliError::io(format!("rename {} to {}", tmp.display(), path.display()), e))
}

fn enqueue(js: &JetStream, args: &EnqueueArgs, json: bool) -> Result<(), CliError> {
    let payload: Vec<u8> = match &args.payload {
        Some(p) => p.clone().into_bytes(),
        None => {
            let stdin = std::io::stdin();
            if stdin.is_terminal() {
                return Err(CliError::Usage(
                    "no payload: give it as an argument or pipe it on stdin".into(),
                ));
            }
            let mut buf = Vec::new();
            stdin
                .lock()
                .read_to_end(&mut buf)
                .map_err(|e| CliError::io("read stdin", e))?;
            buf
        }
    };
    let mut options = EnqueueOptions::new();
    for (k, v) in &args.attributes {
        options = options.attribute(k, v);
    }
    options.delay = args.delay;
    options.ttl = args.ttl;
    options.idempotency_key = args.idempotency_key.clone();
    let queue = js.queue(&args.queue)?;
    let id = queue.enqueue_with(&payload, &options)?;
    if json {
        return print_json(&json!({
            "id": id,
            "queue": queue.name(),
            "bytes": payload.len(),
        }));
    }
    print(&format!(
        "enqueued message {id} ({} bytes) to {}\n",
        payload.len(),
        queue.name()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets() {
        let p = |s: &str| parse_target(std::path::Path::new(s));
        assert_eq!(
            p("nats://127.0.0.1:4222/shop"),
            Some(("nats://127.0.0.1:4222".into(), "shop".into()))
        );
        assert_eq!(
            p("nats://localhost:4222"),
            Some(("nats://localhost:4222".into(), DEFAULT_NAMESPACE.into()))
        );
        assert_eq!(
            p("nats://h:1/"),
            Some(("nats://h:1".into(), DEFAULT_NAMESPACE.into()))
        );
        assert_eq!(p("./data"), None);
    }
}
