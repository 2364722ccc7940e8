//! `deadletter`: the operator's command-line tool for a deadletter store directory, or a
//! queue namespace on NATS JetStream.
//!
//! Every command takes the store directory as its first argument (or, in its place,
//! `nats://host:port/namespace`: see `remote`, built with the `jetstream` feature, which
//! is on by default; a build without it says so when given such a target or one of its
//! commands), prints aligned tables for
//! people (fitted to the terminal) and, with `--json`, stable JSON for scripts. Reads work
//! on a snapshot whoever holds the store; changes to a store another process holds go
//! through its control socket ([`live`], [`store_access`]). Exit codes: 0 success, 1 the
//! operation failed (including a change to a store held by a process that serves no
//! control socket, which is left untouched), 2 bad usage. Errors go to stderr as one line,
//! a JSON object with `--json`. Long operations draw a progress bar on stderr when it is a
//! terminal, never in a pipe.
//!
//! Modules: [`cli`] (the argument grammar), [`browse`] (stats, list, show, analyze),
//! [`change`] (replay, delete, purge, mark-reprocessed, enqueue), [`transform`] (replay
//! with corrected payloads: a file, an edit, a jq expression, through [`jq`], [`edit`] and
//! [`diff`]), [`transfer`] (export, import),
//! [`check`] (verify), [`trace`] (a message's life), [`workers`] (the pools attached and
//! the rates, asked of the owner), [`past`] (DLQs as of a past time),
//! [`serve`] (the dashboard); with the `jetstream` feature, `remote` (the commands on
//! [`check`] (verify), [`trace`] (a message's life), [`past`] (DLQs as of a past time),
//! [`serve`] (the dashboard), [`messages`] (a queue's own messages: messages, message,
//! retry-now, delay, dead-letter, delete-message); with the `jetstream` feature, `remote` (the commands on
//! JetStream), `forward` (the forwarder to JetStream) and `fleet` (the fleet DLQ on
//! JetStream); [`live`] (a store another process holds),
//! and helpers: [`error`], [`output`],
//! [`progress`], [`timefmt`], [`store_access`], [`names`] (unknown names, with the nearest
//! known one, and `--create`), [`kinds`] (a `--error-kind` that differs only in case), [`confirm`] (asking before bulk changes),
//! [`token`] (where the dashboard's token came from, and whether it may be printed),
//! [`pools`] (what the store's owner says of its pools and rates).

mod browse;
mod change;
mod check;
mod cli;
mod confirm;
mod diff;
mod edit;
mod error;
#[cfg(feature = "jetstream")]
mod fleet;
#[cfg(feature = "jetstream")]
mod forward;
mod guarded;
mod jq;
mod kinds;
mod live;
mod messages;
mod names;
mod output;
mod past;
mod pools;
mod progress;
#[cfg(feature = "jetstream")]
mod remote;
mod serve;
mod store_access;
mod timefmt;
mod token;
mod trace;
mod transfer;
mod transform;
mod workers;

use std::process::ExitCode;

use clap::Parser;

use crate::cli::{parse_target, Cli, Command};
use crate::error::CliError;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return parse_failed(e),
    };
    let json = cli.json;
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => report(&e, json),
    }
}

/// Prints `e` on stderr (one line, a JSON object with `--json`) and gives its exit code.
fn report(e: &CliError, json: bool) -> ExitCode {
    if json {
        eprintln!("{}", e.to_json());
    } else {
        eprintln!("error: {e}");
    }
    ExitCode::from(e.exit_code())
}

/// What the arguments failed to parse into (or asked for help or the version) says.
fn parse_failed(e: clap::Error) -> ExitCode {
    #[cfg(not(feature = "jetstream"))]
    if let Some(command) = jetstream_command(&e) {
        let err = CliError::NotBuilt(format!("`deadletter {command}` works on JetStream"));
        return report(&err, wants_json());
    }
    if wants_json() && e.use_stderr() {
        // A usage error, for a script: one JSON object, exit 2.
        let message = e.kind().to_string();
        let detail = e.render().to_string();
        let err = CliError::Usage(format!("{message}: {}", detail.trim()));
        return report(&err, true);
    }
    // Help and version print and exit 0; usage errors print and exit 2.
    e.exit()
}

/// True when `--json` is among the arguments (for errors found before they are parsed).
fn wants_json() -> bool {
    std::env::args_os().skip(1).any(|a| a == "--json")
}

/// The command of the `jetstream` feature that `e` says is unknown, in a build without
/// it: such a build does not offer `forward` and `fleet`, but says why when they are typed.
#[cfg(not(feature = "jetstream"))]
fn jetstream_command(e: &clap::Error) -> Option<&'static str> {
    use clap::error::{ContextKind, ContextValue};
    match e.get(ContextKind::InvalidSubcommand) {
        Some(ContextValue::String(name)) => ["forward", "fleet"].into_iter().find(|c| c == name),
        _ => None,
    }
}

fn run(cli: Cli) -> Result<(), CliError> {
    let json = cli.json;
    if let Command::Completions(a) = &cli.command {
        let mut command = <Cli as clap::CommandFactory>::command();
        clap_complete::generate(a.shell, &mut command, "deadletter", &mut std::io::stdout());
        return Ok(());
    }
    if let Some((url, namespace)) = parse_target(cli.command.target()) {
        #[cfg(feature = "jetstream")]
        return remote::run(&url, &namespace, &cli.command, json);
        #[cfg(not(feature = "jetstream"))]
        return Err(CliError::NotBuilt(format!(
            "{url}/{namespace} is a JetStream namespace"
        )));
    }
    match cli.command {
        Command::Stats(a) => match a.as_of {
            Some(at) => past::stats(&a, at, json),
            None => browse::stats(&a, json),
        },
        Command::List(a) => match a.as_of {
            Some(at) => past::list(&a, at, json),
            None => browse::list(&a, json),
        },
        Command::Show(a) => browse::show(&a, json),
        Command::Trace(a) => trace::trace(&a, json),
        Command::Analyze(a) => browse::analyze(&a, json),
        Command::Replay(a) if guarded::wanted(&a) => guarded::run(&a, json),
        Command::Replay(a) if transform::wanted(&a) => transform::run(&a, json),
        Command::Replay(a) => change::replay(&a, json),
        Command::Delete(a) => change::delete(&a, json),
        Command::Purge(a) => change::purge(&a, json),
        Command::Enqueue(a) => change::enqueue(&a, json),
        Command::MarkReprocessed(a) => change::mark(&a, json),
        Command::Export(a) => transfer::export(&a, json),
        Command::Import(a) => transfer::import(&a, json),
        Command::Verify(a) => check::verify(&a, json),
        Command::Workers(a) => workers::workers(&a, json),
        Command::Messages(a) => messages::list(&a, json),
        Command::Message(a) => messages::show(&a, json),
        Command::RetryNow(a) => messages::act(&a, messages::Act::RetryNow, json),
        Command::Delay(a) => messages::delay(&a, json),
        Command::DeadLetter(a) => {
            let act = messages::Act::MoveToDlq(a.reason.clone());
            messages::act(&a.action, act, json)
        }
        Command::DeleteMessage(a) => messages::act(&a, messages::Act::Delete, json),
        Command::Serve(a) => serve::serve(&a, json),
        #[cfg(feature = "jetstream")]
        Command::Forward(a) => forward::forward(&a, json),
        #[cfg(feature = "jetstream")]
        Command::Fleet(_) => Err(CliError::Usage(format!(
            "fleet works on a JetStream namespace (nats://HOST:PORT/NAMESPACE), not on {}",
            cli.command.target().display()
        ))),
        Command::Completions(_) => Ok(()),
    }
}
