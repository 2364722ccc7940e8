//! `replay --guarded` and the operator's view and hands on guarded replays: `--progress`,
//! `--pause`, `--resume`, `--stop`.
//!
//! A guarded replay lives in the store's log and is driven by the store that holds it. So
//! this command starts, pauses, resumes or stops one on the store it takes itself, or asks
//! the process that holds the store to (its control socket); `--progress` reads a snapshot.
//! When the command took the store itself, its process releases the canary before it
//! exits, and whoever holds the store next (the application) drives the rest.

use deadletter::replay::{GuardedReplay, GuardedReplayOptions};
use deadletter::{DeadLetterQueue, ReplayOptions};
use deadletter_dashboard::guarded::{report_json, target_queue};
use deadletter_dashboard::time::format_utc;
use deadletter_dashboard::workers::consumer_json;
use deadletter_dashboard::Source;
use serde_json::{json, Value};

use deadletter::queue::MessageId;

use crate::change::empty_selection_hint;
use crate::cli::ReplayArgs;
use crate::error::CliError;
use crate::names;
use crate::output::{print, print_json, Table};
use crate::pools::{self, Reach};
use crate::store_access::{self, selected, Open, Writable};

/// True when `args` asks for a guarded replay or its operator's view.
pub fn wanted(args: &ReplayArgs) -> bool {
    args.guarded
        || args.progress.is_some()
        || args.pause.is_some()
        || args.resume.is_some()
        || args.stop.is_some()
}

/// Runs what `args` asks of guarded replays.
pub fn run(args: &ReplayArgs, json: bool) -> Result<(), CliError> {
    if let Some(id) = args.progress {
        let store = store_access::open_read(&args.dir)?;
        let replays = match id {
            0 => store.guarded_replays(),
            id => vec![store.guarded_replay(id)?],
        };
        let consumers = Consumers::of(&store, &replays, pools::ask_owner(&args.dir), args);
        return show(&replays, &consumers, json);
    }
    let store = store_access::open_write(&args.dir, Open::Existing, false)?;
    let reports = if let Some(id) = args.pause {
        vec![step(&store, id, Step::Pause)?]
    } else if let Some(id) = args.resume {
        vec![step(&store, id, Step::Resume)?]
    } else if let Some(id) = args.stop {
        vec![step(&store, id, Step::Cancel)?]
    } else {
        start(&store, args)?
    };
    let consumers = match &store {
        // This process holds the store: no pool of another one consumes it meanwhile.
        Writable::Local(s) => Consumers::of(s, &reports, Reach::Answered(s.workers()), args),
        Writable::Owner(live) => {
            Consumers::of(live, &reports, pools::from_client(live.client()), args)
        }
    };
    show(&reports, &consumers, json)?;
    if args.guarded && matches!(store, Writable::Local(_)) && !json {
        print(
            "no process held the store: this one released what was due now; the next \
             process to open the store (your application) drives the rest\n",
        )?;
    }
    Ok(())
}

#[derive(Clone, Copy)]
enum Step {
    Pause,
    Resume,
    Cancel,
}

fn step(store: &Writable, id: u64, step: Step) -> Result<GuardedReplay, CliError> {
    Ok(match (store, step) {
        (Writable::Local(s), Step::Pause) => s.pause_guarded_replay(id)?,
        (Writable::Local(s), Step::Resume) => s.resume_guarded_replay(id)?,
        (Writable::Local(s), Step::Cancel) => s.cancel_guarded_replay(id)?,
        (Writable::Owner(l), Step::Pause) => l.client().pause_guarded_replay(id)?,
        (Writable::Owner(l), Step::Resume) => l.client().resume_guarded_replay(id)?,
        (Writable::Owner(l), Step::Cancel) => l.client().cancel_guarded_replay(id)?,
    })
}

/// The options of `args`.
fn options(args: &ReplayArgs) -> GuardedReplayOptions {
    let mut replay = ReplayOptions::to_origin();
    replay.target = args.to.clone();
    replay.reset_attempts = args.reset_attempts;
    replay.force = args.force;
    let mut o = GuardedReplayOptions::new(replay)
        .canary(args.canary)
        .growth(args.growth)
        .max_failure_ratio(args.max_failure_ratio)
        .selection(args.sel.describe());
    o.rate_per_sec = args.rate;
    o
}

/// Starts one guarded replay per DLQ with selected entries.
fn start(store: &Writable, args: &ReplayArgs) -> Result<Vec<GuardedReplay>, CliError> {
    let options = options(args);
    match store {
        Writable::Local(s) => {
            check_target(s, args)?;
            let groups = selected(
                s,
                None,
                args.sel.queue.as_deref(),
                &args.sel.filter(),
                args.limit,
            )?;
            let mut out = Vec::new();
            for (dlq, ids) in groups.iter().filter(|(_, ids)| !ids.is_empty()) {
                out.push(dlq.replay_guarded_ids(ids, &options)?);
            }
            nothing_selected(&out, args, &groups)?;
            Ok(out)
        }
        Writable::Owner(live) => {
            check_target(live, args)?;
            let groups = selected(
                live,
                None,
                args.sel.queue.as_deref(),
                &args.sel.filter(),
                args.limit,
            )?;
            let mut out = Vec::new();
            for (dlq, ids) in groups.iter().filter(|(_, ids)| !ids.is_empty()) {
                let report =
                    live.client()
                        .replay_guarded(&dlq.name(), ids, &options, args.create)?;
                out.push(report);
            }
            nothing_selected(&out, args, &groups)?;
            Ok(out)
        }
    }
}

fn check_target<S: Source>(store: &S, args: &ReplayArgs) -> Result<(), CliError> {
    if let Some(to) = &args.to {
        names::target(store, to, "replay into", args.create)?;
    }
    Ok(())
}

/// Refuses a selection that started nothing, saying why when its `--error-kind` differs
/// only in case from a kind held.
fn nothing_selected<D: DeadLetterQueue>(
    started: &[GuardedReplay],
    args: &ReplayArgs,
    groups: &[(D, Vec<MessageId>)],
) -> Result<(), CliError> {
    if started.is_empty() {
        let why = match empty_selection_hint(&args.sel, 0, groups)? {
            Some(h) => format!(" ({})", h.sentence()),
            None => String::new(),
        };
        return Err(CliError::Incomplete(format!(
            "no DLQ entry matches{why}: no guarded replay was started"
        )));
    }
    Ok(())
}

/// What the running replays' target queues have for consumers: per replay id, its
/// `consumer` JSON, and the lines saying which ones nothing consumes.
struct Consumers {
    json: Vec<(u64, Value)>,
    lines: Vec<String>,
}

impl Consumers {
    fn of<S: Source>(
        source: &S,
        replays: &[GuardedReplay],
        reach: Reach,
        args: &ReplayArgs,
    ) -> Consumers {
        let answer = reach.to_result(&args.dir);
        let json: Vec<(u64, Value)> = replays
            .iter()
            .filter(|r| r.is_active())
            .map(|r| {
                let target = target_queue(source, r);
                (r.id, consumer_json(&target, Some(&answer)))
            })
            .collect();
        let lines = json
            .iter()
            .filter_map(|(id, c)| Some(format!("{id}: {}", c["hint"].as_str()?)))
            .collect();
        Consumers { json, lines }
    }
}

/// Prints reports: a table and each one's state in words (and, for a running one whose
/// target nothing consumes, how to attach a consumer), or JSON.
fn show(replays: &[GuardedReplay], consumers: &Consumers, json: bool) -> Result<(), CliError> {
    if json {
        let all: Vec<Value> = replays
            .iter()
            .map(|r| {
                let mut v = report_json(r);
                if let Some((_, c)) = consumers.json.iter().find(|(id, _)| *id == r.id) {
                    v["consumer"] = c.clone();
                }
                v
            })
            .collect();
        return print_json(&json!({ "guarded_replays": all }));
    }
    if replays.is_empty() {
        return print("no guarded replay\n");
    }
    let mut t = Table::new(&[
        ">ID",
        "DLQ",
        "STATE",
        ">WAVE",
        ">SIZE",
        ">REPLAYED",
        ">SUCCEEDED",
        ">FAILED AGAIN",
        ">WAITING",
        ">LEFT",
        "RATE",
        "STARTED",
    ]);
    for r in replays {
        t.row(vec![
            r.id.to_string(),
            r.dlq.clone(),
            r.state.name().to_string(),
            r.wave.to_string(),
            r.wave_size.to_string(),
            r.replayed.to_string(),
            r.succeeded.to_string(),
            r.failed_again.to_string(),
            r.waiting.to_string(),
            r.left.to_string(),
            r.rate_per_sec.map_or("-".into(), |m| format!("{m}/s")),
            format_utc(r.started_at_ms),
        ]);
    }
    let mut text = t.render();
    text.push('\n');
    for r in replays {
        text.push_str(&format!(
            "{}: {} of {} selected ({}) by {}, canary {}, waves x{}, stops above {}% failed again{}; {}\n",
            r.id,
            r.replayed,
            r.selected,
            r.selection,
            r.started_by,
            r.canary,
            r.growth,
            r.max_failure_ratio * 100.0,
            if r.skipped > 0 {
                format!(", {} skipped (gone)", r.skipped)
            } else {
                String::new()
            },
            r.state
        ));
    }
    for line in &consumers.lines {
        text.push_str(line);
        text.push('\n');
    }
    print(&text)
}
