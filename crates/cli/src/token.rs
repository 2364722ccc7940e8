//! The dashboard's token (`serve`, `forward --serve`): where it came from and whether it
//! may be printed.
//!
//! A token given with `--token` is in the command line already (and `ps`): printing it
//! hides nothing. One from `$DEADLETTER_TOKEN` or `--token-file` was put there so that it
//! is seen nowhere else, so it is never printed; nor is a random one when nobody needs
//! it (`serve --read-only` on loopback, whose changes are refused and whose reads are
//! open). A random one is printed otherwise: it is the only way to learn it.

use std::path::{Path, PathBuf};

use crate::cli::TokenArgs;
use crate::error::CliError;

/// The environment variable a token may come from.
pub const TOKEN_ENV: &str = "DEADLETTER_TOKEN";

/// Where the token came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenSource {
    /// None was given: the dashboard makes a random one.
    Random,
    /// `--token`.
    Flag,
    /// `$DEADLETTER_TOKEN`.
    Env,
    /// `--token-file PATH`.
    File(PathBuf),
}

impl TokenSource {
    /// The `token_from` field of `--json` output.
    pub fn key(&self) -> &'static str {
        match self {
            TokenSource::Random => "random",
            TokenSource::Flag => "flag",
            TokenSource::Env => "env",
            TokenSource::File(_) => "file",
        }
    }

    /// Whether the token it gives may be printed: not when it came from the environment
    /// or a file (see the module doc).
    pub fn printable(&self) -> bool {
        matches!(self, TokenSource::Random | TokenSource::Flag)
    }

    /// Where a token that is not printed came from, for people.
    pub fn describe(&self) -> String {
        match self {
            TokenSource::Random => "a random one".into(),
            TokenSource::Flag => "--token".into(),
            TokenSource::Env => format!("${TOKEN_ENV}"),
            TokenSource::File(path) => path.display().to_string(),
        }
    }
}

/// The token the arguments give (`None`: the dashboard makes a random one) and where it
/// came from: `--token`, `--token-file`, or else a non-empty `$DEADLETTER_TOKEN`.
pub fn resolve(args: &TokenArgs) -> Result<(Option<String>, TokenSource), CliError> {
    if let Some(t) = &args.token {
        return Ok((Some(t.clone()), TokenSource::Flag));
    }
    if let Some(path) = &args.token_file {
        return Ok((Some(read_file(path)?), TokenSource::File(path.clone())));
    }
    match std::env::var(TOKEN_ENV) {
        Ok(t) if !t.trim().is_empty() => Ok((Some(t.trim().to_string()), TokenSource::Env)),
        Ok(_) | Err(std::env::VarError::NotPresent) => Ok((None, TokenSource::Random)),
        Err(std::env::VarError::NotUnicode(_)) => {
            Err(CliError::Usage(format!("${TOKEN_ENV} is not valid UTF-8")))
        }
    }
}

/// The token in `path`: its first line, trimmed.
fn read_file(path: &Path) -> Result<String, CliError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| CliError::io(format!("read the token file {}", path.display()), e))?;
    let token = text.lines().next().unwrap_or("").trim();
    if token.is_empty() {
        return Err(CliError::Usage(format!(
            "the token file {} is empty",
            path.display()
        )));
    }
    Ok(token.to_string())
}
