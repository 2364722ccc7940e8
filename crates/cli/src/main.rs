//! `deadletter`: the operator's command-line tool for a deadletter store directory, or a
//! queue namespace on NATS JetStream.
//!
//! Every command takes the store directory as its first argument (or, in its place,
//! `nats://host:port/namespace`: see [`remote`]), prints aligned tables for
//! people (fitted to the terminal) and, with `--json`, stable JSON for scripts. Reads work
//! on a snapshot whoever holds the store; changes to a store another process holds go
//! through its control socket ([`live`], [`store_access`]). Exit codes: 0 success, 1 the
//! operation failed (including a change to a store held by a process that serves no
//! control socket, which is left untouched), 2 bad usage. Errors go to stderr as one line,
//! a JSON object with `--json`. Long operations draw a progress bar on stderr when it is a
//! terminal, never in a pipe.
//!
//! Modules: [`cli`] (the argument grammar), [`browse`] (stats, list, show, analyze),
//! [`change`] (replay, delete, purge, mark-reprocessed, enqueue), [`transfer`] (export,
//! import),
//! [`check`] (verify), [`trace`] (a message's life), [`past`] (DLQs as of a past time),
//! [`serve`] (the dashboard), [`remote`] (the commands on JetStream),
//! [`forward`] (the forwarder to JetStream), [`fleet`] (the fleet DLQ on JetStream),
//! [`live`] (a store another process holds),
//! and helpers: [`error`], [`output`],
//! [`progress`], [`timefmt`], [`store_access`].

mod browse;
mod change;
mod check;
mod cli;
mod error;
mod fleet;
mod forward;
mod guarded;
mod live;
mod output;
mod past;
mod progress;
mod remote;
mod serve;
mod store_access;
mod timefmt;
mod trace;
mod transfer;

use std::process::ExitCode;

use clap::Parser;

use crate::cli::{Cli, Command};
use crate::error::CliError;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if wants_json() && e.use_stderr() => {
            // A usage error, for a script: one JSON object, exit 2.
            let message = e.kind().to_string();
            let detail = e.render().to_string();
            let err = CliError::Usage(format!("{message}: {}", detail.trim()));
            eprintln!("{}", err.to_json());
            return ExitCode::from(2);
        }
        // Help and version print and exit 0; usage errors print and exit 2.
        Err(e) => e.exit(),
    };
    let json = cli.json;
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            if json {
                eprintln!("{}", e.to_json());
            } else {
                eprintln!("error: {e}");
            }
            ExitCode::from(e.exit_code())
        }
    }
}

/// True when `--json` is among the arguments (for errors found before they are parsed).
fn wants_json() -> bool {
    std::env::args_os().skip(1).any(|a| a == "--json")
}

fn run(cli: Cli) -> Result<(), CliError> {
    let json = cli.json;
    if let Command::Completions(a) = &cli.command {
        let mut command = <Cli as clap::CommandFactory>::command();
        clap_complete::generate(a.shell, &mut command, "deadletter", &mut std::io::stdout());
        return Ok(());
    }
    if let Some((url, namespace)) = remote::parse_target(cli.command.target()) {
        return remote::run(&url, &namespace, &cli.command, json);
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
        Command::Replay(a) => change::replay(&a, json),
        Command::Delete(a) => change::delete(&a, json),
        Command::Purge(a) => change::purge(&a, json),
        Command::Enqueue(a) => change::enqueue(&a, json),
        Command::MarkReprocessed(a) => change::mark(&a, json),
        Command::Export(a) => transfer::export(&a, json),
        Command::Import(a) => transfer::import(&a, json),
        Command::Verify(a) => check::verify(&a, json),
        Command::Serve(a) => serve::serve(&a, json),
        Command::Forward(a) => forward::forward(&a, json),
        Command::Fleet(_) => Err(CliError::Usage(format!(
            "fleet works on a JetStream namespace (nats://HOST:PORT/NAMESPACE), not on {}",
            cli.command.target().display()
        ))),
        Command::Completions(_) => Ok(()),
    }
}
