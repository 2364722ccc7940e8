//! The commands on a JetStream namespace: `deadletter COMMAND nats://HOST:PORT/NAMESPACE`
//! (the namespace defaults to `deadletter` when the URL has no path).
//!
//! A namespace is a [`Source`] of queues and DLQs (the dashboard's), so stats, list, show,
//! analyze, replay, delete, purge, export and serve run the same code as on a store
//! directory, through the backend traits that `deadletter-jetstream` implements, with the
//! same output; enqueue runs on its queue. `import` and `verify` are about a store
//! directory's records and files, and say so.

use deadletter::clock::{Clock, SystemClock};
use deadletter::metrics::{Metrics, QueueMetrics};
use deadletter::{DeadLetterQueue, Error, MessageQueue};
use deadletter_dashboard::Source;
use deadletter_jetstream::{JetStream, JetStreamDlq, JetStreamOptions};

use crate::cli::Command;
use crate::error::CliError;
use crate::{browse, change, fleet, serve, transfer};

/// A JetStream namespace as the dashboard and the commands see it.
pub struct Namespace {
    js: JetStream,
    url: String,
}

impl Source for Namespace {
    type Dlq = JetStreamDlq;
    fn describe(&self) -> String {
        format!("{}/{}", self.url, self.js.namespace())
    }
    fn queue_names(&self) -> Result<Vec<String>, Error> {
        self.js.queue_names()
    }
    fn dlq(&self, name: &str) -> Result<JetStreamDlq, Error> {
        self.js.dlq(name)
    }
    fn metrics(&self) -> Result<Metrics, Error> {
        let at_ms = self.now_ms();
        let mut queues = Vec::new();
        for name in self.js.queue_names()? {
            let queue = self.js.existing_queue(&name)?;
            let (q, d) = (queue.stats()?, queue.dlq().stats()?);
            queues.push(QueueMetrics::from_stats(&q, &d, at_ms));
        }
        Ok(Metrics::new(at_ms, queues))
    }
    fn now_ms(&self) -> u64 {
        SystemClock.now_ms()
    }
}

/// Runs `command` on the namespace `namespace` of the server at `url`.
pub fn run(url: &str, namespace: &str, command: &Command, json: bool) -> Result<(), CliError> {
    let as_of = match command {
        Command::Stats(a) => a.as_of.is_some(),
        Command::List(a) => a.as_of.is_some(),
        _ => false,
    };
    if as_of {
        return Err(CliError::Usage(format!(
            "--as-of reads the lineage a store directory keeps; {url}/{namespace} is a \
             JetStream namespace, which keeps none"
        )));
    }
    let ns = Namespace {
        js: JetStream::connect_with(url, JetStreamOptions::new(namespace))?,
        url: url.to_string(),
    };
    match command {
        Command::Stats(_) => browse::stats_on(&ns, json),
        Command::List(a) => browse::list_on(&ns, a, json),
        Command::Show(a) => browse::show_on(&ns, a, json),
        Command::Analyze(a) => browse::analyze_on(&ns, a, json),
        Command::Replay(a) if crate::guarded::wanted(a) => Err(CliError::Usage(
            "a guarded replay keeps its state in a store's log and is driven by the store: \
             it needs a store directory, not a JetStream namespace"
                .into(),
        )),
        Command::Replay(a) if crate::transform::wanted(a) => crate::transform::run_on(&ns, a, json),
        Command::Replay(a) => change::replay_on(&ns, a, json),
        Command::Delete(a) => change::delete_on(&ns, a, json),
        Command::Purge(a) => change::purge_on(&ns, a, json),
        Command::Export(a) => transfer::export_on(&ns, a, json),
        Command::MarkReprocessed(a) => change::mark_on(&ns, a, json),
        Command::Enqueue(a) => {
            let (payload, options) = change::message_of(a)?;
            let mut created = crate::names::Created::default();
            if crate::names::target(&ns, &a.queue, "enqueue to", a.create)? {
                created.queues.push(a.queue.clone());
            }
            change::enqueue_on(&ns.js.queue(&a.queue)?, &payload, &options, &created, json)
        }
        Command::Serve(a) => serve::serve_on(ns, a, json),
        Command::Import(_) => Err(CliError::Usage(format!(
            "import writes into a store directory's DLQ; {} is a JetStream namespace \
             (export from it, import into a directory)",
            ns.describe()
        ))),
        Command::Fleet(f) => fleet::run(&ns.js, f, json),
        Command::Forward(_) => Err(CliError::Usage(format!(
            "forward reads a store directory and sends to a server (--to); {} is a \
             JetStream namespace",
            ns.describe()
        ))),
        Command::Completions(_) => Ok(()),
        Command::Trace(_) => Err(CliError::Usage(format!(
            "trace reads the lineage a store directory keeps; {} is a JetStream namespace, \
             which keeps none",
            ns.describe()
        ))),
        Command::Messages(_)
        | Command::Message(_)
        | Command::RetryNow(_)
        | Command::Delay(_)
        | Command::DeadLetter(_)
        | Command::DeleteMessage(_) => Err(CliError::Usage(format!(
            "a queue's own messages are browsed and changed in a store directory's index; \
             {} is a JetStream namespace (its consumers' state is the server's)",
            ns.describe()
        ))),
        Command::Verify(_) => Err(CliError::Usage(format!(
            "verify checks a store directory's files; {} is a JetStream namespace, whose \
             files are the server's",
            ns.describe()
        ))),
        Command::Workers(_) => Err(CliError::Usage(format!(
            "workers asks the process holding a store directory for its attached pools; \
             {} is a JetStream namespace, whose consumers are the server's",
            ns.describe()
        ))),
    }
}
