//! `serve`: the web dashboard and `/metrics`, in this process, until it is stopped.

use deadletter_dashboard::{self as dashboard, DashboardOptions, Source};

use crate::cli::ServeArgs;
use crate::error::CliError;
use crate::output::print;
use crate::store_access::{self, Open, Writable};
use deadletter::clock::{Clock, SystemClock};
use deadletter::metrics::Metrics;
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
            serve_on(store.with_actor(actor), args, json)
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
    fn metrics(&self) -> Result<Metrics, Error> {
        Ok(self.store()?.metrics_snapshot())
    }
    fn now_ms(&self) -> u64 {
        SystemClock.now_ms()
    }
}

/// `serve` of any source of queues and DLQs (a store, a JetStream namespace).
pub fn serve_on<S: Source>(store: S, args: &ServeArgs, json: bool) -> Result<(), CliError> {
    let what = store.describe();
    let mut options = DashboardOptions::default().bind(args.bind);
    if let Some(token) = &args.token {
        options = options.token(token);
    }
    let server = dashboard::serve_source(store, options).map_err(CliError::Dashboard)?;
    let text = if json {
        serde_json::json!({
            "url": server.url(),
            "addr": server.local_addr().to_string(),
            "token": server.token(),
            "open": server.url_with_token(),
        })
        .to_string()
            + "\n"
    } else {
        let mut t = format!(
            "deadletter dashboard for {} on {}\n\
             token for replay and delete: {}\n\
             open: {}\n\
             metrics: {}metrics\n",
            what,
            server.url(),
            server.token(),
            server.url_with_token(),
            server.url()
        );
        if !server.local_addr().ip().is_loopback() {
            t.push_str(
                "warning: listening beyond loopback; API reads need the token too, and \
                 traffic is not encrypted\n",
            );
        }
        t.push_str("press Ctrl-C to stop\n");
        t
    };
    print(&text)?;
    server.wait();
    Ok(())
}
