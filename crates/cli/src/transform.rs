//! `replay` with corrected payloads: `replay ID --payload-file FILE` (the file's bytes),
//! `replay ID --edit` (the payload as the user leaves it in their editor, after a diff and
//! a question), and `replay --transform EXPR` over any selection (each JSON payload passed
//! through a jq expression, [`crate::jq`]).
//!
//! All three are one replay: each selected entry goes through
//! `DeadLetterQueue::replay_transformed_ids` with a function that makes its new payload, so
//! the library reads each payload at the generation it replays, an entry whose new payload
//! cannot be made stays in the DLQ with the reason, and one whose payload does not change
//! goes back as it is. What can be refused without the store is refused first, before
//! anything is opened: an invalid expression (exit 2), a file that cannot be read, an
//! `--edit` with no editor or no terminal to ask on. `--edit` reads the entry on a
//! snapshot and takes the store only once the user has answered, so an owner process is
//! not locked out while someone edits. `--dry-run` shows each entry's diff and changes
//! nothing.

use std::collections::HashSet;
use std::path::PathBuf;

use deadletter::queue::MessageId;
use deadletter::replay::TransformReport;
use deadletter::DeadLetterQueue;
use deadletter_dashboard::export::PayloadEncoding;
use deadletter_dashboard::{api, Source};
use serde_json::{json, Value};

use crate::change::{empty_selection_hint, options_of, replay_selection, targets_of};
use crate::cli::ReplayArgs;
use crate::confirm::{self, confirm};
use crate::diff::payload_diff;
use crate::edit;
use crate::error::CliError;
use crate::jq::Jq;
use crate::output::{print, print_json};
use crate::progress::{Progress, Unit};
use crate::store_access::{self, Open, Writable};

/// Entries transformed per batch (their payloads are in memory at once; one fsync each).
const BATCH: usize = 500;

/// Where the new payloads come from.
enum Fix {
    /// `--payload-file`: this file's bytes.
    File { path: PathBuf, payload: Vec<u8> },
    /// `--edit`: the payload the user made of `original` in their editor.
    Edit { original: Vec<u8>, edited: Vec<u8> },
    /// `--transform`: each payload through this expression.
    Transform(Jq),
}

impl Fix {
    /// The new payload of an entry whose payload is `payload`.
    fn apply(&self, payload: &[u8]) -> Result<Vec<u8>, String> {
        match self {
            Fix::File { payload: new, .. } => Ok(new.clone()),
            Fix::Edit { original, edited } if original == payload => Ok(edited.clone()),
            Fix::Edit { .. } => Err(
                "its payload changed while it was being edited (it was replayed and failed \
                 again): edit it again"
                    .into(),
            ),
            Fix::Transform(jq) => jq.apply(payload).map_err(|e| e.to_string()),
        }
    }

    /// What the new payloads are, in words (the audit trail's detail, the output's).
    fn describe(&self) -> String {
        match self {
            Fix::File { path, .. } => format!("payload from file {}", path.display()),
            Fix::Edit { .. } => "edited".to_string(),
            Fix::Transform(jq) => format!("jq: {}", jq.expr()),
        }
    }

    /// The JSON form of [`Fix::describe`].
    fn to_json(&self) -> Value {
        match self {
            Fix::File { path, .. } => json!({ "payload_file": path.display().to_string() }),
            Fix::Edit { .. } => json!({ "edited": true }),
            Fix::Transform(jq) => json!({ "expression": jq.expr() }),
        }
    }
}

/// True when `args` asks for a replay with corrected payloads.
pub fn wanted(args: &ReplayArgs) -> bool {
    args.payload_file.is_some() || args.edit || args.transform.is_some()
}

/// `replay` with `--payload-file`, `--edit` or `--transform` on a store directory.
pub fn run(args: &ReplayArgs, json: bool) -> Result<(), CliError> {
    let fix = fix_of(args, json, |id| {
        let snapshot = store_access::open_read(&args.dir)?;
        let (dlq, entry) = api::find_entry(&snapshot, id)?;
        Ok((dlq.name(), entry.payload))
    })?;
    match store_access::open_write(&args.dir, Open::Existing, false)? {
        Writable::Local(store) => replay_on(&store, args, &fix, json),
        Writable::Owner(live) => replay_on(&live, args, &fix, json),
    }
}

/// The same on any other source of queues and DLQs (a JetStream namespace).
#[cfg(feature = "jetstream")]
pub fn run_on<S: Source>(source: &S, args: &ReplayArgs, json: bool) -> Result<(), CliError> {
    let fix = fix_of(args, json, |id| {
        let (dlq, entry) = api::find_entry(source, id)?;
        Ok((dlq.name(), entry.payload))
    })?;
    replay_on(source, args, &fix, json)
}

/// Where `args` take the new payloads from, refused before the store is changed: the
/// expression compiled, the file read, or the entry (its DLQ's name and payload, as `read`
/// gives them) edited, its diff shown and, unless `--yes` or `--dry-run`, the user asked.
fn fix_of(
    args: &ReplayArgs,
    json: bool,
    read: impl FnOnce(MessageId) -> Result<(String, Vec<u8>), CliError>,
) -> Result<Fix, CliError> {
    if let Some(expr) = &args.transform {
        return Ok(Fix::Transform(
            Jq::compile(expr).map_err(CliError::Expression)?,
        ));
    }
    if let Some(path) = &args.payload_file {
        let payload =
            std::fs::read(path).map_err(|e| CliError::io(format!("read {}", path.display()), e))?;
        return Ok(Fix::File {
            path: path.clone(),
            payload,
        });
    }
    let Some(id) = args.id else {
        return Err(CliError::Usage(
            "--edit replays one entry: give its ID".into(),
        ));
    };
    edit::check_can_ask(args.yes, args.dry_run)?;
    let (dlq, original) = read(id)?;
    let edited = edit::edit(id, &original)?;
    if edited == original {
        return Err(CliError::Incomplete(format!(
            "the payload of entry {id} was left as it was: nothing was replayed (`deadletter \
             replay DIR {id}` replays it unchanged)"
        )));
    }
    if !args.dry_run {
        let diff = payload_diff(id, &original, &edited);
        // Under --json, stdout is the one JSON document: the diff goes beside it.
        if json {
            eprint!("{diff}");
        } else {
            print(&diff)?;
        }
        confirm(
            &format!("replay entry {id} of {dlq} with this payload"),
            args.yes,
        )?;
    }
    Ok(Fix::Edit { original, edited })
}

/// The replay of the selected entries with the payloads `fix` makes, on any source.
fn replay_on<S: Source>(
    store: &S,
    args: &ReplayArgs,
    fix: &Fix,
    json: bool,
) -> Result<(), CliError> {
    let groups = replay_selection(store, args)?;
    let total: usize = groups.iter().map(|(_, ids)| ids.len()).sum();
    if !args.dry_run {
        confirm::bulk(
            total,
            || {
                format!(
                    "replay {total} entries with new payloads ({})",
                    fix.describe()
                )
            },
            args.yes,
        )?;
    }
    let mut options = options_of(args);
    options.detail = Some(fix.describe());
    let mut progress = Progress::new("replaying", total as u64, Unit::Items);
    let mut report = TransformReport::default();
    report.dry_run = args.dry_run;
    // Where each replayed entry came from and went.
    let mut moves: Vec<(MessageId, String, String)> = Vec::new();
    for (dlq, ids) in &groups {
        let to = args
            .to
            .clone()
            .unwrap_or_else(|| dlq.queue_name().to_string());
        for chunk in ids.chunks(BATCH) {
            let done = dlq.replay_transformed_ids(chunk, &options, |p| fix.apply(p))?;
            moves.extend(done.replayed.iter().map(|&id| (id, dlq.name(), to.clone())));
            report.extend(done);
            progress.inc(chunk.len() as u64);
        }
    }
    progress.finish();
    let hint = empty_selection_hint(&args.sel, total, &groups)?;
    if json {
        let unchanged: HashSet<MessageId> = report.unchanged.iter().copied().collect();
        let mut doc = json!({
            "dry_run": args.dry_run,
            "reset_attempts": args.reset_attempts,
            "payloads": fix.to_json(),
            "selected": total,
            "replayed": moves.iter().map(|(id, from, to)| json!({
                "id": id,
                "from": from,
                "to": to,
                "unchanged": unchanged.contains(id),
            })).collect::<Vec<_>>(),
            "transformed": report.transformed(),
            "unchanged": report.unchanged.len(),
            "failed": report.failed.iter()
                .map(|(id, reason)| json!({ "id": id, "reason": reason }))
                .collect::<Vec<_>>(),
        });
        if args.dry_run {
            doc["changes"] = report
                .payloads
                .iter()
                .map(|c| {
                    json!({
                        "id": c.id,
                        "before": payload_json(&c.before),
                        "after": payload_json(&c.after),
                    })
                })
                .collect();
        }
        if let Some(h) = &hint {
            doc["error_kind_hint"] = h.to_json();
        }
        print_json(&doc)?;
    } else {
        let mut text = String::new();
        for change in &report.payloads {
            text.push_str(&payload_diff(change.id, &change.before, &change.after));
        }
        text.push_str(&summary(args, fix, total, &report, &moves));
        if let Some(h) = &hint {
            text.push_str(&format!("{}\n", h.sentence()));
        }
        for (id, reason) in &report.failed {
            text.push_str(&format!("failed {id}: {reason} (left in the DLQ)\n"));
        }
        if args.dry_run {
            text.push_str("dry run: nothing was changed\n");
        }
        print(&text)?;
    }
    if !report.failed.is_empty() {
        return Err(CliError::Incomplete(format!(
            "{} of {total} entries could not be replayed with a new payload",
            report.failed.len()
        )));
    }
    Ok(())
}

/// "replayed 3 of 4 selected entries to orders (jq: ...): 2 transformed, 1 unchanged,
/// 1 failed", ending in a newline.
fn summary(
    args: &ReplayArgs,
    fix: &Fix,
    total: usize,
    report: &TransformReport,
    moves: &[(MessageId, String, String)],
) -> String {
    let verb = if args.dry_run {
        "would replay"
    } else {
        "replayed"
    };
    let targets = targets_of(moves);
    let mut text = format!(
        "{verb} {} of {total} selected entr{}",
        report.replayed.len(),
        if total == 1 { "y" } else { "ies" }
    );
    if !targets.is_empty() {
        text.push_str(&format!(" to {}", targets.join(", ")));
    }
    text.push_str(&format!(
        " ({}): {} transformed, {} unchanged, {} failed",
        fix.describe(),
        report.transformed(),
        report.unchanged.len(),
        report.failed.len()
    ));
    if args.reset_attempts {
        text.push_str(" (attempts reset)");
    }
    text.push('\n');
    text
}

/// A payload in JSON output: its text when it is UTF-8, and always its bytes in base64.
fn payload_json(payload: &[u8]) -> Value {
    let mut v = json!({ "base64": PayloadEncoding::Base64.encode(payload) });
    if let Ok(text) = std::str::from_utf8(payload) {
        v["text"] = Value::from(text);
    }
    v
}
