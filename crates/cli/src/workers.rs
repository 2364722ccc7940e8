//! `workers`: the worker pools attached to each queue of a store (workers, handlers
//! running, started, last heartbeat) and the queues' recent rates, asked of the process
//! that holds the store ([`crate::pools`]); a queue without one says "no pool attached".

use deadletter::pool::{AttachedPool, QueueWorkers, Workers};
use deadletter::queue::RateWindow;
use deadletter_dashboard::workers::workers_json;

use crate::cli::WorkersArgs;
use crate::error::CliError;
use crate::names;
use crate::output::{print, print_json, Table};
use crate::pools::{ask_owner, Reach};
use crate::store_access;
use crate::timefmt::fmt_age;

pub fn workers(args: &WorkersArgs, json: bool) -> Result<(), CliError> {
    let snapshot = store_access::open_read(&args.dir)?;
    let only = match &args.queue {
        Some(name) => Some(names::dlq(&snapshot, name)?.queue_name().to_string()),
        None => None,
    };
    let reach = ask_owner(&args.dir);
    if let Reach::Refused(e) = reach {
        return Err(e.into());
    }
    // Without an owner to ask, the queues are the snapshot's, with no pool attached.
    let workers = match reach.workers() {
        Some(w) => w.clone(),
        None => snapshot.workers(),
    };
    let queues: Vec<&QueueWorkers> = workers
        .queues
        .iter()
        .filter(|q| only.as_ref().is_none_or(|name| &q.queue == name))
        .collect();
    let note = reach.why_not().map(|why| {
        format!(
            "the pools of the process holding {} cannot be seen ({why}); without one, no pool \
             consumes its queues",
            args.dir.display()
        )
    });
    if json {
        let mut doc = workers_json(&workers, queues.iter().copied(), reach.workers().is_some());
        doc["note"] = note.into();
        return print_json(&doc);
    }
    print(&render(&workers, &queues, note.as_deref()))
}

/// Two tables: per queue its pools, workers, handlers running and rates (per second,
/// over the last minute and the last five); then each pool.
fn render(workers: &Workers, queues: &[&QueueWorkers], note: Option<&str>) -> String {
    if queues.is_empty() {
        return "no queues yet\n".into();
    }
    let live = note.is_none();
    let mut t = Table::new(&[
        "QUEUE",
        ">POOLS",
        ">WORKERS",
        ">IN FLIGHT",
        ">ENQUEUED/S 1M",
        ">5M",
        ">ACKED/S 1M",
        ">5M",
        ">FAILED/S 1M",
        ">5M",
    ]);
    let mut pools = Table::new(&[
        "QUEUE",
        "POOL",
        "KIND",
        ">WORKERS",
        ">IN FLIGHT",
        ">STARTED",
        ">HEARTBEAT",
        "PROCESS",
    ]);
    let mut idle = Vec::new();
    for q in queues {
        let rate = |w: &RateWindow, n: u64| {
            if live {
                format!("{:.1}", w.per_second(n))
            } else {
                "-".into()
            }
        };
        let (m1, m5) = (&q.rates.last_minute, &q.rates.last_5_minutes);
        let sum = |of: fn(&AttachedPool) -> u64| q.pools.iter().map(of).sum::<u64>().to_string();
        t.row(vec![
            q.queue.clone(),
            q.pools.len().to_string(),
            sum(|p| p.workers),
            sum(|p| p.in_flight),
            rate(m1, m1.enqueued),
            rate(m5, m5.enqueued),
            rate(m1, m1.acked),
            rate(m5, m5.acked),
            rate(m1, m1.failed()),
            rate(m5, m5.failed()),
        ]);
        if q.pools.is_empty() {
            idle.push(q.queue.as_str());
        }
        for p in &q.pools {
            let process = match &p.host {
                Some(host) => format!("{} on {host}", p.pid),
                None => p.pid.to_string(),
            };
            pools.row(vec![
                q.queue.clone(),
                p.name.clone().unwrap_or_else(|| format!("#{}", p.id)),
                p.kind.name().to_string(),
                p.workers.to_string(),
                p.in_flight.to_string(),
                format!(
                    "{} ago",
                    fmt_age(Some(workers.at_ms.saturating_sub(p.started_at_ms)))
                ),
                format!(
                    "{} ago",
                    fmt_age(Some(workers.at_ms.saturating_sub(p.last_heartbeat_ms)))
                ),
                process,
            ]);
        }
    }
    let mut text = t.render();
    if !pools.is_empty() {
        text.push('\n');
        text.push_str(&pools.render());
    }
    for queue in idle {
        text.push_str(&format!("{queue}: no pool attached\n"));
    }
    if let Some(note) = note {
        text.push_str(&format!("note: {note}\n"));
    }
    text
}
