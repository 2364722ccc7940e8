//! `forward`: a store's queues and DLQs forwarded to a JetStream namespace by a
//! `deadletter_jetstream::Forwarder` in this process, with its status printed on stdout
//! every `--status-every` and at the end (one JSON object per line with `--json`).
//!
//! The process owns the store while it runs (the store's lock), so it is the only consumer
//! of the forwarded queues: it opens them with no attempt limit, and a forwarder killed
//! any number of times never sends a message to the DLQ for its restarts. Stopping it at
//! any moment (Ctrl-C, a signal, SIGKILL) loses nothing: what was not acknowledged by the
//! server is still in the store and is forwarded by the next run, the server dropping what
//! it already had (deduplication ids).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use deadletter::queue::QueueOptions;
use deadletter::Store;
use deadletter_dashboard::{self as dashboard, Dashboard, DashboardOptions};
use deadletter_jetstream::{ForwardOptions, ForwardStatus, ForwardStatusHandle, Forwarder};

use crate::cli::{self, ForwardArgs, TokenArgs};
use crate::error::CliError;
use crate::output::print;
use crate::store_access;
use crate::token;

pub fn forward(args: &ForwardArgs, json: bool) -> Result<(), CliError> {
    let Some((url, namespace)) = cli::parse_target(std::path::Path::new(&args.to)) else {
        return Err(CliError::Usage(format!(
            "--to takes nats://HOST:PORT/NAMESPACE, not {:?}",
            args.to
        )));
    };
    if args.serve.is_none() && (args.token.token.is_some() || args.token.token_file.is_some()) {
        return Err(CliError::Usage(
            "--token and --token-file are the dashboard's: they need --serve ADDR".into(),
        ));
    }
    store_access::check_is_store(&args.dir)?;
    let config = store_access::config_for(&args.dir)
        .queue_defaults(QueueOptions::default().max_attempts(u32::MAX));
    let store = Store::open(&args.dir, config)?;
    let mut options =
        ForwardOptions::new(url, namespace, &args.origin).max_in_flight(args.max_in_flight);
    for q in &args.queues {
        options = options.queue(q);
    }
    for q in &args.dlqs {
        options = options.dlq(q);
    }
    let mut forwarder = Forwarder::new(&store, options)?;
    let handle = forwarder.status_handle();
    let dashboard = match args.serve {
        Some(addr) => Some(serve(&store, &handle, addr, &args.token, json)?),
        None => None,
    };
    let stop = Arc::new(AtomicBool::new(false));
    let reporter = (!args.status_every.is_zero()).then(|| {
        let (stop, every) = (Arc::clone(&stop), args.status_every);
        let handle = handle.clone();
        std::thread::spawn(move || {
            let mut waited = Duration::ZERO;
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(50));
                waited += Duration::from_millis(50);
                if waited >= every {
                    waited = Duration::ZERO;
                    // A closed stdout ends the reports, not the forwarding.
                    if print(&render(&handle.status(), json)).is_err() {
                        return;
                    }
                }
            }
        })
    });
    let never = AtomicBool::new(false);
    let result = if args.until_drained {
        forwarder.run_until_drained(&never)
    } else {
        forwarder.run(&never)
    };
    stop.store(true, Ordering::Relaxed);
    if let Some(r) = reporter {
        let _ = r.join();
    }
    if let Some(d) = dashboard {
        d.shutdown();
    }
    result?;
    print(&render(&handle.status(), json))?;
    store.close()?;
    Ok(())
}

/// Starts the store's dashboard, with the forwarder's metrics appended to `/metrics`, and
/// prints where it is (as `serve` does; a token from the environment or a file is not
/// printed).
fn serve(
    store: &Store,
    handle: &ForwardStatusHandle,
    addr: std::net::SocketAddr,
    token: &TokenArgs,
    json: bool,
) -> Result<Dashboard, CliError> {
    let (token, from) = token::resolve(token)?;
    let handle = handle.clone();
    let mut options = DashboardOptions::default()
        .bind(addr)
        .extra_metrics(move || handle.status().to_prometheus());
    if let Some(t) = &token {
        options = options.token(t);
    }
    let server = dashboard::serve(store.clone(), options).map_err(CliError::Dashboard)?;
    let shown = from.printable().then(|| server.token().to_string());
    let text = if json {
        serde_json::json!({
            "url": server.url(),
            "addr": server.local_addr().to_string(),
            "token": shown,
            "token_from": from.key(),
        })
        .to_string()
            + "\n"
    } else {
        let token = shown.unwrap_or_else(|| format!("from {}, not shown", from.describe()));
        format!(
            "dashboard on {} (token {token}), metrics on {}metrics\n",
            server.url(),
            server.url()
        )
    };
    print(&text)?;
    Ok(server)
}

/// One status report: a line of JSON, or a few lines for people.
fn render(s: &ForwardStatus, json: bool) -> String {
    if json {
        let queues: Vec<_> = s
            .queues
            .iter()
            .map(|q| {
                serde_json::json!({
                    "queue": q.queue,
                    "lag_messages": q.messages,
                    "lag_ms": q.oldest_age_ms,
                    "dlq_lag_entries": q.dlq_entries,
                    "forwarded": q.forwarded,
                })
            })
            .collect();
        return serde_json::json!({
            "origin": s.origin,
            "link": s.link.as_str(),
            "forwarded": s.forwarded,
            "forwarded_dlq": s.forwarded_dlq,
            "duplicates": s.duplicates,
            "last_forwarded_at_ms": s.last_forwarded_at_ms,
            "errors": s.errors,
            "last_error": s.last_error,
            "returned": s.returned,
            "queues": queues,
        })
        .to_string()
            + "\n";
    }
    let mut out = format!(
        "{}: link {}, forwarded {} messages and {} DLQ entries ({} duplicates dropped by the server), {} fleet DLQ replays enqueued, {} link errors{}\n",
        s.origin,
        s.link.as_str(),
        s.forwarded,
        s.forwarded_dlq,
        s.duplicates,
        s.returned,
        s.errors,
        s.last_error
            .as_ref()
            .map(|e| format!(" (last: {e})"))
            .unwrap_or_default()
    );
    for q in &s.queues {
        out.push_str(&format!(
            "  {}: {} waiting (oldest {} ms), {} DLQ entries waiting\n",
            q.queue, q.messages, q.oldest_age_ms, q.dlq_entries
        ));
    }
    out
}
