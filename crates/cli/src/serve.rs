//! `serve`: the web dashboard and `/metrics`, in this process, until it is stopped.
//!
//! Ctrl-C (SIGINT) and SIGTERM stop it cleanly: the dashboard is shut down, then the store
//! closed, and closing the store is what removes the `control.sock` it serves (the socket's
//! guard, `ControlServer`, is one of the store's services and removes its file when the
//! last handle goes). Without that, the default action of those signals would end the
//! process with the file left behind. A second signal while it stops ends it at once
//! (exit 130).

use deadletter_dashboard::{self as dashboard, Dashboard, DashboardOptions, Source};
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use crate::cli::ServeArgs;
use crate::error::CliError;
use crate::output::print;
use crate::pools;
use crate::store_access::{self, Open, Writable};
use crate::token::{self, TokenSource};
use deadletter::clock::{Clock, SystemClock};
use deadletter::metrics::Metrics;
use deadletter::pool::Workers;
use deadletter::{Error, Store};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub fn serve(args: &ServeArgs, json: bool) -> Result<(), CliError> {
    if args.read_only {
        store_access::check_is_store(&args.dir)?;
        let snapshots = Snapshots::open(&args.dir)?;
        return serve_on(snapshots, args, json);
    }
    match store_access::open_write(&args.dir, Open::Existing, true)? {
        // The dashboard's changes are recorded as made by its token's name.
        Writable::Local(store) => {
            let actor = deadletter::audit::Actor::new(args.token_name.as_str())?;
            let stopped_by = serve_until_stopped(store.with_actor(actor), args, json)?;
            // The last handle: its control socket is removed and the lock released.
            store.close()?;
            say_stopped(stopped_by, json)
        }
        Writable::Owner(_) => unreachable!("open_write for serve never asks an owner"),
    }
}

/// A store another process may hold, served from read-only snapshots: each request sees
/// a snapshot at most [`REFRESH`] old (a new one is opened when the last is older).
struct Snapshots {
    dir: PathBuf,
    current: Mutex<(Instant, Store)>,
}

/// How old a snapshot may be before a request opens a new one.
const REFRESH: Duration = Duration::from_secs(1);

impl Snapshots {
    fn open(dir: &Path) -> Result<Snapshots, CliError> {
        let store = store_access::open_read(dir)?;
        Ok(Snapshots {
            dir: dir.to_path_buf(),
            current: Mutex::new((Instant::now(), store)),
        })
    }

    /// A snapshot at most [`REFRESH`] old.
    fn store(&self) -> Result<Store, Error> {
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        if current.0.elapsed() >= REFRESH {
            let fresh = Store::open_read_only(&self.dir, store_access::config_for(&self.dir))?;
            *current = (Instant::now(), fresh);
        }
        Ok(current.1.clone())
    }
}

impl Source for Snapshots {
    type Dlq = deadletter::Dlq;
    fn describe(&self) -> String {
        format!("{} (read-only snapshots)", self.dir.display())
    }
    fn queue_names(&self) -> Result<Vec<String>, Error> {
        Ok(self.store()?.queue_names())
    }
    fn dlq(&self, name: &str) -> Result<deadletter::Dlq, Error> {
        self.store()?.dlq(name)
    }
    /// The snapshot's numbers, with the pools and rates of the owner when it answers.
    fn metrics(&self) -> Result<Metrics, Error> {
        let metrics = self.store()?.metrics_snapshot();
        Ok(pools::ask_owner(&self.dir).overlay(metrics))
    }
    fn now_ms(&self) -> u64 {
        SystemClock.now_ms()
    }
    /// Asked of the process that holds the store, through its control socket.
    fn workers(&self) -> Option<Result<Workers, Error>> {
        Some(pools::ask_owner(&self.dir).to_result(&self.dir))
    }
}

/// `serve` of any source of queues and DLQs (a store, a JetStream namespace), until
/// Ctrl-C or SIGTERM.
pub fn serve_on<S: Source>(store: S, args: &ServeArgs, json: bool) -> Result<(), CliError> {
    let stopped_by = serve_until_stopped(store, args, json)?;
    say_stopped(stopped_by, json)
}

/// Serves `store` until SIGINT or SIGTERM, then shuts the dashboard down (which drops
/// `store`); returns the signal's name.
fn serve_until_stopped<S: Source>(
    store: S,
    args: &ServeArgs,
    json: bool,
) -> Result<&'static str, CliError> {
    let (token, from) = token::resolve(&args.token)?;
    // Registered before the server starts: a signal from now on stops it cleanly.
    let mut signals =
        Signals::new([SIGINT, SIGTERM]).map_err(|e| CliError::io("wait for SIGINT", e))?;
    let what = store.describe();
    let mut options = DashboardOptions::default().bind(args.bind);
    if let Some(token) = &token {
        options = options.token(token);
    }
    let server = dashboard::serve_source(store, options).map_err(CliError::Dashboard)?;
    print(&announce(&server, &what, &from, args.read_only, json))?;
    let signal = signals.forever().next();
    // A second signal while it stops (a close that does not end) ends the process at once.
    let _ = std::thread::Builder::new()
        .name("deadletter-stop".into())
        .spawn(move || {
            if signals.forever().next().is_some() {
                eprintln!("stopping interrupted: exiting before the store is closed");
                std::process::exit(130);
            }
        });
    server.shutdown();
    Ok(match signal {
        Some(SIGTERM) => "SIGTERM",
        _ => "SIGINT",
    })
}

/// What `serve` prints once it listens: where, the token (when it may be printed and
/// someone needs it; see [`crate::token`]), and how to stop.
fn announce(
    server: &Dashboard,
    what: &str,
    from: &TokenSource,
    read_only: bool,
    json: bool,
) -> String {
    let loopback = server.local_addr().ip().is_loopback();
    // Read-only on loopback: changes are refused and reads are open, so nobody needs it.
    let needed = !(read_only && loopback);
    let shown = needed && from.printable();
    let open = if shown {
        server.url_with_token()
    } else {
        server.url()
    };
    let metrics = format!("{}metrics", server.url());
    if json {
        return serde_json::json!({
            "url": server.url(),
            "addr": server.local_addr().to_string(),
            "token": shown.then(|| server.token()),
            "token_from": from.key(),
            "read_only": read_only,
            "open": open,
            "metrics": metrics,
        })
        .to_string()
            + "\n";
    }
    let mut t = format!("deadletter dashboard for {what} on {}\n", server.url());
    if read_only {
        t.push_str("read-only: replay and delete are refused\n");
    }
    match (needed, shown) {
        (false, _) => {}
        (true, true) if read_only => {
            t += &format!("token for API reads and /metrics: {}\n", server.token());
        }
        (true, true) => t += &format!("token for replay and delete: {}\n", server.token()),
        (true, false) => t += &format!("token: from {} (not shown)\n", from.describe()),
    }
    t += &format!("open: {open}\n");
    if loopback {
        t += &format!("metrics: {metrics}\n");
    } else {
        t += &format!("metrics: {metrics} (with Authorization: Bearer TOKEN)\n");
        t.push_str(
            "warning: listening beyond loopback; API reads and /metrics need the token too, \
             and traffic is not encrypted\n",
        );
    }
    t.push_str("press Ctrl-C to stop\n");
    t
}

/// Says that `serve` stopped, and on which signal.
fn say_stopped(signal: &str, json: bool) -> Result<(), CliError> {
    if json {
        print(&(serde_json::json!({ "stopped": signal }).to_string() + "\n"))
    } else {
        print(&format!("stopped ({signal})\n"))
    }
}
