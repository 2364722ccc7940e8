//! Commands that change the store: `replay`, `delete`, `purge`, `enqueue`.
//!
//! Each selects its entries first, then changes them in batches (one log record per entry,
//! a batch sharing one fsync), drawing a progress bar on a terminal. `--dry-run` reports
//! what would change and writes nothing (not even a new target queue's declaration).

use std::io::{IsTerminal, Read};

use crate::confirm::{self, confirm};

use deadletter::queue::{EnqueueOptions, MessageId};
use deadletter::{DeadLetterQueue, Filter, MessageQueue, ReplayOptions};
use deadletter_dashboard::time::format_utc;
use deadletter_dashboard::{api, Source};
use serde_json::{json, Value};

use crate::cli::{DeleteArgs, EnqueueArgs, MarkArgs, PurgeArgs, ReplayArgs, Selection};
use crate::error::CliError;
use crate::kinds::{self, KindHint};
use crate::names::{self, Created};
use crate::output::{clip, print, print_json, Table};
use crate::progress::{Progress, Unit};
use crate::store_access::{self, select_dlqs, selected, Open, Selected, Writable};

/// Entries replayed or deleted per batch (one fsync each).
const BATCH: usize = 500;

pub fn replay(args: &ReplayArgs, json: bool) -> Result<(), CliError> {
    match store_access::open_write(&args.dir, Open::Existing, false)? {
        Writable::Local(store) => replay_on(&store, args, json),
        Writable::Owner(live) => replay_on(&live, args, json),
    }
}

/// What a replay (plain or with new payloads) takes: its target checked (or created with
/// `--create`), then the selected entries by DLQ.
pub(crate) fn replay_selection<S: Source>(
    store: &S,
    args: &ReplayArgs,
) -> Result<Vec<Selected<S::Dlq>>, CliError> {
    if let Some(to) = &args.to {
        names::target(store, to, "replay into", args.create)?;
    }
    let filter = args.sel.filter();
    selected(
        store,
        args.id,
        args.sel.queue.as_deref(),
        &filter,
        args.limit,
    )
}

/// `replay` on any source of queues and DLQs (a store, a JetStream namespace).
pub fn replay_on<S: Source>(store: &S, args: &ReplayArgs, json: bool) -> Result<(), CliError> {
    let groups = replay_selection(store, args)?;
    let total: usize = groups.iter().map(|(_, ids)| ids.len()).sum();
    if !args.dry_run {
        confirm::bulk(
            total,
            || {
                let into = match &args.to {
                    Some(to) => to.clone(),
                    None => "the queues they failed in".to_string(),
                };
                format!(
                    "replay {total} entries of {} into {into}",
                    confirm::dlqs_in_words(&names_of(&groups))
                )
            },
            args.yes,
        )?;
    }
    let mut progress = Progress::new("replaying", total as u64, Unit::Items);
    let mut moved: Vec<(MessageId, String, String)> = Vec::new();
    let mut failed: Vec<(MessageId, String)> = Vec::new();
    for (dlq, ids) in &groups {
        let target = args
            .to
            .clone()
            .unwrap_or_else(|| dlq.queue_name().to_string());
        let options = options_of(args);
        for chunk in ids.chunks(BATCH) {
            let report = dlq.replay_ids(chunk, &options)?;
            for id in report.replayed {
                moved.push((id, dlq.name(), target.clone()));
            }
            failed.extend(report.failed);
            progress.inc(chunk.len() as u64);
        }
    }
    progress.finish();
    let hint = empty_selection_hint(&args.sel, total, &groups)?;
    if json {
        let replayed: Vec<Value> = moved
            .iter()
            .map(|(id, from, to)| json!({ "id": id, "from": from, "to": to }))
            .collect();
        let refused: Vec<Value> = failed
            .iter()
            .map(|(id, reason)| json!({ "id": id, "reason": reason }))
            .collect();
        let mut doc = json!({
            "dry_run": args.dry_run,
            "reset_attempts": args.reset_attempts,
            "replayed": replayed,
            "failed": refused,
        });
        if let Some(h) = &hint {
            doc["error_kind_hint"] = h.to_json();
        }
        print_json(&doc)?;
    } else {
        let mut text = String::new();
        if args.dry_run && !moved.is_empty() {
            let mut t = Table::new(&[">ID", "FROM", "TO", "ERROR KIND", ">ATTEMPTS", "MESSAGE"]);
            for (id, from, to) in &moved {
                let (kind, attempts, message) = match api::find_entry(store, *id) {
                    Ok((_, e)) => (
                        e.failure.error_kind,
                        e.metadata.delivery_count.to_string(),
                        e.failure.error_message,
                    ),
                    Err(_) => (String::new(), String::new(), String::new()),
                };
                t.row(vec![
                    id.to_string(),
                    from.clone(),
                    to.clone(),
                    kind,
                    attempts,
                    clip(&message, 40),
                ]);
            }
            text.push_str(&t.render());
            text.push('\n');
        }
        let verb = if args.dry_run {
            "would replay"
        } else {
            "replayed"
        };
        let targets = targets_of(&moved);
        text.push_str(&format!(
            "{verb} {} of {total} selected entr{}",
            moved.len(),
            if total == 1 { "y" } else { "ies" }
        ));
        if !targets.is_empty() {
            text.push_str(&format!(" to {}", targets.join(", ")));
        }
        if args.reset_attempts {
            text.push_str(" (attempts reset)");
        }
        text.push('\n');
        if let Some(h) = &hint {
            text.push_str(&format!("{}\n", h.sentence()));
        }
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

/// The library's options for the replay `args` ask for. A dry run leaves the target out:
/// it must not declare a new target queue.
pub(crate) fn options_of(args: &ReplayArgs) -> ReplayOptions {
    let mut options = ReplayOptions::to_origin();
    options.target = if args.dry_run { None } else { args.to.clone() };
    options.reset_attempts = args.reset_attempts;
    options.force = args.force;
    options.dry_run = args.dry_run;
    options
}

/// The queues entries were replayed to (`moved`: id, DLQ, queue), each once, sorted.
pub(crate) fn targets_of(moved: &[(MessageId, String, String)]) -> Vec<&str> {
    let mut targets: Vec<&str> = moved.iter().map(|(_, _, to)| to.as_str()).collect();
    targets.sort_unstable();
    targets.dedup();
    targets
}

/// When a selection came out empty (`total` is 0) and its `--error-kind` differs only in
/// case from a kind a selected DLQ holds, what to say about it.
pub(crate) fn empty_selection_hint<D: DeadLetterQueue>(
    sel: &Selection,
    total: usize,
    groups: &[(D, Vec<MessageId>)],
) -> Result<Option<KindHint>, CliError> {
    if total > 0 {
        return Ok(None);
    }
    kinds::hint(sel.error_kind.as_deref(), groups.iter().map(|(d, _)| d))
}

/// The names of the DLQs with selected entries.
fn names_of<D: DeadLetterQueue>(groups: &[(D, Vec<MessageId>)]) -> Vec<String> {
    groups
        .iter()
        .filter(|(_, ids)| !ids.is_empty())
        .map(|(d, _)| d.name())
        .collect()
}

pub fn delete(args: &DeleteArgs, json: bool) -> Result<(), CliError> {
    match store_access::open_write(&args.dir, Open::Existing, false)? {
        Writable::Local(store) => delete_on(&store, args, json),
        Writable::Owner(live) => delete_on(&live, args, json),
    }
}

/// `delete` on any source of queues and DLQs (a store, a JetStream namespace).
pub fn delete_on<S: Source>(store: &S, args: &DeleteArgs, json: bool) -> Result<(), CliError> {
    let filter = args.sel.filter();
    let groups = selected(store, args.id, args.sel.queue.as_deref(), &filter, None)?;
    let total: usize = groups.iter().map(|(_, ids)| ids.len()).sum();
    if args.all && !args.dry_run && total > 0 {
        let which = match &args.sel.queue {
            Some(q) => format!("of {q}'s DLQ"),
            None => "of every DLQ".to_string(),
        };
        confirm(
            &format!("delete all {total} entries {which} for good"),
            args.yes,
        )?;
    } else if !args.dry_run {
        confirm::bulk(
            total,
            || {
                format!(
                    "delete {total} entries of {} for good",
                    confirm::dlqs_in_words(&names_of(&groups))
                )
            },
            args.yes,
        )?;
    }
    let mut progress = Progress::new("deleting", total as u64, Unit::Items);
    let mut deleted: Vec<(MessageId, String)> = Vec::new();
    for (dlq, ids) in &groups {
        if !args.dry_run {
            if args.id.is_some() {
                for &id in ids {
                    dlq.delete(id)?;
                }
            } else {
                // One record for the whole selection of this DLQ.
                dlq.delete_matching(&filter)?;
            }
        }
        deleted.extend(ids.iter().map(|&id| (id, dlq.name())));
        progress.inc(ids.len() as u64);
    }
    progress.finish();
    let hint = empty_selection_hint(&args.sel, total, &groups)?;
    if json {
        let list: Vec<Value> = deleted
            .iter()
            .map(|(id, dlq)| json!({ "id": id, "dlq": dlq }))
            .collect();
        let mut doc = json!({
            "dry_run": args.dry_run,
            "deleted": deleted.len(),
            "entries": list,
        });
        if let Some(h) = &hint {
            doc["error_kind_hint"] = h.to_json();
        }
        return print_json(&doc);
    }
    let verb = if args.dry_run {
        "would delete"
    } else {
        "deleted"
    };
    let mut text = String::new();
    if args.dry_run && !deleted.is_empty() {
        let ids: Vec<String> = deleted.iter().map(|(id, _)| id.to_string()).collect();
        text.push_str(&format!("entries: {}\n", ids.join(" ")));
    }
    text.push_str(&format!(
        "{verb} {} entr{}\n",
        deleted.len(),
        if deleted.len() == 1 { "y" } else { "ies" }
    ));
    if let Some(h) = &hint {
        text.push_str(&format!("{}\n", h.sentence()));
    }
    print(&text)
}

pub fn purge(args: &PurgeArgs, json: bool) -> Result<(), CliError> {
    match store_access::open_write(&args.dir, Open::Existing, false)? {
        Writable::Local(store) => purge_on(&store, args, json),
        Writable::Owner(live) => purge_on(&live, args, json),
    }
}

/// `purge` on any source of queues and DLQs (a store, a JetStream namespace).
pub fn purge_on<S: Source>(store: &S, args: &PurgeArgs, json: bool) -> Result<(), CliError> {
    let dlqs = select_dlqs(store, args.queue.as_deref())?;
    let now = store.now_ms();
    let cutoff = now.saturating_sub(args.older_than.as_millis() as u64);
    let mut old = Filter::all().between(None, Some(cutoff));
    old.fingerprint = args.fingerprint;
    // What would go, per DLQ: the count the question gives, and a dry run's answer.
    let mut would = Vec::with_capacity(dlqs.len());
    for dlq in &dlqs {
        let pending_old = dlq.ids(&old.clone().pending_only(), None)?.len() as u64;
        let all_old = dlq.ids(&old, None)?.len() as u64;
        let deleted = if args.include_pending {
            all_old
        } else {
            all_old - pending_old
        };
        let kept = if args.include_pending { 0 } else { pending_old };
        would.push((deleted, kept));
    }
    if !args.dry_run {
        let count: u64 = would.iter().map(|(d, _)| d).sum();
        let entries = if count == 1 { "entry" } else { "entries" };
        let what = if args.include_pending {
            entries.to_string()
        } else {
            format!("reprocessed {entries}")
        };
        let of = match args.fingerprint {
            Some(fp) => format!(" of fingerprint {fp}"),
            None => String::new(),
        };
        confirm(
            &format!(
                "delete {count} {what}{of} dead-lettered before {} for good",
                format_utc(cutoff)
            ),
            args.yes,
        )?;
    }
    let mut progress = Progress::new("purging", dlqs.len() as u64, Unit::Items);
    let mut rows = Vec::new();
    let (mut total_deleted, mut total_kept) = (0u64, 0u64);
    for (dlq, &(would_delete, kept)) in dlqs.iter().zip(&would) {
        let deleted = if args.dry_run {
            would_delete
        } else {
            match args.fingerprint {
                None => dlq.purge(args.older_than, args.include_pending)?,
                Some(fp) => dlq.purge_matching(
                    &Filter::all().fingerprint(fp),
                    args.older_than,
                    args.include_pending,
                )?,
            }
        };
        total_deleted += deleted;
        total_kept += kept;
        rows.push((dlq.name(), deleted, kept));
        progress.inc(1);
    }
    progress.finish();
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

pub fn mark(args: &MarkArgs, json: bool) -> Result<(), CliError> {
    match store_access::open_write(&args.dir, Open::Existing, false)? {
        Writable::Local(store) => mark_on(&store, args, json),
        Writable::Owner(live) => mark_on(&live, args, json),
    }
}

/// `mark-reprocessed` on any source of queues and DLQs.
pub fn mark_on<S: Source>(store: &S, args: &MarkArgs, json: bool) -> Result<(), CliError> {
    let mut marked = Vec::new();
    let mut failed = Vec::new();
    for &id in &args.ids {
        match api::find_entry(store, id).and_then(|(dlq, _)| {
            dlq.mark_reprocessed(id, args.ok)?;
            Ok(dlq.name())
        }) {
            Ok(dlq) => marked.push((id, dlq)),
            Err(e) => failed.push((id, e.to_string())),
        }
    }
    let outcome = if args.ok { "ok" } else { "failed" };
    if json {
        let list: Vec<Value> = marked
            .iter()
            .map(|(id, dlq)| json!({ "id": id, "dlq": dlq }))
            .collect();
        let refused: Vec<Value> = failed
            .iter()
            .map(|(id, reason)| json!({ "id": id, "reason": reason }))
            .collect();
        print_json(&json!({ "outcome": outcome, "marked": list, "failed": refused }))?;
    } else {
        let mut text = format!(
            "marked {} of {} entr{} reprocessed {outcome}\n",
            marked.len(),
            args.ids.len(),
            if args.ids.len() == 1 { "y" } else { "ies" }
        );
        for (id, reason) in &failed {
            text.push_str(&format!("refused {id}: {reason}\n"));
        }
        print(&text)?;
    }
    if !failed.is_empty() {
        return Err(CliError::Incomplete(format!(
            "{} of {} entries could not be marked",
            failed.len(),
            args.ids.len()
        )));
    }
    Ok(())
}

pub fn enqueue(args: &EnqueueArgs, json: bool) -> Result<(), CliError> {
    let (payload, options) = message_of(args)?;
    let (store, new_store) = store_access::open_target(&args.dir, args.create)?;
    let mut created = Created {
        store: new_store.then(|| args.dir.display().to_string()),
        queues: Vec::new(),
    };
    match store {
        Writable::Local(store) => {
            if names::target(&store, &args.queue, "enqueue to", args.create)? {
                created.queues.push(args.queue.clone());
            }
            enqueue_on(
                &store.queue(&args.queue)?,
                &payload,
                &options,
                &created,
                json,
            )
        }
        Writable::Owner(live) => {
            if names::target(&live, &args.queue, "enqueue to", args.create)? {
                created.queues.push(args.queue.clone());
            }
            let id = live.client().enqueue(&args.queue, &payload, &options)?;
            print_enqueued(id, &args.queue, payload.len(), &created, json)
        }
    }
}

/// The payload (the argument, or stdin) and options of an `enqueue`.
pub fn message_of(args: &EnqueueArgs) -> Result<(Vec<u8>, EnqueueOptions), CliError> {
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
    Ok((payload, options))
}

/// Enqueues `payload` on any backend's queue and says so, and that the queue was created
/// (`created`).
pub fn enqueue_on<Q: MessageQueue>(
    queue: &Q,
    payload: &[u8],
    options: &EnqueueOptions,
    created: &Created,
    json: bool,
) -> Result<(), CliError> {
    let id = queue.enqueue_with(payload, options)?;
    print_enqueued(id, queue.name(), payload.len(), created, json)
}

fn print_enqueued(
    id: MessageId,
    queue: &str,
    bytes: usize,
    created: &Created,
    json: bool,
) -> Result<(), CliError> {
    created.say(json);
    if json {
        return print_json(&json!({
            "id": id,
            "queue": queue,
            "bytes": bytes,
            "created": created.to_json(),
        }));
    }
    print(&format!(
        "enqueued message {id} ({bytes} bytes) to {queue}\n"
    ))
}
