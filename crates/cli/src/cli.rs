//! The argument grammar (clap derive). Values that can be wrong (durations, times, `k=v`
//! pairs) are parsed here, so a bad one is a usage error (exit 2) named by clap.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgGroup, Args, Parser, Subcommand, ValueEnum};
use deadletter::dlq::Fingerprint;
use deadletter::queue::{MessageId, QueuedState};
use deadletter::Filter;

use crate::timefmt;

/// Inspect, replay and operate the queues and dead letter queues of a deadletter store.
#[derive(Debug, Parser)]
// What the `jetstream` feature adds, said only in a build that has it.
#[cfg_attr(
    feature = "jetstream",
    command(
        long_about = "Inspect, replay and operate the queues and dead letter queues of a \
            deadletter store.\n\n\
            Where a command takes the store directory, `nats://HOST:PORT/NAMESPACE` names a \
            queue namespace on NATS JetStream instead (stats, list, show, analyze, replay, \
            delete, purge, export, enqueue)."
    )
)]
#[command(name = "deadletter", version, propagate_version = true)]
#[command(after_help = "Examples:\n  deadletter stats ./data\n  \
    deadletter list ./data --queue orders --grep ORD-123\n  \
    deadletter replay ./data --error-kind Timeout --reset-attempts --dry-run\n  \
    deadletter serve ./data\n\n\
    The commands work while an application holds the store: reads on a snapshot, changes \
    through its control socket (Config::control_socket).\n\n\
    Exit codes: 0 success, 1 the operation failed, 2 bad usage.")]
pub struct Cli {
    /// Print JSON for scripts instead of tables.
    #[arg(long, global = true)]
    pub json: bool,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Counts of every queue and its DLQ.
    #[command(after_help = "Examples:\n  deadletter stats ./data\n  \
        deadletter stats ./data --json | jq '.queues[] | {queue, dlq_size}'")]
    Stats(StatsArgs),
    /// List DLQ entries (oldest first), with filters and paging.
    #[command(after_help = "Examples:\n  deadletter list ./data --queue orders\n  \
        deadletter list ./data --grep ORD-123            # the entry of order ORD-123\n  \
        deadletter list ./data --error-kind Timeout --since 2h\n  \
        deadletter list ./data --regex 'ORD-12[0-9]' --attr region=eu\n  \
        deadletter list ./data --after 4711              # the next page\n  \
        deadletter list ./data --as-of 2h                # the DLQs two hours ago")]
    List(ListArgs),
    /// Show one DLQ entry: its whole envelope and payload.
    #[command(
        after_help = "Examples:\n  deadletter show ./data 42\n  deadletter show ./data 42 --hex"
    )]
    Show(ShowArgs),
    /// The whole life of one message: enqueue, failures, each dead-lettering and replay
    /// generation, marks and its removal, with who did what (kept after compaction).
    #[command(
        after_help = "Examples:\n  deadletter trace ./data 42\n  deadletter trace ./data 42 --json"
    )]
    Trace(TraceArgs),
    /// Failure patterns: distributions by error kind, worker and hour, common context.
    #[command(after_help = "Examples:\n  deadletter analyze ./data\n  \
        deadletter analyze ./data --queue orders --since 24h")]
    Analyze(AnalyzeArgs),
    /// Put DLQ entries back into a queue (one id, a filter, or --all).
    #[command(after_help = "Examples:\n  deadletter replay ./data 42\n  \
        deadletter replay ./data --error-kind Timeout --reset-attempts --dry-run\n  \
        deadletter replay ./data --all --queue orders --limit 100\n  \
        deadletter replay ./data --all --yes             # more than 1,000 entries\n  \
        deadletter replay ./data --grep ORD-123 --to orders-manual --create\n  \
        deadletter replay ./data --error-kind ParseError --transform '.orderId |= ascii_upcase' --dry-run\n  \
        deadletter replay ./data 42 --payload-file fixed.json\n  \
        deadletter replay ./data 42 --edit\n  \
        deadletter replay ./data --guarded --error-kind Timeout --canary 20 --rate 50\n  \
        deadletter replay ./data --progress\n  \
        deadletter replay ./data --stop 3")]
    Replay(ReplayArgs),
    /// Delete DLQ entries for good (one id, a filter, or --all).
    #[command(after_help = "Examples:\n  deadletter delete ./data 42\n  \
        deadletter delete ./data --error-kind Duplicate --dry-run\n  \
        deadletter delete ./data --all --queue orders --yes")]
    Delete(DeleteArgs),
    /// Delete DLQ entries dead-lettered longer ago than a duration.
    #[command(
        after_help = "Examples:\n  deadletter purge ./data --older-than 30d --dry-run\n  \
        deadletter purge ./data --older-than 7d --include-pending --yes"
    )]
    Purge(PurgeArgs),
    /// Record that DLQ entries were reprocessed outside the queue (--ok or --failed); they
    /// stay in the DLQ, no longer pending, until deleted or purged.
    #[command(
        after_help = "Examples:\n  deadletter mark-reprocessed ./data 42 43 --ok\n  \
        deadletter mark-reprocessed ./data 44 --failed"
    )]
    MarkReprocessed(MarkArgs),
    /// Write DLQ entries as newline-delimited JSON (payloads in base64).
    #[command(
        after_help = "Examples:\n  deadletter export ./data --queue orders --out orders.ndjson\n  \
        deadletter export ./data --error-kind Timeout | gzip > timeouts.ndjson.gz"
    )]
    Export(ExportArgs),
    /// Read entries written by `export` into a DLQ (each entry once).
    #[command(after_help = "Examples:\n  deadletter import ./data orders.ndjson\n  \
        deadletter import ./restored orders.ndjson --create   # into a new store\n  \
        gunzip -c timeouts.ndjson.gz | deadletter import ./data --queue archive --create --ids")]
    Import(ImportArgs),
    /// Enqueue one message (the payload argument, or stdin).
    #[command(
        after_help = "Examples:\n  deadletter enqueue ./data --queue orders '{\"orderId\":\"ORD-1\"}'\n  \
        cat order.json | deadletter enqueue ./data --queue orders --attr source=cli\n  \
        deadletter enqueue ./new-store --queue jobs --create 'first'   # a new store and queue"
    )]
    Enqueue(EnqueueArgs),
    /// List the messages of a queue itself (not its DLQ) by state: ready, delayed, retrying
    /// (with the next attempt time and the last error), in flight (with the lease's end and
    /// the worker holding it, when the owner runs a pool).
    #[command(after_help = "Examples:\n  deadletter messages ./data orders\n  \
        deadletter messages ./data orders --state retrying\n  \
        deadletter messages ./data orders --state in-flight --json\n  \
        deadletter messages ./data orders --error-kind Timeout --after 4711   # the next page")]
    Messages(MessagesArgs),
    /// Show one message of a queue: its state, payload, attributes and failure history.
    #[command(after_help = "Examples:\n  deadletter message ./data orders 42\n  \
        deadletter message ./data orders 42 --hex")]
    Message(MessageArgs),
    /// Make delayed or retrying messages of a queue visible now (their attempts stay
    /// counted).
    #[command(after_help = "Examples:\n  deadletter retry-now ./data orders 42\n  \
        deadletter retry-now ./data orders --state retrying --error-kind Timeout --yes")]
    RetryNow(ActionArgs),
    /// Make waiting messages of a queue visible only later (--until a time, or --for a
    /// duration from now).
    #[command(
        after_help = "Examples:\n  deadletter delay ./data orders 42 --for 2h\n  \
        deadletter delay ./data orders --state retrying --until 2024-05-01T06:00:00Z"
    )]
    Delay(DelayArgs),
    /// Move waiting messages of a queue to its DLQ, with your reason as their failure
    /// (error kind moved_by_operator).
    #[command(after_help = "Examples:\n  \
        deadletter dead-letter ./data orders 42 --reason 'the partner API is gone'\n  \
        deadletter dead-letter ./data orders --state retrying --error-kind Gone --reason 'gone' --yes")]
    DeadLetter(DeadLetterArgs),
    /// Delete waiting messages of a queue (not DLQ entries: see `delete`) for good.
    #[command(
        after_help = "Examples:\n  deadletter delete-message ./data orders 42\n  \
        deadletter delete-message ./data orders --state delayed --grep test --dry-run"
    )]
    DeleteMessage(ActionArgs),
    /// Check every record's checksum and report what recovery would find; changes nothing
    /// and takes no lock.
    Verify(VerifyArgs),
    /// The worker pools attached to each queue (workers, handlers running, started, last
    /// heartbeat) and its enqueue, ack and failure rates, asked of the process that holds
    /// the store through its control socket.
    #[command(after_help = "Examples:\n  deadletter workers ./data\n  \
        deadletter workers ./data --queue orders --json\n\n\
        Pools live in the memory of the process that holds the store: it must open the \
        store with Config::control_socket for them to be seen. A queue without one says \
        \"no pool attached\".")]
    Workers(WorkersArgs),
    /// Serve the web dashboard and /metrics.
    #[command(after_help = "Examples:\n  deadletter serve ./data\n  \
        deadletter serve ./data --read-only --bind 127.0.0.1:9090   # beside a running app\n  \
        deadletter serve ./data --bind 0.0.0.0:8080 --token-file /etc/deadletter/token\n\n\
        Ctrl-C or SIGTERM stops it cleanly (the store closed, its control.sock removed).")]
    Serve(ServeArgs),
    #[cfg(feature = "jetstream")]
    /// Forward queues and DLQs to a NATS JetStream server while the link is up, until
    /// stopped (or drained, with --until-drained). Safe to kill at any moment.
    Forward(ForwardArgs),
    #[cfg(feature = "jetstream")]
    /// The fleet DLQ of a JetStream namespace: DLQ entries forwarded by many stores,
    /// listed by origin, and replayed back to their device.
    #[command(subcommand)]
    Fleet(FleetCommand),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    #[command(after_help = "Examples:\n  \
        deadletter completions bash > /etc/bash_completion.d/deadletter\n  \
        deadletter completions zsh > \"${fpath[1]}/_deadletter\"\n  \
        deadletter completions fish > ~/.config/fish/completions/deadletter.fish")]
    Completions(CompletionsArgs),
}

#[cfg(feature = "jetstream")]
#[derive(Debug, Subcommand)]
pub enum FleetCommand {
    /// List forwarded DLQ entries in the order they arrived, with their origin.
    List(Box<FleetListArgs>),
    /// Send one forwarded entry back to the queue it failed in on its device (its
    /// forwarder enqueues it there); it leaves the fleet DLQ.
    Replay(FleetReplayArgs),
}

#[cfg(feature = "jetstream")]
#[derive(Debug, Args)]
pub struct FleetListArgs {
    /// The namespace, nats://HOST:PORT/NAMESPACE.
    pub target: PathBuf,
    /// Only entries forwarded by this origin.
    #[arg(long)]
    pub origin: Option<String>,
    #[command(flatten)]
    pub sel: Selection,
    /// Entries at most.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub limit: u64,
}

#[cfg(feature = "jetstream")]
#[derive(Debug, Args)]
pub struct FleetReplayArgs {
    /// The namespace, nats://HOST:PORT/NAMESPACE.
    pub target: PathBuf,
    /// The entry's sequence (the SEQ column of `fleet list`).
    pub sequence: u64,
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell.
    pub shell: clap_complete::Shell,
}

impl Command {
    /// The store directory the command works on, or a `nats://host:port/namespace` URL
    /// given in its place.
    pub fn target(&self) -> &std::path::Path {
        match self {
            Command::Stats(a) => &a.dir,
            Command::List(a) => &a.dir,
            Command::Show(a) => &a.dir,
            Command::Trace(a) => &a.dir,
            Command::Analyze(a) => &a.dir,
            Command::Replay(a) => &a.dir,
            Command::Delete(a) => &a.dir,
            Command::Purge(a) => &a.dir,
            Command::Export(a) => &a.dir,
            Command::Import(a) => &a.dir,
            Command::Enqueue(a) => &a.dir,
            Command::Verify(a) => &a.dir,
            Command::Workers(a) => &a.dir,
            Command::Messages(a) => &a.dir,
            Command::Message(a) => &a.dir,
            Command::RetryNow(a) | Command::DeleteMessage(a) => &a.dir,
            Command::Delay(a) => &a.action.dir,
            Command::DeadLetter(a) => &a.action.dir,
            Command::MarkReprocessed(a) => &a.dir,
            Command::Serve(a) => &a.dir,
            #[cfg(feature = "jetstream")]
            Command::Forward(a) => &a.dir,
            #[cfg(feature = "jetstream")]
            Command::Fleet(FleetCommand::List(a)) => &a.target,
            #[cfg(feature = "jetstream")]
            Command::Fleet(FleetCommand::Replay(a)) => &a.target,
            Command::Completions(_) => std::path::Path::new(""),
        }
    }
}

/// The namespace used when a `nats://` target names none.
pub const DEFAULT_NAMESPACE: &str = "deadletter";

/// A `nats://host:port[/namespace]` target: the server's URL and the namespace, if
/// `target` is one. Recognised in every build, so that a build without the `jetstream`
/// feature can say why it cannot work on one instead of looking for a directory so named.
pub fn parse_target(target: &std::path::Path) -> Option<(String, String)> {
    let rest = target.to_str()?.strip_prefix("nats://")?;
    let (server, namespace) = match rest.split_once('/') {
        Some((server, ns)) if !ns.trim_matches('/').is_empty() => {
            (server, ns.trim_matches('/').to_string())
        }
        Some((server, _)) => (server, DEFAULT_NAMESPACE.to_string()),
        None => (rest, DEFAULT_NAMESPACE.to_string()),
    };
    Some((format!("nats://{server}"), namespace))
}

/// Which DLQ entries: filters shared by list, analyze, replay, delete and export.
#[derive(Debug, Clone, Default, Args)]
pub struct Selection {
    /// Only this queue's DLQ (a queue name or a DLQ name such as orders-dlq).
    #[arg(long, short = 'q')]
    pub queue: Option<String>,
    /// Only entries with this error kind.
    #[arg(long, value_name = "KIND")]
    pub error_kind: Option<String>,
    /// Only entries whose error message contains this text.
    #[arg(long, value_name = "TEXT")]
    pub message: Option<String>,
    /// Only entries dead-lettered at or after this time (2024-05-01T10:00:00Z, 2024-05-01,
    /// ms since the epoch, or a duration ago such as 2h).
    #[arg(long, value_name = "TIME", value_parser = timefmt::parse_time_arg)]
    pub since: Option<u64>,
    /// Only entries dead-lettered before this time (same forms as --since).
    #[arg(long, value_name = "TIME", value_parser = timefmt::parse_time_arg)]
    pub until: Option<u64>,
    /// Only entries with at least this many deliveries.
    #[arg(long, value_name = "N")]
    pub min_attempts: Option<u32>,
    /// Only entries with at most this many deliveries.
    #[arg(long, value_name = "N")]
    pub max_attempts: Option<u32>,
    /// Only pending or only reprocessed entries.
    #[arg(long, value_enum)]
    pub status: Option<StatusArg>,
    /// Only entries whose final failure was reported by this worker.
    #[arg(long, value_name = "NAME")]
    pub worker: Option<String>,
    /// Only entries whose payload contains this text (such as an order number).
    #[arg(long, value_name = "TEXT")]
    pub grep: Option<String>,
    /// Only entries whose payload (as text) or error message matches this regular
    /// expression (Rust regex syntax, such as 'ORD-12[0-9]').
    #[arg(long, value_name = "REGEX", value_parser = parse_regex)]
    pub regex: Option<regex::Regex>,
    /// Only entries with this attribute (repeatable: all must match).
    #[arg(long = "attr", value_name = "KEY=VALUE", value_parser = parse_key_value)]
    pub attrs: Vec<(String, String)>,
    /// Only entries with this tag (repeatable: all must match).
    #[arg(long = "tag", value_name = "KEY=VALUE", value_parser = parse_key_value)]
    pub tags: Vec<(String, String)>,
    /// Only entries with this failure fingerprint (16 hex digits, as `analyze` prints).
    #[arg(long, value_name = "FP")]
    pub fingerprint: Option<Fingerprint>,
}

fn parse_regex(s: &str) -> Result<regex::Regex, String> {
    regex::Regex::new(s).map_err(|e| e.to_string())
}

/// Entry status for --status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StatusArg {
    /// Not dealt with yet.
    Pending,
    /// Marked reprocessed.
    Reprocessed,
}

impl Selection {
    /// These options in words, as typed (for a guarded replay's report).
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        let mut add = |name: &str, value: Option<String>| {
            if let Some(v) = value {
                parts.push(format!("--{name} {v}"));
            }
        };
        add("queue", self.queue.clone());
        add("error-kind", self.error_kind.clone());
        add("message", self.message.clone());
        add("since", self.since.map(|t| t.to_string()));
        add("until", self.until.map(|t| t.to_string()));
        add("min-attempts", self.min_attempts.map(|n| n.to_string()));
        add("max-attempts", self.max_attempts.map(|n| n.to_string()));
        add(
            "status",
            self.status.map(|s| format!("{s:?}").to_lowercase()),
        );
        add("worker", self.worker.clone());
        add("grep", self.grep.clone());
        add("regex", self.regex.as_ref().map(|r| r.as_str().to_string()));
        for (k, v) in &self.attrs {
            add("attr", Some(format!("{k}={v}")));
        }
        for (k, v) in &self.tags {
            add("tag", Some(format!("{k}={v}")));
        }
        add("fingerprint", self.fingerprint.map(|f| f.to_string()));
        if parts.is_empty() {
            "--all".to_string()
        } else {
            parts.join(" ")
        }
    }

    /// The library filter of these options.
    pub fn filter(&self) -> Filter {
        let mut f = Filter::all();
        f.error_kind = self.error_kind.clone();
        f.message_contains = self.message.clone();
        f.since_ms = self.since;
        f.until_ms = self.until;
        f.min_attempts = self.min_attempts;
        f.max_attempts = self.max_attempts;
        f.worker = self.worker.clone();
        f.pending = self.status.map(|s| s == StatusArg::Pending);
        f.payload_contains = self.grep.clone();
        f.attributes = self.attrs.iter().cloned().collect();
        f.tags = self.tags.iter().cloned().collect();
        if let Some(re) = self.regex.clone() {
            f = f.matching(move |e| {
                re.is_match(&String::from_utf8_lossy(&e.payload))
                    || re.is_match(&e.failure.error_message)
            });
        }
        f.fingerprint = self.fingerprint;
        f
    }
}

/// The filter arguments, for groups that need "an id, a filter or --all".
const FILTER_ARGS: [&str; 13] = [
    "error_kind",
    "message",
    "since",
    "until",
    "min_attempts",
    "max_attempts",
    "status",
    "worker",
    "grep",
    "regex",
    "attrs",
    "tags",
    "fingerprint",
];

#[derive(Debug, Args)]
pub struct WorkersArgs {
    /// The store directory.
    pub dir: PathBuf,
    /// Only this queue (a queue name or its DLQ's name).
    #[arg(long, short = 'q')]
    pub queue: Option<String>,
}

#[derive(Debug, Args)]
pub struct StatsArgs {
    /// The store directory.
    pub dir: PathBuf,
    /// The DLQs as they were at this time (2024-05-01T10:00:00Z, ms since the epoch, or a
    /// duration ago such as 2h), within what the store keeps (see `trace`); the queues' own
    /// counts are not kept.
    #[arg(long, value_name = "TIME", value_parser = timefmt::parse_time_arg)]
    pub as_of: Option<u64>,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// The store directory.
    pub dir: PathBuf,
    #[command(flatten)]
    pub sel: Selection,
    /// Start after this entry id (the cursor printed by the previous page).
    #[arg(long, value_name = "ID")]
    pub after: Option<MessageId>,
    /// Entries per page.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub limit: u64,
    /// The entries as they were at this time (same forms as --since), within what the
    /// store keeps of them: their failure, not their payload, attributes or tags.
    #[arg(long, value_name = "TIME", value_parser = timefmt::parse_time_arg,
          conflicts_with_all = ["grep", "regex", "attrs", "tags"])]
    pub as_of: Option<u64>,
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The store directory.
    pub dir: PathBuf,
    /// The entry's id.
    pub id: MessageId,
    /// Show the payload in hex even when it is text.
    #[arg(long)]
    pub hex: bool,
}

#[derive(Debug, Args)]
pub struct TraceArgs {
    /// The store directory.
    pub dir: PathBuf,
    /// The message's id.
    pub id: MessageId,
}

#[derive(Debug, Args)]
pub struct AnalyzeArgs {
    /// The store directory.
    pub dir: PathBuf,
    #[command(flatten)]
    pub sel: Selection,
}

#[derive(Debug, Args)]
#[command(group(
    ArgGroup::new("which")
        .required(true)
        .multiple(true)
        .args(["id", "all", "progress", "pause", "resume", "stop"])
        .args(FILTER_ARGS)
))]
#[command(
    override_usage = "deadletter replay <DIR> <ID | --all | FILTERS> [--queue Q] [--to QUEUE [--create]] \
                          [--reset-attempts] [--dry-run] [--force] [--limit N] [--yes]\n       \
                      deadletter replay <DIR> <ID | --all | FILTERS> --transform EXPR [--dry-run] [...]\n       \
                      deadletter replay <DIR> ID <--payload-file FILE | --edit> [--dry-run] [--yes] [...]\n       \
                      deadletter replay <DIR> --guarded <--all | FILTERS> [--canary N] [--growth F] \
                          [--max-failure-ratio R] [--rate M] [--queue Q] [--to QUEUE [--create]] [...]\n       \
                      deadletter replay <DIR> --progress [ID]\n       \
                      deadletter replay <DIR> <--pause ID | --resume ID | --stop ID>"
)]
pub struct ReplayArgs {
    /// The store directory.
    pub dir: PathBuf,
    /// One entry's id.
    #[arg(conflicts_with = "all")]
    pub id: Option<MessageId>,
    /// Every entry (of --queue's DLQ, or of every DLQ).
    #[arg(long, conflicts_with_all = FILTER_ARGS)]
    pub all: bool,
    #[command(flatten)]
    pub sel: Selection,
    /// Replay into this queue instead of the one each entry failed in (an existing queue,
    /// unless --create).
    #[arg(long, value_name = "QUEUE")]
    pub to: Option<String>,
    /// Create the --to queue if it does not exist.
    #[arg(long, requires = "to")]
    pub create: bool,
    /// Count attempts from zero again.
    #[arg(long)]
    pub reset_attempts: bool,
    /// Say what would move, change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Replay entries already marked reprocessed too.
    #[arg(long)]
    pub force: bool,
    /// Replay at most this many entries.
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
    /// Do not ask before replaying more than 1,000 entries; needed then when not on a
    /// terminal.
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// Replay entry ID with this file's bytes as its payload (its own stays in its history).
    #[arg(long, value_name = "FILE", requires = "id", conflicts_with_all = ["edit", "transform"])]
    pub payload_file: Option<PathBuf>,
    /// Open entry ID's payload in $VISUAL or $EDITOR, show the change and ask before
    /// replaying it with the edited payload (--yes: without asking).
    #[arg(long, requires = "id", conflicts_with = "transform")]
    pub edit: bool,
    /// Replay each selected entry with its JSON payload passed through this jq expression
    /// (such as '.orderId |= ascii_upcase'); an entry that is not JSON, or for which the
    /// expression fails or gives other than one value, stays in the DLQ with the reason.
    /// With --dry-run, a diff per entry.
    #[arg(long, value_name = "EXPR")]
    pub transform: Option<String>,
    /// Replay in waves: a canary first, each next wave once the one before was handled,
    /// stopping by itself when a wave fails again too often (one guarded replay per DLQ).
    #[arg(long, conflicts_with_all = ["id", "dry_run", "payload_file", "edit", "transform"])]
    pub guarded: bool,
    /// The first wave's size (with --guarded).
    #[arg(long, value_name = "N", default_value_t = 10, requires = "guarded")]
    pub canary: u32,
    /// Each wave's size over the one before (with --guarded).
    #[arg(long, value_name = "F", default_value_t = 2.0, requires = "guarded")]
    pub growth: f64,
    /// Stop when more than this share of a wave fails again (with --guarded; 0 to 1).
    #[arg(long, value_name = "R", default_value_t = 0.1, requires = "guarded")]
    pub max_failure_ratio: f64,
    /// Release at most this many entries per second (with --guarded).
    #[arg(long, value_name = "M", requires = "guarded")]
    pub rate: Option<u32>,
    /// Show the store's guarded replays (or this one), with their reports.
    #[arg(long, value_name = "ID", num_args = 0..=1, default_missing_value = "0",
          conflicts_with_all = ["id", "all", "guarded", "pause", "resume", "stop"])]
    pub progress: Option<u64>,
    /// Pause this guarded replay.
    #[arg(long, value_name = "ID", conflicts_with_all = ["id", "all", "guarded", "resume", "stop"])]
    pub pause: Option<u64>,
    /// Resume this paused guarded replay.
    #[arg(long, value_name = "ID", conflicts_with_all = ["id", "all", "guarded", "stop"])]
    pub resume: Option<u64>,
    /// Stop (cancel) this guarded replay for good.
    #[arg(long, value_name = "ID", conflicts_with_all = ["id", "all", "guarded"])]
    pub stop: Option<u64>,
}

#[derive(Debug, Args)]
#[command(group(
    ArgGroup::new("which")
        .required(true)
        .multiple(true)
        .args(["id", "all"])
        .args(FILTER_ARGS)
))]
#[command(
    override_usage = "deadletter delete <DIR> <ID | --all | FILTERS> [--queue Q] [--dry-run] [--yes]"
)]
pub struct DeleteArgs {
    /// The store directory.
    pub dir: PathBuf,
    /// One entry's id.
    #[arg(conflicts_with = "all")]
    pub id: Option<MessageId>,
    /// Every entry (of --queue's DLQ, or of every DLQ).
    #[arg(long, conflicts_with_all = FILTER_ARGS)]
    pub all: bool,
    #[command(flatten)]
    pub sel: Selection,
    /// Say what would be deleted, change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Do not ask before deleting every entry (--all) or more than 1,000 entries; needed
    /// then when not on a terminal.
    #[arg(long, short = 'y')]
    pub yes: bool,
}

#[derive(Debug, Args)]
#[command(group(ArgGroup::new("outcome").required(true).args(["ok", "failed"])))]
pub struct MarkArgs {
    /// The store directory.
    pub dir: PathBuf,
    /// The entries' ids.
    #[arg(required = true)]
    pub ids: Vec<MessageId>,
    /// They were reprocessed successfully.
    #[arg(long)]
    pub ok: bool,
    /// Reprocessing them failed.
    #[arg(long)]
    pub failed: bool,
}

#[derive(Debug, Args)]
pub struct PurgeArgs {
    /// The store directory.
    pub dir: PathBuf,
    /// Delete entries dead-lettered longer ago than this (30d, 12h, 90m, 45s, 1h30m).
    #[arg(long, value_name = "DURATION", value_parser = timefmt::parse_duration)]
    pub older_than: Duration,
    /// Only this queue's DLQ.
    #[arg(long, short = 'q')]
    pub queue: Option<String>,
    /// Only entries with this failure fingerprint (16 hex digits, as `analyze` prints).
    #[arg(long, value_name = "FP")]
    pub fingerprint: Option<Fingerprint>,
    /// Delete pending entries too (by default only reprocessed ones are purged).
    #[arg(long)]
    pub include_pending: bool,
    /// Say what would be deleted, change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Do not ask first; needed when not on a terminal.
    #[arg(long, short = 'y')]
    pub yes: bool,
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The store directory.
    pub dir: PathBuf,
    #[command(flatten)]
    pub sel: Selection,
    /// Write to this file (created or replaced once complete) instead of stdout.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub out: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The store directory (an existing store, unless --create).
    pub dir: PathBuf,
    /// The export file; stdin when absent or `-`.
    pub file: Option<PathBuf>,
    /// Import into this queue's DLQ instead of each entry's own queue (an existing queue,
    /// unless --create).
    #[arg(long, short = 'q')]
    pub queue: Option<String>,
    /// Create the store, and the queues the entries go to, if missing (and say so).
    #[arg(long)]
    pub create: bool,
    /// Print each imported entry's original and new id (by default a summary).
    #[arg(long)]
    pub ids: bool,
}

#[derive(Debug, Args)]
pub struct EnqueueArgs {
    /// The store directory (an existing store, unless --create).
    pub dir: PathBuf,
    /// The queue (an existing queue, unless --create).
    #[arg(long, short = 'q')]
    pub queue: String,
    /// Create the store and the queue if missing (and say so).
    #[arg(long)]
    pub create: bool,
    /// The payload; read from stdin when absent.
    pub payload: Option<String>,
    /// An attribute kept with the message and in its DLQ envelope (repeatable).
    #[arg(long = "attr", value_name = "KEY=VALUE", value_parser = parse_key_value)]
    pub attributes: Vec<(String, String)>,
    /// Not visible before this delay (such as 10s).
    #[arg(long, value_name = "DURATION", value_parser = timefmt::parse_duration)]
    pub delay: Option<Duration>,
    /// Time to live (such as 1h).
    #[arg(long, value_name = "DURATION", value_parser = timefmt::parse_duration)]
    pub ttl: Option<Duration>,
    /// A repeat with the same key within the store's window enqueues nothing.
    #[arg(long, value_name = "KEY")]
    pub idempotency_key: Option<String>,
}

/// A queue message's state for --state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StateArg {
    /// Waiting, visible now.
    Ready,
    /// Waiting for a later time, never failed.
    Delayed,
    /// Waiting for the next attempt after a failure.
    Retrying,
    /// Leased by a consumer.
    InFlight,
}

impl StateArg {
    /// The library's state.
    pub fn state(self) -> QueuedState {
        match self {
            StateArg::Ready => QueuedState::Ready,
            StateArg::Delayed => QueuedState::Delayed,
            StateArg::Retrying => QueuedState::Retrying,
            StateArg::InFlight => QueuedState::InFlight,
        }
    }
}

/// Which messages of a queue: the state and the filters that describe a queued message.
#[derive(Debug, Clone, Default, Args)]
pub struct MessageSelection {
    /// Only messages in this state.
    #[arg(long, value_enum)]
    pub state: Option<StateArg>,
    /// Only messages whose last failure has this error kind.
    #[arg(long, value_name = "KIND")]
    pub error_kind: Option<String>,
    /// Only messages whose last failure's message contains this text.
    #[arg(long, value_name = "TEXT")]
    pub message: Option<String>,
    /// Only messages whose last failure was reported by this worker.
    #[arg(long, value_name = "NAME")]
    pub worker: Option<String>,
    /// Only messages whose payload contains this text.
    #[arg(long, value_name = "TEXT")]
    pub grep: Option<String>,
    /// Only messages with this attribute (repeatable: all must match).
    #[arg(long = "attr", value_name = "KEY=VALUE", value_parser = parse_key_value)]
    pub attrs: Vec<(String, String)>,
    /// Only messages with at least this many deliveries.
    #[arg(long, value_name = "N")]
    pub min_attempts: Option<u32>,
    /// Only messages with at most this many deliveries.
    #[arg(long, value_name = "N")]
    pub max_attempts: Option<u32>,
}

impl MessageSelection {
    /// The library filter of these options (the state apart).
    pub fn filter(&self) -> Filter {
        let mut f = Filter::all();
        f.error_kind = self.error_kind.clone();
        f.message_contains = self.message.clone();
        f.worker = self.worker.clone();
        f.payload_contains = self.grep.clone();
        f.attributes = self.attrs.iter().cloned().collect();
        f.min_attempts = self.min_attempts;
        f.max_attempts = self.max_attempts;
        f
    }
}

#[derive(Debug, Args)]
pub struct MessagesArgs {
    /// The store directory.
    pub dir: PathBuf,
    /// The queue.
    pub queue: String,
    #[command(flatten)]
    pub sel: MessageSelection,
    /// Start after this message id (the cursor printed by the previous page).
    #[arg(long, value_name = "ID")]
    pub after: Option<MessageId>,
    /// Messages per page.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub limit: u64,
}

#[derive(Debug, Args)]
pub struct MessageArgs {
    /// The store directory.
    pub dir: PathBuf,
    /// The queue.
    pub queue: String,
    /// The message's id.
    pub id: MessageId,
    /// Show the payload in hex even when it is text.
    #[arg(long)]
    pub hex: bool,
}

/// The messages an operator's action changes: ids, or a selection (--all, --state, filters).
#[derive(Debug, Args)]
#[command(group(
    ArgGroup::new("which")
        .required(true)
        .multiple(true)
        .args(["ids", "all", "state", "error_kind", "message", "worker", "grep", "attrs",
               "min_attempts", "max_attempts"])
))]
pub struct ActionArgs {
    /// The store directory.
    pub dir: PathBuf,
    /// The queue.
    pub queue: String,
    /// The messages' ids.
    pub ids: Vec<MessageId>,
    /// Every waiting message of the queue.
    #[arg(long, conflicts_with_all = ["ids", "state", "error_kind", "message", "worker", "grep",
          "attrs", "min_attempts", "max_attempts"])]
    pub all: bool,
    #[command(flatten)]
    pub sel: MessageSelection,
    /// Say which messages it would change, change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Do not ask before changing more than 1,000 messages; needed then when not on a
    /// terminal.
    #[arg(long, short = 'y')]
    pub yes: bool,
}

#[derive(Debug, Args)]
#[command(group(ArgGroup::new("when").required(true).args(["until", "for_"])))]
pub struct DelayArgs {
    #[command(flatten)]
    pub action: ActionArgs,
    /// Visible again at this time (2024-05-01T10:00:00Z, 2024-05-01, ms since the epoch).
    #[arg(long, value_name = "TIME", value_parser = timefmt::parse_time_arg)]
    pub until: Option<u64>,
    /// Visible again after this long from now (such as 2h).
    #[arg(long = "for", value_name = "DURATION", value_parser = timefmt::parse_duration)]
    pub for_: Option<Duration>,
}

#[derive(Debug, Args)]
pub struct DeadLetterArgs {
    #[command(flatten)]
    pub action: ActionArgs,
    /// Why: it becomes the DLQ entry's error message, with who moved it.
    #[arg(long, value_name = "TEXT")]
    pub reason: String,
}

#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The store directory.
    pub dir: PathBuf,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The store directory.
    pub dir: PathBuf,
    /// Serve snapshots of the store without taking it (while another process holds it, or
    /// on a read-only directory): browsing only, replay and delete are refused.
    #[arg(long)]
    pub read_only: bool,
    /// Address to listen on, HOST:PORT (127.0.0.1:8080, localhost:8080, [::1]:8080; port 0
    /// picks a free port).
    #[arg(long, default_value = "127.0.0.1:8080", value_parser = parse_bind)]
    pub bind: SocketAddr,
    #[command(flatten)]
    pub token: TokenArgs,
    /// The token's name: the audit trail records the dashboard's changes as made by it.
    #[arg(long, default_value = "dashboard", value_name = "NAME")]
    pub token_name: String,
}

#[cfg(feature = "jetstream")]
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("what").required(true).multiple(true).args(["queues", "dlqs"])))]
pub struct ForwardArgs {
    /// The store directory.
    pub dir: PathBuf,
    /// The server and central namespace, `nats://HOST:PORT/NAMESPACE`.
    #[arg(long, value_name = "URL")]
    pub to: String,
    /// This store's name in the fleet, such as a device id (letters, digits, _ and -).
    #[arg(long)]
    pub origin: String,
    /// A queue whose messages are forwarded (repeatable).
    #[arg(long = "queue", short = 'q', value_name = "QUEUE")]
    pub queues: Vec<String>,
    /// A queue whose DLQ entries are forwarded (repeatable).
    #[arg(long = "dlq", value_name = "QUEUE")]
    pub dlqs: Vec<String>,
    /// Publishes awaiting the server's acknowledgement, at most.
    #[arg(long, default_value_t = 1024)]
    pub max_in_flight: usize,
    /// Stop once every forwarded queue and DLQ is empty.
    #[arg(long)]
    pub until_drained: bool,
    /// Also serve the store's dashboard and /metrics (with the forwarder's metrics) on
    /// this address (port 0 picks a free port): the forwarder holds the store, so no other
    /// process can serve it meanwhile.
    #[arg(long, value_name = "ADDR", value_parser = parse_bind)]
    pub serve: Option<SocketAddr>,
    #[command(flatten)]
    pub token: TokenArgs,
    /// Print the status this often (such as 10s; 0s for only at the end).
    #[arg(long, value_name = "DURATION", value_parser = timefmt::parse_duration, default_value = "10s")]
    pub status_every: Duration,
}

/// Where the dashboard's token comes from (`serve`, `forward --serve`): `--token`,
/// `--token-file`, or else `$DEADLETTER_TOKEN` (read by [`crate::token`], which knows
/// which one it was: a token from the environment or a file is never printed).
#[derive(Debug, Args)]
pub struct TokenArgs {
    /// The token replay and delete requests must carry (random when absent). Other users
    /// see it in `ps`: prefer --token-file or $DEADLETTER_TOKEN.
    #[arg(long, value_name = "TOKEN", conflicts_with = "token_file")]
    pub token: Option<String>,
    /// Read the token from this file (its first line; surrounding whitespace ignored).
    /// Without --token or --token-file, $DEADLETTER_TOKEN is used when set.
    #[arg(long, value_name = "PATH")]
    pub token_file: Option<PathBuf>,
}

/// The accepted forms of a listening address, for error messages.
const BIND_FORMS: &str = "expected HOST:PORT, such as 127.0.0.1:8080, localhost:8080 or \
    [::1]:8080 (port 0 picks a free port)";

/// A listening address: an IP address and port, or a host name and port, resolved (the
/// first IPv4 address it has, else its first one, so `localhost:8080` listens on
/// 127.0.0.1 as the default does).
pub fn parse_bind(s: &str) -> Result<SocketAddr, String> {
    use std::net::ToSocketAddrs;
    if let Ok(addr) = s.parse::<SocketAddr>() {
        return Ok(addr);
    }
    let port_given = s
        .rsplit_once(':')
        .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
    if !port_given {
        return Err(format!("{s:?} is not an address: {BIND_FORMS}"));
    }
    let addrs: Vec<SocketAddr> = s
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {s:?} ({e}): {BIND_FORMS}"))?
        .collect();
    addrs
        .iter()
        .find(|a| a.is_ipv4())
        .or(addrs.first())
        .copied()
        .ok_or_else(|| format!("{s:?} resolves to no address: {BIND_FORMS}"))
}

fn parse_key_value(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(format!("expected KEY=VALUE, got {s:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn grammar_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn bind_addresses() {
        let v4 = |a: [u8; 4], p: u16| SocketAddr::from((a, p));
        assert_eq!(parse_bind("127.0.0.1:8097"), Ok(v4([127, 0, 0, 1], 8097)));
        assert_eq!(
            parse_bind("[::1]:0"),
            Ok(SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, 0)))
        );
        let local = parse_bind("localhost:8097").unwrap();
        assert!(local.ip().is_loopback() && local.port() == 8097, "{local}");
        for bad in [
            "localhost",
            "8097",
            ":8097",
            "localhost:http",
            "localhost:70000",
        ] {
            let e = parse_bind(bad).unwrap_err();
            assert!(
                e.contains("HOST:PORT") && e.contains("localhost:8080"),
                "{bad}: {e}"
            );
        }
    }

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
