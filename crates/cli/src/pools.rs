//! What the process that holds a store says of the worker pools attached to its queues and
//! of their rates, asked through its control socket (`Client::workers`): pools live in that
//! process's memory only. [`ask_owner`] never fails: it says why the owner could not be
//! asked ([`Reach`]). `stats`, `workers`, `replay --guarded` and the dashboard of
//! `serve --read-only` read pools and rates through it ([`Observed`]).

use std::path::Path;
use std::time::Duration;

use deadletter::control::Client;
use deadletter::metrics::Metrics;
use deadletter::pool::Workers;
use deadletter::Error;
use deadletter_dashboard::source::GuardedReplays;
use deadletter_dashboard::Source;

/// What asking the store's owner for its pools gave.
pub enum Reach {
    /// The owner answered.
    Answered(Workers),
    /// Nobody could be asked (no control socket, or nobody answering on it): why.
    NoOwner(String),
    /// The owner answered, but cannot tell (an older release), or failed: what it said.
    Refused(deadletter::Error),
}

impl Reach {
    /// The owner's pools and rates, if it answered.
    pub fn workers(&self) -> Option<&Workers> {
        match self {
            Reach::Answered(w) => Some(w),
            _ => None,
        }
    }

    /// The answer, or the error saying why there is none (for [`Source::workers`]).
    pub fn to_result(&self, dir: &Path) -> Result<Workers, Error> {
        match self {
            Reach::Answered(w) => Ok(w.clone()),
            Reach::NoOwner(why) => Err(Error::NoOwner {
                path: dir.to_path_buf(),
                reason: why.clone(),
            }),
            Reach::Refused(e) => Err(Error::Remote {
                kind: "Refused".into(),
                message: e.to_string(),
            }),
        }
    }

    /// `metrics` with the owner's pools and rates, when it answered.
    pub fn overlay(&self, metrics: Metrics) -> Metrics {
        match self {
            Reach::Answered(w) => metrics.with_workers(w),
            _ => metrics,
        }
    }

    /// Why there is no answer, in words (`None` when there is one).
    pub fn why_not(&self) -> Option<String> {
        match self {
            Reach::Answered(_) => None,
            Reach::NoOwner(why) => Some(why.clone()),
            Reach::Refused(e) => Some(e.to_string()),
        }
    }
}

/// How long the owner may take to answer: a read must not hang on an owner that stopped
/// answering (a change waits longer, see `Client::connect`).
const ASK_TIMEOUT: Duration = Duration::from_secs(5);

/// Asks the process that holds the store in `dir` for its attached pools and rates.
pub fn ask_owner(dir: &Path) -> Reach {
    match Client::connect_with_timeout(dir, ASK_TIMEOUT) {
        Ok(client) => from_client(&client),
        Err(deadletter::Error::NoOwner { reason, .. }) => Reach::NoOwner(reason),
        Err(e) => Reach::Refused(e),
    }
}

/// Asks the owner `client` is connected to.
pub fn from_client(client: &Client) -> Reach {
    match client.workers() {
        Ok(w) => Reach::Answered(w),
        Err(deadletter::Error::NoOwner { reason, .. }) => Reach::NoOwner(reason),
        Err(e) => Reach::Refused(e),
    }
}

/// A source read on a snapshot, with what the store's owner said of its pools and rates
/// when it was opened: `stats` shows them through it.
pub struct Observed<S> {
    source: S,
    dir: std::path::PathBuf,
    reach: Reach,
}

impl<S: Source> Observed<S> {
    /// `source` (a snapshot of the store in `dir`), with its owner asked now.
    pub fn ask(source: S, dir: &Path) -> Observed<S> {
        Observed {
            source,
            dir: dir.to_path_buf(),
            reach: ask_owner(dir),
        }
    }
}

impl<S: Source> Source for Observed<S> {
    type Dlq = S::Dlq;
    fn describe(&self) -> String {
        self.source.describe()
    }
    fn queue_names(&self) -> Result<Vec<String>, Error> {
        self.source.queue_names()
    }
    fn dlq(&self, name: &str) -> Result<S::Dlq, Error> {
        self.source.dlq(name)
    }
    fn metrics(&self) -> Result<Metrics, Error> {
        Ok(self.reach.overlay(self.source.metrics()?))
    }
    fn now_ms(&self) -> u64 {
        self.source.now_ms()
    }
    fn guarded(&self) -> Option<&dyn GuardedReplays> {
        self.source.guarded()
    }
    fn workers(&self) -> Option<Result<Workers, Error>> {
        Some(self.reach.to_result(&self.dir))
    }
}
